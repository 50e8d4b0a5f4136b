"""Annotations of the annotation database: labels, comments, stars, step labels; CoT ids."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ...errors import DataError, StoreError
from .connection import Database
from .rows import STEP_KEY, STEP_VALUES, AnnotationRow, CotRef, _row, now, step_labels_problem


class Annotations(Database):
    """One row per (CoT, annotator, key): writes, queries, step labels and the renaming of positional CoT ids."""

    # ------------------------------------------------------------------ annotations
    def upsert(self, ref: CotRef, annotator: str, key: str, value: Any) -> AnnotationRow:
        """Insert or replace the (CoT, annotator, key) annotation; returns the stored row."""
        t = now()
        with self.connect(write=True) as conn:
            conn.execute(
                "INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (dataset, split, sample_id, cot_id, annotator, key) DO UPDATE SET value = excluded.value, "
                "updated = excluded.updated",
                (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, key, json.dumps(value), t, t),
            )
            r = conn.execute(
                "SELECT * FROM annotations WHERE dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? AND annotator = ? "
                "AND key = ?",
                (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, key),
            ).fetchone()
        return _row(r)

    def import_rows(self, rows: list[AnnotationRow]) -> int:
        """Store rows read from a file (annotator, key, value and date kept), replacing the same (CoT, annotator, key)."""
        with self.connect(write=True) as conn:
            for r in rows:
                t = r.updated or now()
                conn.execute(
                    "INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, split, sample_id, cot_id, annotator, key) "
                    "DO UPDATE SET value = excluded.value, updated = excluded.updated",
                    (r.ref.dataset, r.ref.split, r.ref.sample_id, r.ref.cot_id, r.annotator, r.key, json.dumps(r.value), t, t),
                )
        return len(rows)

    def set_preferred(self, ref: CotRef, annotator: str, preferred: bool) -> AnnotationRow | None:
        """Star (or un-star) a CoT; one preferred CoT per sample and annotator, in one transaction."""
        t = now()
        with self.connect(write=True) as conn:
            conn.execute(
                "DELETE FROM annotations WHERE dataset = ? AND split = ? AND sample_id = ? AND annotator = ? AND key = 'preferred'",
                (ref.dataset, ref.split, ref.sample_id, annotator),
            )
            if not preferred:
                return None
            cur = conn.execute(
                "INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                "VALUES (?, ?, ?, ?, ?, 'preferred', 'true', ?, ?)",
                (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, t, t),
            )
            r = conn.execute("SELECT * FROM annotations WHERE id = ?", (cur.lastrowid,)).fetchone()
        return _row(r)

    def delete_key(self, ref: CotRef, annotator: str, key: str) -> bool:
        with self.connect(write=True) as conn:
            cur = conn.execute(
                "DELETE FROM annotations WHERE dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? AND annotator = ? AND key = ?",
                (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, key),
            )
            return cur.rowcount > 0

    def get(self, annotation_id: int) -> AnnotationRow | None:
        with self.connect() as conn:
            r = conn.execute("SELECT * FROM annotations WHERE id = ?", (annotation_id,)).fetchone()
        return _row(r) if r else None

    def delete(self, annotation_id: int, annotator: str) -> bool:
        """Delete a row by id, only if it belongs to ``annotator`` (the check is part of the statement)."""
        with self.connect(write=True) as conn:
            cur = conn.execute("DELETE FROM annotations WHERE id = ? AND annotator = ?", (annotation_id, annotator))
            return cur.rowcount > 0

    def annotations(
        self,
        *,
        dataset: str | None = None,
        split: str | None = None,
        sample_id: str | None = None,
        annotator: str | None = None,
    ) -> list[AnnotationRow]:
        where, args = [], []
        for col, val in (("dataset", dataset), ("split", split), ("sample_id", sample_id), ("annotator", annotator)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = "SELECT * FROM annotations" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        with self.connect() as conn:
            return [_row(r) for r in conn.execute(sql, args)]

    def annotated_samples(self, annotator: str | None = None) -> set[tuple[str, str, str]]:
        """(dataset, split, sample id) of the samples with at least one annotation (of ``annotator``, or anyone's)."""
        sql = "SELECT DISTINCT dataset, split, sample_id FROM annotations"
        args: tuple[str, ...] = ()
        if annotator is not None:
            sql += " WHERE annotator = ?"
            args = (annotator,)
        with self.connect() as conn:
            return {(r[0], r[1], r[2]) for r in conn.execute(sql, args)}

    def annotated_cots(self) -> dict[str, set[CotRef]]:
        """Per annotator: the CoTs they annotated (any key)."""
        out: dict[str, set[CotRef]] = {}
        with self.connect() as conn:
            for r in conn.execute("SELECT DISTINCT annotator, dataset, split, sample_id, cot_id FROM annotations"):
                out.setdefault(r[0], set()).add(CotRef(r[1], r[2], r[3], r[4]))
        return out

    def count(self) -> int:
        with self.connect() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM annotations").fetchone()[0])

    # ------------------------------------------------------------------ step labels
    def set_step(self, ref: CotRef, annotator: str, n_steps: int, step: int, *, label: int | object | None = ...,
                 first_error: bool | None = None) -> AnnotationRow:
        """Change one step of ``annotator``'s step labels of a CoT (read-modify-write in one transaction).

        ``label`` sets step ``step`` to +1 / 0 / -1 (None clears it; ``...`` leaves it); ``first_error=True``
        marks the step as the first error (and labels it -1, as PRM800K does), ``False`` unmarks it.  A change whose
        result breaks :func:`step_labels_problem` is refused (:class:`DataError` naming the field) and nothing is
        stored: labelling the first error +1 (``e`` then ``+`` stored a first error on a +1 step), a -1 before it, or
        marking a first error after a step labelled -1.
        """
        if not 0 <= step < n_steps:
            raise StoreError(f"step {step} out of range (this CoT has {n_steps} steps)")
        if label is not ... and label is not None and label not in STEP_VALUES:
            raise StoreError(f"a step label is one of {STEP_VALUES}, got {label!r}")
        args = (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, STEP_KEY)
        where = "dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? AND annotator = ? AND key = ?"
        t = now()
        with self.connect(write=True) as conn:
            r = conn.execute(f"SELECT value FROM annotations WHERE {where}", args).fetchone()
            value = json.loads(r["value"]) if r else {}
            labels = list(value.get("labels") or [])
            labels = (labels + [None] * n_steps)[:n_steps]
            first = value.get("first_error")
            if label is not ...:
                labels[step] = label
            if first_error is True:
                first, labels[step] = step, -1
            elif first_error is False and first == step:
                first = None
            if first is not None and not 0 <= first < n_steps:
                first = None
            problem = step_labels_problem({"labels": labels, "first_error": first}, n_steps)
            if problem is not None:
                field = "first_error" if first_error is not None else "label"
                raise DataError(problem[1], field=field)
            new = json.dumps({"labels": labels, "first_error": first})
            conn.execute(
                "INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, split, sample_id, cot_id, annotator, key) "
                "DO UPDATE SET value = excluded.value, updated = excluded.updated",
                (*args, new, t, t),
            )
            row = conn.execute(f"SELECT * FROM annotations WHERE {where}", args).fetchone()
        return _row(row)

    # ------------------------------------------------------------------ CoT ids
    def positional_cot_refs(self) -> list[CotRef]:
        """The distinct CoTs that annotations or adjudications address as ``cot-<n>``: the id the versions before
        stable ids gave a CoT without one (its position in the merged sample)."""
        sql = ("SELECT DISTINCT dataset, split, sample_id, cot_id FROM {} WHERE cot_id GLOB 'cot-[0-9]*' "
               "AND NOT cot_id GLOB 'cot-*[^0-9]*'")
        with self.connect() as conn:
            found = {CotRef(*r) for t in ("annotations", "adjudications") for r in conn.execute(sql.format(t))}
        return sorted(found, key=lambda r: (r.dataset, r.split, r.sample_id, r.cot_id))

    def derived_cot_refs(self) -> list[CotRef]:
        """The distinct CoTs that annotations or adjudications address by a derived id (``h-...``, see
        ``data.derived_cot_id``)."""
        sql = "SELECT DISTINCT dataset, split, sample_id, cot_id FROM {} WHERE cot_id GLOB 'h-*'"
        with self.connect() as conn:
            found = {CotRef(*r) for t in ("annotations", "adjudications") for r in conn.execute(sql.format(t))}
        return sorted(found, key=lambda r: (r.dataset, r.split, r.sample_id, r.cot_id))

    def rename_cots(self, renames: dict[CotRef, str]) -> int:
        """Give the annotations and adjudications of each CoT its new id, in one transaction; returns the rows
        changed.  A row whose new address is taken (the same annotator and key on the new id) fails it all."""
        n = 0
        try:
            with self.connect(write=True) as conn:
                for ref, new in renames.items():
                    for table in ("annotations", "adjudications"):
                        n += conn.execute(f"UPDATE {table} SET cot_id = ? WHERE dataset = ? AND split = ? AND sample_id = ? "
                                          "AND cot_id = ?", (new, ref.dataset, ref.split, ref.sample_id, ref.cot_id)).rowcount
        except sqlite3.IntegrityError as e:
            raise StoreError(f"{self.path}: cannot give the CoTs their stable ids: {e}") from None
        return n
