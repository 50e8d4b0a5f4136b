"""k samples kept across iterations (``sampling.accumulate``; RFT, Yuan et al. 2023; ReST-EM, Singh et al. 2023).

Iteration n trains (from the base) on the union of the distinct rationales that iterations 1..n kept after the run's
filter: iteration n-1's training set (``iter_{n-1}/train.jsonl``) in its order, then this iteration's records that
are not in it.  Two records are one when they are for the same problem and their completions are equal up to white
space (:func:`rationale_key`, the key the dataset step also deduplicates one iteration's k samples with); the first
one found is the one kept.  ``sampling.max_kept`` caps the union's records per problem (the earliest stay).

Durability: the union is not a store appended to in place.  Each iteration's ``train.jsonl`` is the whole union,
written once, atomically, as the dataset step's last file (the step's marker), and computed only from files that are
themselves written atomically: the previous iteration's ``train.jsonl`` and this iteration's ``generate.json`` and
``rationalize.json``.  A kill at any point leaves either no ``train.jsonl`` (the step is computed again from the same
inputs, to the same union) or the whole one, so a resumed run loses nothing and counts nothing twice.  The step's
report (``filter.json``'s ``accumulated``) records the sizes and the SHA-256 of the previous union it was built on.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .tasks import TrainingRecord


def rationale_key(text: str) -> str:
    """A rationale's text up to white space: two texts with one key are one training record."""
    return " ".join(text.split())


def file_sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def accumulate(previous: Sequence[TrainingRecord], new: Sequence[TrainingRecord], *,
               max_kept: int | None = None) -> tuple[list[TrainingRecord], dict[str, Any]]:
    """The union of ``previous`` (in its order) and the records of ``new`` not in it, and what it counted.

    ``new`` holds one iteration's kept records (already distinct per problem); ``previous`` the union so far.
    """
    seen = {(r.id, rationale_key(r.completion)) for r in previous}
    per_problem = Counter(r.id for r in previous)
    union = list(previous)
    already = capped = 0
    for r in new:
        key = (r.id, rationale_key(r.completion))
        if key in seen:
            already += 1
            continue
        if max_kept is not None and per_problem[r.id] >= max_kept:
            capped += 1
            continue
        seen.add(key)
        per_problem[r.id] += 1
        union.append(r)
    return union, {"previous": len(previous), "kept_this_iteration": len(new), "already_in_union": already,
                   "capped": capped, "new": len(union) - len(previous), "union": len(union),
                   "problems": len(per_problem), "rationalized": sum(r.rationalized for r in union)}
