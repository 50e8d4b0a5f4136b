"""The ThoughtSource data a server shows: loading, lookup by (dataset, split, sample id), filters, export.

Items are only ever looked up in the loaded collection: a dataset, split, sample id or CoT id from a
URL is a dictionary key, never part of a file path; anything not loaded is :class:`NotFound`.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from ..collection import Collection
from ..errors import ThoughtSourceError
from ..io import atomic_write
from ..schema import Annotation, GeneratedCot, Sample, model_name
from .db import STEP_KEY, AnnotationRow, CotRef, step_labels_problem
from .similarity import sentences

log = logging.getLogger(__name__)



class NotFound(ThoughtSourceError, LookupError):
    """A dataset, split, sample or CoT that is not in the served data (HTTP 404)."""


UPLOAD_SUFFIXES = (".json", ".jsonl", ".parquet")  # the files an admin may upload (and a start serves from upload_dir)
DERIVED_ID_PREFIX = "h-"


#: What says which CoT this is: its text and how, by what and when it was made.  Never its answers (``extract``,
#: ``evaluate --scored`` add and change them), annotations, comment, or keys other tools add (scores, ...).
IDENTITY_FIELDS = ("cot", "model", "api_service", "instruction", "cot_trigger", "cot_trigger_template", "prompt_text",
                   "fragments_version", "author", "date")


def _digest_id(content: Any) -> str:
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return DERIVED_ID_PREFIX + digest[:16]


def derived_cot_id(cot: GeneratedCot) -> str:
    """The id of a CoT stored without one: ``h-`` + 16 hex digits of the sha256 of its :data:`IDENTITY_FIELDS`
    (those that are set; None and "" alike left out).  Never its position, its file or the order of uploads
    (before, it was ``cot-<position>``, and a restart that merged the uploads in another order moved labels to
    another model's CoTs), and never what is added to a CoT later: before issue 42 it covered every field but
    ``id`` and ``annotations``, so ``evaluate --scored`` (which sets ``answers[].correct_answer``) gave every CoT
    a new id and 0 of 60 labels attached to the scored file.  Ids of that form are moved at ``serve``'s start
    (:func:`legacy_cot_ids`)."""
    return _digest_id({k: v for k in IDENTITY_FIELDS if (v := getattr(cot, k)) not in (None, "")})


def legacy_cot_ids(sample: Sample) -> dict[str, str]:
    """The ids versions before issue 42 gave the sample's CoTs without an id, each → the CoT's id now.  Those hashed
    every field but ``id`` and ``annotations``; both the CoT as it is and as it was before ``evaluate --scored`` (no
    ``correct_answer``: labels made before the file was scored) are mapped.  An old id that would name two CoTs now
    is left out (never a guess)."""
    out: dict[str, str] = {}
    ambiguous: set[str] = set()
    for unscored in (False, True):
        seen: Counter[str] = Counter()
        for cid, c in zip(cot_ids(sample), sample.generated_cot, strict=True):
            if c.id:
                continue
            if unscored:
                c = c.model_copy(update={"answers": [a.model_copy(update={"correct_answer": None}) for a in c.answers]})
            base = _digest_id(c.model_dump(mode="json", exclude={"id", "annotations"}, exclude_defaults=True))
            seen[base] += 1
            old = base if seen[base] == 1 else f"{base}-{seen[base]}"
            if out.get(old, cid) != cid:
                ambiguous.add(old)
            out[old] = cid
    return {old: new for old, new in out.items() if old not in ambiguous and old != new}


def cot_ids(sample: Sample) -> list[str]:
    """The ids of the sample's CoTs, in file order: the CoT's own id, else :func:`derived_cot_id` (the 2nd, 3rd ...
    identical id-less CoT of a sample gets ``-2``, ``-3``: the copies are indistinguishable, so which is which
    does not matter)."""
    out: list[str] = []
    seen: Counter[str] = Counter()
    for c in sample.generated_cot:
        if c.id:
            out.append(c.id)
            continue
        base = derived_cot_id(c)
        seen[base] += 1
        out.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return out


def id_clash(sample: Sample) -> str | None:
    """The first id two of the sample's CoTs would share: an explicit id equal to the id derived for another CoT
    without one (``h-...``), which would let a label given to one land on the other; None if there is none.  Cheap
    for the usual sample: only one with an explicit ``h-`` id and a CoT without an id is hashed."""
    explicit = {c.id for c in sample.generated_cot if c.id}
    if not any(i.startswith(DERIVED_ID_PREFIX) for i in explicit) or all(c.id for c in sample.generated_cot):
        return None
    derived = [cid for cid, c in zip(cot_ids(sample), sample.generated_cot, strict=True) if not c.id]
    return next((i for i in derived if i in explicit), None)


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

    @cached_property
    def cot_ids(self) -> list[str]:
        """:func:`cot_ids` of the sample (computed on first use: hashing every CoT of a large upload up front
        would slow the upload down)."""
        return cot_ids(self.sample)

    def cot(self, cot_id: str) -> GeneratedCot:
        """The sample's generated CoT with this :func:`cot_ids` id."""
        for cid, c in zip(self.cot_ids, self.sample.generated_cot, strict=True):
            if cid == cot_id:
                return c
        raise NotFound("no such generated CoT in this sample")


def sample_done(it: Item, done: set[CotRef]) -> bool:
    """Every CoT of the sample is in ``done`` (the CoTs with at least one annotation of a user: a label, comment,
    star, "reviewed" or step labels): the sample is finished for "next for me" and the queue progress."""
    return all(CotRef(it.dataset, it.split, it.sample.id, c) in done for c in it.cot_ids)


# Spreadsheets run cells that start with these as formulas (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: str) -> str:
    """``value`` with a leading apostrophe when a spreadsheet would read it as a formula."""
    return "'" + value if value.startswith(_FORMULA_START) else value


def write_csv(table: list[list[str]], fh: object) -> None:
    """Every cell through :func:`csv_safe` (the one CSV writer of the web exports)."""
    csv.writer(fh).writerows([[csv_safe(c) for c in row] for row in table])  # type: ignore[arg-type]


class ServedData:
    """The merged collection of the served files, indexed for lookup, filtering and search."""

    def __init__(self, collection: Collection, files: Sequence[Path] = (),
                 sources: Sequence[tuple[str, Collection]] | None = None) -> None:
        self.collection = collection
        self.files = list(files)
        # (name, collection) per input file, for exports per file
        self.sources: list[tuple[str, Collection]] = list(sources) if sources is not None else [
            (Path(f).name, collection) for f in files[:1]]
        self.items: list[Item] = []
        self._index: dict[tuple[str, str, str], Item] = {}
        self._shown: list[tuple[str, ...]] = []  # per item: the lower-cased texts the sample page shows, one per field
        self._reference: list[tuple[str, ...]] = []  # per item: the reference CoT's sentences (shown with the gold only)
        for d, s, x in collection.samples():
            key = (d, s, x.id)
            if key in self._index:
                log.warning("%s/%s/%s: duplicate sample id; only the first one is served", d, s, x.id)
                continue
            item = Item(len(self.items), d, s, x)
            self.items.append(item)
            self._index[key] = item
            self._shown.append(tuple(t.lower() for t in (x.question, x.context or "", *x.choices,
                                                           *(c.cot or "" for c in x.generated_cot)) if t))
            self._reference.append(tuple(t.lower() for t in x.cot if t))
        self._splits: dict[str, set[str]] = {}
        for it in self.items:
            self._splits.setdefault(it.dataset, set()).add(it.split)
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
        loaded = [(f, Collection.load(f)) for f in files]
        data = cls.from_collections(loaded)
        log.info("serving %d samples and %d generated CoTs from %d file(s)", len(data.items), data.total_cots, len(files))
        return data

    @classmethod
    def from_collections(cls, loaded: Sequence[tuple[Path, Collection]]) -> ServedData:
        merged: Collection | None = None
        for _, c in loaded:
            merged = c if merged is None else merged.merge(c)
        assert merged is not None
        return cls(merged, [f for f, _ in loaded], [(Path(f).name, c) for f, c in loaded])

    def with_file(self, path: Path, collection: Collection, cancel: threading.Event | None = None) -> ServedData:
        """A new ServedData serving one more file (the old one is not changed): the served collection merged with
        ``collection`` (the same as merging every file again, in one linear merge).  ``cancel``: see ``Collection.merge``."""
        data = ServedData(self.collection.merge(collection, cancel=cancel), [*self.files, path],
                          [*self.sources, (Path(path).name, collection)])
        log.info("serving %d samples and %d generated CoTs from %d file(s)", len(data.items), data.total_cots, len(data.files))
        return data

    # ------------------------------------------------------------------ lookup
    @property
    def index(self) -> dict[tuple[str, str, str], Item]:
        """(dataset, split, sample id) → item."""
        return self._index

    def item(self, dataset: str, split: str, sample_id: str) -> Item:
        found = self._index.get((dataset, split, sample_id))
        if found is None:
            raise NotFound("no such sample in the served data")
        return found

    def resolve(self, path: str) -> Item:
        """The sample at URL path ``dataset/split/sample id``; dataset and split names may contain "/"."""
        for d, splits in self._splits.items():
            if not path.startswith(d + "/"):
                continue
            rest = path[len(d) + 1 :]
            for s in splits:
                if rest.startswith(s + "/") and (found := self._index.get((d, s, rest[len(s) + 1 :]))):
                    return found
        raise NotFound("no such sample in the served data")

    def cot(self, ref: CotRef) -> GeneratedCot:
        return self.item(ref.dataset, ref.split, ref.sample_id).cot(ref.cot_id)

    def cot_ref(self, dataset: str, split: str, sample_id: str, cot: str) -> CotRef:
        item = self.item(dataset, split, sample_id)
        if cot not in item.cot_ids:
            raise NotFound("no such generated CoT in this sample")
        return CotRef(dataset, split, sample_id, cot)

    # ------------------------------------------------------------------ filters
    def select(self, f: Filters, annotated: set[tuple[str, str, str]], reference: bool = True) -> list[Item]:
        """The items that pass ``f``, in file order.  The search ``f.q`` matches within one shown field at a time (the
        question, the context, a choice, a generated CoT; with ``reference`` a sentence of the reference CoT, which the
        page shows with the gold answer only): never across fields, never a field the viewer is not shown.  Before, it
        matched the fields joined in file order, the reference CoT included, so a blind annotator read the hidden
        reference CoT and the CoTs' file order (the end of one + newline + the start of the next) by searching."""
        q = f.q.strip().lower()
        cot_level = bool(f.model or f.trigger or f.correct)
        out = []
        for it, shown, ref in zip(self.items, self._shown, self._reference, strict=True):
            x = it.sample
            if (f.dataset and it.dataset != f.dataset) or (f.split and it.split != f.split) or (f.type and x.type != f.type):
                continue
            if cot_level and not any(f.cot_matches(c) for c in x.generated_cot):
                continue
            if f.annotated == "yes" and it.key not in annotated:
                continue
            if f.annotated == "no" and it.key in annotated:
                continue
            if q and not any(q in t for t in shown) and not (reference and any(q in t for t in ref)):
                continue
            out.append(it)
        return out

    # ------------------------------------------------------------------ export
    def with_annotations(self, rows: Iterable[AnnotationRow], *, final: Iterable[AnnotationRow] = (),
                         only_author: str | None = None, source: int | None = None) -> tuple[Collection, int, int]:
        """A copy of the collection with ``rows`` written into ``generated_cot.annotations``.

        Each row becomes ``{author, date, key, value}``; an annotation already in the file with the
        same author and key is replaced (so exporting twice gives the same file).  ``final`` rows
        (adjudications) become ``{author: adjudicator, date, key, value, adjudicated: true}``, one per
        CoT and key.  ``only_author``: drop every annotation in the file by anyone else (an
        annotator's own export).  ``source``: only the samples of that input file.  Returns the
        collection, the number of rows written and the number of rows whose CoT is not in it.
        """
        base = self.collection if source is None else self.sources[source][1]
        out = base.select(split=None)
        cots: dict[CotRef, GeneratedCot] = {}
        for d, s, x in out.samples():
            for cid, c in zip(cot_ids(x), x.generated_cot, strict=True):
                cots.setdefault(CotRef(d, s, x.id, cid), c)
                if only_author is not None:
                    c.annotations = [a for a in c.annotations if a.author == only_author]
        written = missing = positional = 0
        for r in rows:
            cot = cots.get(r.ref)
            if cot is None:
                missing += 1
                positional += r.ref.cot_id.startswith("cot-")
                continue
            cot.annotations = [a for a in cot.annotations
                               if not (a.author == r.annotator and a.key == r.key and not getattr(a, "adjudicated", False))]
            cot.annotations.append(Annotation(author=r.annotator, date=r.updated, key=r.key, value=r.value))
            written += 1
        for r in final:
            cot = cots.get(r.ref)
            if cot is None:
                continue
            cot.annotations = [a for a in cot.annotations if not (a.key == r.key and getattr(a, "adjudicated", False))]
            cot.annotations.append(Annotation(author=r.annotator, date=r.updated, key=r.key, value=r.value, adjudicated=True))
            written += 1
        if missing and source is None:
            log.warning("%d annotation(s) refer to CoTs that are not in the served files; not exported%s", missing,
                        f" ({positional} name a CoT cot-<n>, by its position, as versions before stable CoT ids did: "
                        "`serve` moves them to the CoT's id where that is certain, see docs/design/web.md)"
                        if positional else "")
        return out, written, missing

    def export_json(self, rows: Iterable[AnnotationRow], path: Path, final: Iterable[AnnotationRow] = ()) -> int:
        collection, written, _ = self.with_annotations(rows, final=final)
        collection.dump(path)
        return written

    def csv_rows(self, rows: Iterable[AnnotationRow], final: Iterable[AnnotationRow] = ()) -> list[list[str]]:
        models = {
            CotRef(it.dataset, it.split, it.sample.id, cid): model_name(c)
            for it in self.items
            for cid, c in zip(it.cot_ids, it.sample.generated_cot, strict=True)
        }
        out = [["dataset", "split", "sample_id", "cot_id", "model", "annotator", "date", "key", "value", "adjudicated"]]
        for r, adjudicated in [*((r, "") for r in rows), *((r, "yes") for r in final)]:
            value = r.value if isinstance(r.value, str) else json.dumps(r.value)
            out.append([r.ref.dataset, r.ref.split, r.ref.sample_id, r.ref.cot_id, models.get(r.ref, ""), r.annotator,
                        r.updated, r.key, value, adjudicated])
        return out

    def export_csv(self, rows: Iterable[AnnotationRow], path: Path, final: Iterable[AnnotationRow] = ()) -> int:
        table = self.csv_rows(rows, final)
        with atomic_write(path, encoding="utf-8") as fh:
            write_csv(table, fh)
        return len(table) - 1

    def prm_records(self, rows: Iterable[AnnotationRow], final: Iterable[AnnotationRow] = (),
                    all_annotators: bool = False) -> tuple[list[dict], int]:
        """:func:`prm_records` of the served data."""
        return prm_records(self, rows, final, all_annotators)

    def export_prm_jsonl(self, rows: Iterable[AnnotationRow], path: Path, final: Iterable[AnnotationRow] = (),
                         all_annotators: bool = False) -> int:
        records, _ = self.prm_records(rows, final, all_annotators)
        with atomic_write(path, encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return len(records)


class CotLookup(Protocol):
    """What :func:`prm_records` needs of the data: a sample's :class:`Item` and a CoT by reference (each raising
    :class:`NotFound`); :class:`ServedData` in memory, ``training_data``'s on-disk index for files too large to load."""

    def item(self, dataset: str, split: str, sample_id: str) -> Item: ...

    def cot(self, ref: CotRef) -> GeneratedCot: ...


def prm_records(data: CotLookup, rows: Iterable[AnnotationRow], final: Iterable[AnnotationRow] = (),
                all_annotators: bool = False) -> tuple[list[dict], int]:
    """Step labels as reward-model training records, one per CoT (``all_annotators``: per CoT and annotator).

    A CoT's record carries the adjudicated labels when there are any, else the annotators' labels when
    they all agree (or only one labelled it); CoTs whose annotators disagree and that were not
    adjudicated are left out and counted (second value).  Steps are the CoT's sentences as the page
    shows them (:func:`similarity.sentences`); labels are +1 / 0 / -1 or null (not labelled).
    """
    by_cot: dict[CotRef, list[AnnotationRow]] = {}
    for r in rows:
        if r.key == STEP_KEY:
            by_cot.setdefault(r.ref, []).append(r)
    adjudicated = {r.ref: r for r in final if r.key == STEP_KEY}
    out: list[dict] = []
    unresolved = 0
    for ref in sorted(set(by_cot) | set(adjudicated), key=lambda r: (r.dataset, r.split, r.sample_id, r.cot_id)):
        try:
            item = data.item(ref.dataset, ref.split, ref.sample_id)
            cot = data.cot(ref)
        except NotFound:
            continue
        labelled = sorted(by_cot.get(ref, []), key=lambda r: r.annotator)
        chosen: list[tuple[Any, list[str], str | None]]
        if all_annotators:
            chosen = [(r.value, [r.annotator], None) for r in labelled]
        elif ref in adjudicated:
            a = adjudicated[ref]
            chosen = [(a.value, [r.annotator for r in labelled], a.annotator)]
        elif len({json.dumps(r.value, sort_keys=True) for r in labelled}) == 1:
            chosen = [(labelled[0].value, [r.annotator for r in labelled], None)]
        else:
            unresolved += 1
            continue
        steps = sentences(cot.cot or "")
        for value, annotators, adjudicator in chosen:
            labels = (list(value.get("labels") or []) + [None] * len(steps))[: len(steps)]
            out.append({
                "dataset": ref.dataset, "split": ref.split, "sample_id": ref.sample_id, "cot_id": ref.cot_id,
                "question": item.sample.question, "choices": item.sample.choices, "gold_answer": item.sample.answer,
                "steps": steps, "labels": labels, "first_error": value.get("first_error"),
                "annotator": adjudicator or annotators[0], "annotators": annotators, "adjudicated_by": adjudicator,
                "model": model_name(cot), "cot_trigger": cot.cot_trigger,
                "final_answer": [a.answer for a in cot.answers], "final_answer_correct": cot_correct(cot),
            })
    if unresolved:
        log.warning("%d CoT(s) whose annotators disagree on the step labels were left out; adjudicate them "
                    "or export with all annotators", unresolved)
    return out, unresolved


def step_label_problems(data: CotLookup, rows: Iterable[AnnotationRow], final: Iterable[AnnotationRow] = ()) -> list[str]:
    """One line per stored step-label value that breaks the rule of step labels (:func:`db.step_labels_problem`):
    ``rows`` are annotators' values, ``final`` adjudicated ones (which, on a CoT no annotator labelled, must label
    every step).  Values on CoTs that are not in ``data`` are not checked (they are not exported either)."""
    rows = list(rows)
    labelled = {r.ref for r in rows if r.key == STEP_KEY}
    out: list[str] = []
    for r, is_final in [*((r, False) for r in rows), *((r, True) for r in final)]:
        if r.key != STEP_KEY:
            continue
        try:
            cot = data.cot(r.ref)
        except NotFound:
            continue
        problem = step_labels_problem(r.value, len(sentences(cot.cot or "")), explicit=is_final and r.ref not in labelled)
        if problem is not None:
            who = f"final value by {r.annotator}" if is_final else r.annotator
            out.append(f"{r.ref.dataset}/{r.ref.split}/{r.ref.sample_id} CoT {r.ref.cot_id} ({who}): "
                       f"field '{problem[0]}': {problem[1]}")
    return out


def rows_from_collection(collection: Collection) -> tuple[list[AnnotationRow], list[AnnotationRow]]:
    """The annotations in a ThoughtSource collection as (rows, adjudications), the inverse of the export.

    Every annotation with an author becomes a row (the ``date`` kept); those marked ``adjudicated`` become
    adjudications.  Ids are 0 (not stored yet).
    """
    rows: list[AnnotationRow] = []
    final: list[AnnotationRow] = []
    for d, s, x in collection.samples():
        for cid, c in zip(cot_ids(x), x.generated_cot, strict=True):
            ref = CotRef(d, s, x.id, cid)
            for a in c.annotations:
                if not a.author:
                    continue
                row = AnnotationRow(0, ref, a.author, a.key, a.value, a.date or "", a.date or "")
                (final if getattr(a, "adjudicated", False) else rows).append(row)
    return rows, final
