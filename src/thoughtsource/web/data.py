"""The ThoughtSource data a server shows: loading, lookup by (dataset, split, sample id), filters, export.

Items are only ever looked up in the loaded collection: a dataset, split, sample id or CoT id from a
URL is a dictionary key, never part of a file path; anything not loaded is :class:`NotFound`.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..collection import Collection
from ..errors import ThoughtSourceError
from ..io import atomic_write
from ..schema import Annotation, GeneratedCot, Sample
from .db import AnnotationRow, CotRef

log = logging.getLogger(__name__)

_MODEL_NAME = re.compile(r"""['"]name['"]\s*:\s*['"]([^'"]{1,200})['"]""")


class NotFound(ThoughtSourceError, LookupError):
    """A dataset, split, sample or CoT that is not in the served data (HTTP 404)."""


def model_name(cot: GeneratedCot) -> str:
    """The model's name: ``model["name"]``, or the ``'name': '…'`` inside the string the original tools stored."""
    m = cot.model
    if isinstance(m, dict):
        return str(m.get("name") or "")
    if isinstance(m, str):
        found = _MODEL_NAME.search(m)
        return found.group(1) if found else m[:200]
    return ""


def cot_id(cot: GeneratedCot, index: int) -> str:
    """The CoT's id, or ``cot-<index>`` for the (rare) CoTs stored without one."""
    return cot.id if cot.id else f"cot-{index}"


def cot_correct(cot: GeneratedCot) -> bool | None:
    """True/False when the CoT's answers carry correctness marks (all correct / any wrong); None if unmarked."""
    marks = [a.correct_answer for a in cot.answers if a.correct_answer is not None]
    if not marks:
        return None
    return all(marks)


@dataclass
class Filters:
    dataset: str = ""
    split: str = ""
    type: str = ""
    model: str = ""
    trigger: str = ""
    correct: str = ""  # "", "correct", "incorrect", "unmarked"
    annotated: str = ""  # "", "yes", "no"
    q: str = ""

    def query(self) -> dict[str, str]:
        return {k: v for k, v in vars(self).items() if v}

    def cot_matches(self, cot: GeneratedCot) -> bool:
        if self.model and model_name(cot) != self.model:
            return False
        if self.trigger and (cot.cot_trigger or "") != self.trigger:
            return False
        if self.correct:
            c = cot_correct(cot)
            want = {"correct": True, "incorrect": False, "unmarked": None}.get(self.correct, "?")
            if c != want:
                return False
        return True


@dataclass(frozen=True)
class Item:
    position: int
    dataset: str
    split: str
    sample: Sample

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.dataset, self.split, self.sample.id)


