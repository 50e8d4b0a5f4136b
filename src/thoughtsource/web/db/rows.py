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


def normalize_name(name: str) -> str:
    """A user name as stored and looked up: NFKC, surrounding spaces removed, case folded ("Alice " → "alice")."""
    return unicodedata.normalize("NFKC", name).strip().casefold()


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
