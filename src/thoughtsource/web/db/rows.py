"""The annotation database's rows and names: CoT addresses, users, annotation rows; name normalisation; the clock."""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
import unicodedata
from dataclasses import dataclass
from typing import Any

ROLES = ("viewer", "annotator", "admin")
BUSY_TIMEOUT_MS = 30_000
STEP_KEY = "step_labels"  # the annotation key of per-step labels: {"labels": [1|0|-1|null, ...], "first_error": k|null}
STEP_VALUES = (-1, 0, 1)  # PRM800K: incorrect, neutral, correct
MAX_NAME = 100


def step_labels_problem(value: Any, n_steps: int, *, explicit: bool = False) -> tuple[str, str] | None:
    """The one rule of step labels, on every path that stores them (a step saved from the keyboard or the API, a
    final value set on /adjudicate, an import) and reported by ``annotations export``: ``first_error``, when set,
    names a step labelled -1, and no step before it is labelled -1 (the first error is the first wrong step).
    ``explicit`` (adjudicating a CoT whose steps nobody labelled): every step carries a label of its own.

    ``value`` is ``{"labels": [1|0|-1|null, ...], "first_error": k|null}`` of a CoT of ``n_steps`` steps (steps
    counted from 0; missing labels are null).  Returns (the field at fault, why) or None when the rule holds."""
    if not isinstance(value, dict):
        return "value", "step labels are {\"labels\": [...], \"first_error\": k or null}"
    labels = list(value.get("labels") or [])
    first = value.get("first_error")
    if len(labels) > n_steps or any(v is not None and (type(v) is not int or v not in STEP_VALUES) for v in labels):
        return "labels", f"at most {n_steps} labels (one per step), each 1, 0, -1 or null"
    labels += [None] * (n_steps - len(labels))
    if explicit and None in labels:
        return "labels", (f"nobody labelled the steps of this CoT: give a label to each of its {n_steps} steps "
                          f"(step {labels.index(None)} has none)")
    if first is None:
        return None
    if type(first) is not int or not 0 <= first < n_steps:
        return "first_error", f"first_error {first!r} is not a step of this CoT (0 to {n_steps - 1}, or null)"
    if labels[first] != -1:
        return "first_error", (f"step {first} is marked the first error but labelled {labels[first]!r}; "
                               "the first error is a step labelled -1")
    earlier = next((j for j in range(first) if labels[j] == -1), None)
    if earlier is not None:
        return "labels", (f"step {earlier} is labelled -1 before the first error (step {first}); the first error "
                          "is the first step labelled -1")
    return None


def normalize_name(name: str) -> str:
    """A user name as stored and looked up: NFKC, surrounding spaces removed, case folded ("Alice " → "alice")."""
    return unicodedata.normalize("NFKC", name).strip().casefold()


# Letters that look like a Latin letter or digit in a lower-case name (the one-letter entries of Unicode's
# confusables.txt for the Cyrillic, Greek and Latin letters a name is likely to mix in, and the digits), and the
# letter pairs that read as one letter.  A small table, not all of confusables.txt: no maintained package for it is
# installed here; it covers the look-alikes of issue 42 (Cyrillic о, а, е, р, с, ...) and the usual ones.
_CONFUSABLE = str.maketrans({
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j", "к": "k",
    "ӏ": "l", "м": "m", "п": "n", "о": "o", "р": "p", "ԛ": "q", "г": "r", "ѕ": "s", "т": "t", "ц": "u", "у": "y",
    "ѵ": "v", "ԝ": "w", "х": "x", "ү": "y", "α": "a", "β": "b", "ϲ": "c", "ε": "e", "η": "n", "ι": "i", "κ": "k",
    "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ı": "i", "ɡ": "g", "ʟ": "l", "ɑ": "a",
    "0": "o", "1": "l",
})
_CONFUSABLE_PAIRS = (("rn", "m"), ("vv", "w"), ("cl", "d"))


def invisible(ch: str) -> bool:
    """A character that shows nothing, or moves what follows: format (zero-width, bidi controls) and control ones."""
    return unicodedata.category(ch) in ("Cf", "Cc", "Zl", "Zp")


def name_skeleton(name: str) -> str:
    """What a user name looks like, for telling look-alikes apart (Unicode's "skeleton" idea, on a small table):
    normalised (:func:`normalize_name`), invisible characters and combining marks removed, look-alike letters,
    digits and letter pairs mapped to one form.  ``bob``, ``bob`` + U+200B and ``bоb`` (a Cyrillic о) share it."""
    s = unicodedata.normalize("NFD", normalize_name(name))
    s = "".join(ch for ch in s if not invisible(ch) and unicodedata.category(ch) != "Mn").translate(_CONFUSABLE)
    for pair, one in _CONFUSABLE_PAIRS:
        s = s.replace(pair, one)
    return s


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class CotRef:
    """Where a generated CoT lives in the served data."""

    dataset: str
    split: str
    sample_id: str
    cot_id: str


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str
    disabled: bool = False

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def can_write(self) -> bool:
        """Viewers only read."""
        return self.role in ("annotator", "admin")


def _user(r: sqlite3.Row) -> User:
    return User(r["id"], r["name"], r["role"], bool(r["disabled"]))


@dataclass(frozen=True)
class AnnotationRow:
    id: int
    ref: CotRef
    annotator: str
    key: str
    value: Any
    created: str
    updated: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dataset": self.ref.dataset,
            "split": self.ref.split,
            "sample_id": self.ref.sample_id,
            "cot_id": self.ref.cot_id,
            "annotator": self.annotator,
            "key": self.key,
            "value": self.value,
            "updated": self.updated,
        }


def _row(r: sqlite3.Row, who: str = "annotator") -> AnnotationRow:
    """An ``annotations`` row (or, with ``who="adjudicator"``, an ``adjudications`` row)."""
    return AnnotationRow(
        id=r["id"],
        ref=CotRef(r["dataset"], r["split"], r["sample_id"], r["cot_id"]),
        annotator=r[who],
        key=r["key"],
        value=json.loads(r["value"]),
        created=r["created"],
        updated=r["updated"],
    )
