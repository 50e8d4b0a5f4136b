"""Review work of the annotation database: assignments (work queues) and adjudications (final values)."""

from __future__ import annotations

import json
from typing import Any

from .connection import Database
from .rows import AnnotationRow, CotRef, _row, now


class Reviews(Database):
    """The admin's assignments of samples to annotators and adjudicated final values."""

    # ------------------------------------------------------------------ assignments
    def replace_assignments(self, rows: list[tuple[str, str, str, str]]) -> int:
        """Replace all assignments by ``rows`` of (dataset, split, sample id, annotator), in queue order."""
        t = now()
        with self.connect(write=True) as conn:
            conn.execute("DELETE FROM assignments")
            pos: dict[str, int] = {}
            for d, s, x, a in rows:
                pos[a] = pos.get(a, -1) + 1
                conn.execute("INSERT INTO assignments (dataset, split, sample_id, annotator, position, created) "
                             "VALUES (?, ?, ?, ?, ?, ?)", (d, s, x, a, pos[a], t))
        return len(rows)

    def assigned(self, annotator: str | None = None) -> dict[str, list[tuple[str, str, str]]]:
        """Per annotator (or only ``annotator``): the assigned samples in queue order."""
        sql = "SELECT annotator, dataset, split, sample_id FROM assignments"
        args: tuple[str, ...] = ()
        if annotator is not None:
            sql += " WHERE annotator = ?"
            args = (annotator,)
        out: dict[str, list[tuple[str, str, str]]] = {}
        with self.connect() as conn:
            for r in conn.execute(sql + " ORDER BY annotator, position", args):
                out.setdefault(r[0], []).append((r[1], r[2], r[3]))
        return out

    # ------------------------------------------------------------------ adjudications
    def adjudicate(self, ref: CotRef, key: str, value: Any, adjudicator: str, date: str | None = None) -> AnnotationRow | None:
        """Set (``value`` not None) or clear the final value of (CoT, key); returned as a row whose annotator is the adjudicator."""
        t = date or now()
        args = (ref.dataset, ref.split, ref.sample_id, ref.cot_id, key)
        with self.connect(write=True) as conn:
            if value is None:
                conn.execute("DELETE FROM adjudications WHERE dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? "
                             "AND key = ?", args)
                return None
            conn.execute(
                "INSERT INTO adjudications (dataset, split, sample_id, cot_id, key, value, adjudicator, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, split, sample_id, cot_id, key) DO UPDATE SET "
                "value = excluded.value, adjudicator = excluded.adjudicator, updated = excluded.updated",
                (*args, json.dumps(value), adjudicator, t, t),
            )
            r = conn.execute("SELECT * FROM adjudications WHERE dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? "
                             "AND key = ?", args).fetchone()
        return _row(r, "adjudicator")

    def adjudications(self) -> list[AnnotationRow]:
        """The final values, as rows whose ``annotator`` is the admin who set them."""
        with self.connect() as conn:
            return [_row(r, "adjudicator") for r in conn.execute("SELECT * FROM adjudications ORDER BY id")]