class ServedData:
    """The merged collection of the served files, indexed for lookup, filtering and search."""

    def __init__(self, collection: Collection, files: Sequence[Path] = ()) -> None:
        self.collection = collection
        self.files = list(files)
        self.items: list[Item] = []
        self._index: dict[tuple[str, str, str], Item] = {}
        self._text: list[str] = []
        for d, s, x in collection.samples():
            key = (d, s, x.id)
            if key in self._index:
                log.warning("%s/%s/%s: duplicate sample id; only the first one is served", d, s, x.id)
                continue
            item = Item(len(self.items), d, s, x)
            self.items.append(item)
            self._index[key] = item
            parts = [x.question, x.context or "", *x.choices, *x.cot, *(c.cot or "" for c in x.generated_cot)]
            self._text.append("\n".join(parts).lower())
        cots = [c for it in self.items for c in it.sample.generated_cot]
        self.total_cots = len(cots)
        self.facets = {
            "dataset": sorted({it.dataset for it in self.items}),
            "split": sorted({it.split for it in self.items}),
            "type": sorted({it.sample.type for it in self.items}),
            "model": sorted({n for c in cots if (n := model_name(c))}),
            "trigger": sorted({c.cot_trigger for c in cots if c.cot_trigger}),
        }

    @classmethod
    def load(cls, files: Sequence[Path]) -> ServedData:
        """Load and merge ThoughtSource files (``Collection.load`` + ``Collection.merge``)."""
        if not files:
            raise ThoughtSourceError("no data files given")
        merged: Collection | None = None
        for f in files:
            c = Collection.load(f)
            merged = c if merged is None else merged.merge(c)
        assert merged is not None
        data = cls(merged, files)
        log.info("serving %d samples and %d generated CoTs from %d file(s)", len(data.items), data.total_cots, len(files))
        return data

    # ------------------------------------------------------------------ lookup
    def item(self, dataset: str, split: str, sample_id: str) -> Item:
        found = self._index.get((dataset, split, sample_id))
        if found is None:
            raise NotFound("no such sample in the served data")
        return found

    def cot_ref(self, dataset: str, split: str, sample_id: str, cot: str) -> CotRef:
        item = self.item(dataset, split, sample_id)
        if cot not in {cot_id(c, i) for i, c in enumerate(item.sample.generated_cot)}:
            raise NotFound("no such generated CoT in this sample")
        return CotRef(dataset, split, sample_id, cot)

    # ------------------------------------------------------------------ filters
    def select(self, f: Filters, annotated: set[tuple[str, str, str]]) -> list[Item]:
        q = f.q.strip().lower()
        cot_level = bool(f.model or f.trigger or f.correct)
        out = []
        for it, text in zip(self.items, self._text, strict=True):
            x = it.sample
            if (f.dataset and it.dataset != f.dataset) or (f.split and it.split != f.split) or (f.type and x.type != f.type):
                continue
            if cot_level and not any(f.cot_matches(c) for c in x.generated_cot):
                continue
            if f.annotated == "yes" and it.key not in annotated:
                continue
            if f.annotated == "no" and it.key in annotated:
                continue
            if q and q not in text:
                continue
            out.append(it)
        return out

    # ------------------------------------------------------------------ export
    def with_annotations(self, rows: Iterable[AnnotationRow]) -> tuple[Collection, int, int]:
        """A copy of the collection with ``rows`` written into ``generated_cot.annotations``.

        Each row becomes ``{author, date, key, value}``; an annotation already in the file with the
        same author and key is replaced (so exporting twice gives the same file).  Returns the
        collection, the number of rows written and the number of rows whose CoT is not served.
        """
        out = self.collection.select(split=None)
        cots: dict[CotRef, GeneratedCot] = {}
        for d, s, x in out.samples():
            for i, c in enumerate(x.generated_cot):
                cots.setdefault(CotRef(d, s, x.id, cot_id(c, i)), c)
        written = missing = 0
        for r in rows:
            cot = cots.get(r.ref)
            if cot is None:
                missing += 1
                continue
            cot.annotations = [a for a in cot.annotations if not (a.author == r.annotator and a.key == r.key)]
            cot.annotations.append(Annotation(author=r.annotator, date=r.updated, key=r.key, value=r.value))
            written += 1
        if missing:
            log.warning("%d annotation(s) refer to CoTs that are not in the served files; not exported", missing)
        return out, written, missing

    def export_json(self, rows: Iterable[AnnotationRow], path: Path) -> int:
        collection, written, _ = self.with_annotations(rows)
        collection.dump(path)
        return written

    def csv_rows(self, rows: Iterable[AnnotationRow]) -> list[list[str]]:
        models = {
            CotRef(it.dataset, it.split, it.sample.id, cot_id(c, i)): model_name(c)
            for it in self.items
            for i, c in enumerate(it.sample.generated_cot)
        }
        out = [["dataset", "split", "sample_id", "cot_id", "model", "annotator", "date", "key", "value"]]
        for r in rows:
            value = r.value if isinstance(r.value, str) else json.dumps(r.value)
            out.append([r.ref.dataset, r.ref.split, r.ref.sample_id, r.ref.cot_id, models.get(r.ref, ""), r.annotator,
                        r.updated, r.key, value])
        return out

    def export_csv(self, rows: Iterable[AnnotationRow], path: Path) -> int:
        table = self.csv_rows(rows)
        with atomic_write(path, encoding="utf-8") as fh:
            csv.writer(fh).writerows(table)
        return len(table) - 1
