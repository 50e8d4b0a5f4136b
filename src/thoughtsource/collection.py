"""Collection: a set of datasets and splits of ThoughtSource samples.

A facade over :mod:`thoughtsource.io` (formats), :mod:`thoughtsource.datasets` (the registry of
source datasets), :mod:`thoughtsource.generation` and :mod:`thoughtsource.evaluate`.  Compatible with
the published API (Figure 3 of the ThoughtSource paper)::

    c = Collection(["worldtree"]).select(split="train", number_samples=10)
    c.generate(config={...}); c.evaluate(); c.dump("worldtree_10.json")
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from . import io
from .errors import Cancelled, DataError, GenerationFailed, UnknownNameError
from .generation import generate
from .io import Data
from .schema import GeneratedCot, Sample

if TYPE_CHECKING:
    import pandas as pd

    import datasets as hf

    from .generation import GenerateReport

log = logging.getLogger(__name__)

M = TypeVar("M", Sample, GeneratedCot)
CANCEL_EVERY = 1000  # samples between two looks at Collection.merge's cancel event


class Collection:
    """Samples grouped as ``{dataset: {split: [Sample, ...]}}``."""

    def __init__(
        self,
        names: Iterable[str] | str | None = None,
        *,
        splits: Iterable[str] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        data: Data | None = None,
        **load_kwargs: Any,
    ) -> None:
        self._data: Data = {}
        self.merge_conflicts: list[str] = []
        self.generate_report: GenerateReport | None = None  # of the last generate()
        if data is not None:
            self._data = data
        if names is not None:
            loaded = Collection.from_datasets(names, splits=splits, data_dir=data_dir, **load_kwargs)
            self._data.update(loaded._data)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_datasets(
        cls,
        names: Iterable[str] | str,
        *,
        splits: Iterable[str] | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        **load_kwargs: Any,
    ) -> Collection:
        """Load registered source datasets (converted from their raw files, cached).

        ``"all"`` loads every registered dataset whose raw files are present (each of its available splits).
        """
        from . import datasets  # the 14 dataset modules: loaded when a dataset is, not at CLI start (the CLI imports this)

        if names == "all" and not splits:
            return cls(data=datasets.load_available(data_dir, **load_kwargs))
        if isinstance(names, str):
            names = [names]
        data: Data = {}
        for name in names:
            data[name] = datasets.load(name, splits=list(splits) if splits else None, data_dir=data_dir, **load_kwargs)
        return cls(data=data)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str], *, validate: bool = False) -> Collection:
        return cls(data=io.load_json(path, validate=validate))

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike[str], *, validate: bool = False) -> Collection:
        return cls(data=io.load_jsonl(path, validate=validate))

    @classmethod
    def from_parquet(cls, path: str | os.PathLike[str]) -> Collection:
        return cls(data=io.load_parquet(path))

    @classmethod
    def from_hf_dataset(cls, dsd: hf.DatasetDict | hf.Dataset) -> Collection:
        import datasets as hf

        data: Data = {}
        parts = dsd.values() if isinstance(dsd, hf.DatasetDict) else [dsd]
        for part in parts:
            for d, splits in io.from_arrow(part.data.table).items():
                for s, xs in splits.items():
                    data.setdefault(d, {}).setdefault(s, []).extend(xs)
        return cls(data=data)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, validate: bool = False) -> Collection:
        """Open a file by its extension: .json (ThoughtSource), .jsonl, .parquet or a Parquet folder."""
        p = Path(path)
        io.check_input(p)  # an empty file, a CSV table: their own messages
        if p.is_dir() or p.suffix == ".parquet":
            return cls.from_parquet(p)
        if p.suffix == ".jsonl":
            return cls.from_jsonl(p, validate=validate)
        return cls.from_json(p, validate=validate)

    # ------------------------------------------------------------------ container protocol
    def __len__(self) -> int:
        return sum(len(xs) for splits in self._data.values() for xs in splits.values())

    def __iter__(self) -> Iterator[tuple[str, dict[str, list[Sample]]]]:
        """Iterate over ``(dataset_name, {split: samples})`` as the published library did."""
        return iter(self._data.items())

    def __getitem__(self, name: str) -> dict[str, list[Sample]]:
        if name not in self._data:
            raise UnknownNameError("dataset in this collection", name, self._data)
        return self._data[name]

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Collection) and io.data_to_obj(self._data) == io.data_to_obj(other._data)

    def __repr__(self) -> str:
        parts = ", ".join(f"{d}: {{{', '.join(f'{s}: {len(xs)}' for s, xs in sp.items())}}}" for d, sp in self._data.items())
        return f"Collection({parts})"

    @property
    def data(self) -> Data:
        return self._data

    @property
    def names(self) -> list[str]:
        return list(self._data)

    def samples(self) -> Iterator[tuple[str, str, Sample]]:
        """Every sample with its dataset and split."""
        for d, splits in self._data.items():
            for s, xs in splits.items():
                for x in xs:
                    yield d, s, x

    # ------------------------------------------------------------------ subsets
    def select(self, split: str | None = "train", number_samples: int | None = None, seed: int = 0) -> Collection:
        """A deterministic random subset: per dataset, ``number_samples`` of ``split`` (all if None).

        Samples keep their original order.  ``split=None`` keeps every split.  A split that no dataset
        of a non-empty collection has is a :class:`DataError` (a typo must not select nothing silently);
        datasets that lack it while others have it are left out.
        """
        if split is not None and self._data and not any(split in splits for splits in self._data.values()):
            available = sorted({s for splits in self._data.values() for s in splits})
            raise DataError(f"no dataset has a split '{split}' (available: {', '.join(available) or 'none'})")
        rng = random.Random(seed)
        data: Data = {}
        for d, splits in self._data.items():
            for s, xs in splits.items():
                if split is not None and s != split:
                    continue
                if number_samples is not None and number_samples < len(xs):
                    keep = sorted(rng.sample(range(len(xs)), number_samples))
                    xs = [xs[i] for i in keep]
                data.setdefault(d, {})[s] = [x.model_copy(deep=True) for x in xs]
        return Collection(data=data)

    def filter(self, predicate: Callable[[Sample], bool]) -> Collection:
        """Keep the samples for which ``predicate(sample)`` is true (datasets/splits are kept)."""
        return Collection(data={d: {s: [x for x in xs if predicate(x)] for s, xs in sp.items()} for d, sp in self._data.items()})

    # ------------------------------------------------------------------ combining
    def merge(self, other: Collection, *, cancel: threading.Event | None = None) -> Collection:
        """A new collection with the samples of both; generated CoTs of the same sample id are merged.

        A CoT (by id) present in both is kept once; if the two copies differ, the copy already here is
        kept, new annotations of the other copy are added, and the difference is reported in
        ``merge_conflicts`` and the log.  Nothing is silently overwritten.  Linear: the id index of each
        split is built once.  ``cancel``: checked every ``CANCEL_EVERY`` samples; once set, the merge
        stops with :class:`Cancelled` (a server shutting down does not wait for a long merge).  The cyclic
        garbage collector is paused meanwhile: its full passes over the millions of new objects took two thirds
        of the time of a 100k-sample merge (``benchmarks/bench_merge.py``).
        """
        with _gc_paused():
            return self._merge(other, cancel)

    def _merge(self, other: Collection, cancel: threading.Event | None) -> Collection:
        result = Collection(data=io.parse_data(io.data_to_obj(self._data), warn=False))
        conflicts: list[str] = []
        indexes: dict[tuple[str, str], dict[str, Sample]] = {}
        for n, (d, s, x) in enumerate(other.samples()):
            if cancel is not None and n % CANCEL_EVERY == 0 and cancel.is_set():
                raise Cancelled(f"merge stopped after {n} samples")
            target = result._data.setdefault(d, {}).setdefault(s, [])
            index = indexes.get((d, s))
            if index is None:
                index = indexes[(d, s)] = {y.id: y for y in target}
            mine = index.get(x.id)
            if mine is None:
                target.append(_copy(x))
                index[x.id] = target[-1]
                continue
            conflicts.extend(merge_sample(mine, x, f"{d}/{s}/{x.id}"))
        for c in conflicts:
            log.warning("merge conflict: %s", c)
        result.merge_conflicts = self.merge_conflicts + conflicts
        return result

    def delete_generated_cots(self, author: str | None = None, model: str | None = None) -> Collection:
        """Delete generated CoTs (all, or those of an author and/or a model), in place; returns self."""

        def matches(c: GeneratedCot) -> bool:
            name = c.model.get("name") if isinstance(c.model, dict) else c.model
            return (author is None or c.author == author) and (
                model is None or model == name or (isinstance(name, str) and f"'{model}'" in name)
            )

        for _, _, x in self.samples():
            x.generated_cot = [c for c in x.generated_cot if not matches(c)]
        return self

    def in_idx_range(self, idx_range: tuple[int, int] | None) -> Collection:
        """The samples whose index in their split is in ``[a, b)`` (the published ``idx_range``); the same objects,
        so what is attached to them shows in this collection.  ``None``: the collection itself."""
        if idx_range is None:
            return self
        a, b = idx_range
        return Collection(data={d: {s: xs[a:b] for s, xs in splits.items()} for d, splits in self.data.items()})

    # ------------------------------------------------------------------ generation / evaluation hooks
    def generate(self, config: Any = None, *, strict: bool = True, **kwargs: Any) -> Collection:
        """Generate CoTs in place (see :mod:`thoughtsource.generation`); returns self.

        The run's :class:`~thoughtsource.generation.GenerateReport` is kept in ``self.generate_report``.  When
        CoTs or answer extractions failed, raises :class:`~thoughtsource.errors.GenerationFailed` (its ``report``
        is the same report; what succeeded is attached and stored, and calling again asks only for the rest),
        as the CLI exits 1; ``strict=False`` only logs the failures.
        """
        report = generate(self, config, **kwargs)
        self.generate_report = report
        if strict and report.errors:
            raise GenerationFailed(f"{report.failure_summary()}; the collection lacks them. Call generate() again to fill "
                                   "them in, or pass strict=False to go on without them", report=report)
        return self

    def evaluate(self, **kwargs: Any) -> dict[str, Any]:
        """Score extracted answers in place; returns ``{"accuracy": {...}}`` (see :mod:`thoughtsource.evaluate`)."""
        from .evaluate import evaluate  # loaded when evaluating, not at CLI start (the CLI imports this module)

        return evaluate(self, **kwargs)

    # ------------------------------------------------------------------ output
    def dump(self, path: str | os.PathLike[str], indent: int | None = 2) -> None:
        """Write ThoughtSource JSON atomically."""
        io.dump_json(self._data, path, indent=indent)

    def to_jsonl(self, path: str | os.PathLike[str]) -> None:
        io.dump_jsonl(self._data, path)

    def to_parquet(self, out_dir: str | os.PathLike[str]) -> list[Path]:
        return io.dump_parquet(self._data, out_dir)

    def to_pandas(self) -> pd.DataFrame:
        """One row per sample: ``dataset``, ``split`` and every sample field (nested ones as Python objects)."""
        import pandas as pd

        return pd.DataFrame([{"dataset": d, "split": s, **x.to_dict()} for d, s, x in self.samples()])

    def to_hf_dataset(self) -> hf.DatasetDict:
        """A ``datasets.DatasetDict`` keyed by split; a ``dataset`` column names the source dataset."""
        import pyarrow as pa

        import datasets as hf

        by_split: dict[str, list[pa.Table]] = {}
        for d, splits in self._data.items():
            for s, xs in splits.items():
                by_split.setdefault(s, []).append(io.to_arrow(xs, d, s))
        return hf.DatasetDict({s: hf.Dataset(pa.concat_tables(ts)) for s, ts in by_split.items()})

    def info(self) -> list[dict[str, Any]]:
        """Per dataset and split: samples, answer types, generated CoTs, annotations."""
        return info_rows(io.data_entries(self._data))


def info_rows(entries: Iterable[io.Entry]) -> list[dict[str, Any]]:
    """:meth:`Collection.info` of streamed entries (``io.iter_entries``): one pass, memory per split, not per sample."""
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for e in entries:
        splits = groups.setdefault(e.dataset, {})
        if e.split is None:
            continue
        g = splits.get(e.split)
        if g is None:
            g = splits[e.split] = {"samples": 0, "types": Counter(), "reference_cots": 0, "generated_cots": 0,
                                   "annotations": 0}
        x = e.sample
        if x is None:
            continue
        g["samples"] += 1
        g["types"][x.type] += 1
        g["reference_cots"] += bool(x.cot)
        g["generated_cots"] += len(x.generated_cot)
        g["annotations"] += sum(len(c.annotations) for c in x.generated_cot)
    rows = []
    for d, splits in groups.items():
        for s, g in splits.items():
            types: Counter[str] = g["types"]
            rows.append(
                {
                    "dataset": d,
                    "split": s,
                    "samples": g["samples"],
                    "types": ", ".join(f"{t} ({n})" if len(types) > 1 else t for t, n in types.most_common()),
                    "reference_cots": g["reference_cots"],
                    "generated_cots": g["generated_cots"],
                    "annotations": g["annotations"],
                }
            )
    return rows


def _copy(model: M) -> M:
    """A deep copy of a schema object, through its JSON form as the merge copies ``self`` (pydantic-core both ways):
    3x faster than ``model_copy(deep=True)`` (``copy.deepcopy``, which took two thirds of a merge's time)."""
    return type(model).model_validate(model.to_dict())


_gc_lock = threading.Lock()
_gc_pausers = [0]


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (process-wide, counted, so overlapping pauses in threads nest)."""
    with _gc_lock:
        _gc_pausers[0] += 1
        if _gc_pausers[0] == 1:
            was_enabled = gc.isenabled()
            gc.disable()
            _gc_pausers.append(was_enabled)
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers[0] -= 1
            if _gc_pausers[0] == 0 and _gc_pausers.pop():
                if gc.get_freeze_count() == 0:  # (nobody else froze objects, e.g. before a fork)
                    # every object made during the pause is in the youngest generation, and the first collection
                    # after gc.enable() would walk them all (a quarter of a 100k-sample merge); freeze + unfreeze
                    # moves them to the oldest generation in two list splices, where the next full collection,
                    # on its usual schedule, sees them
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


class MergeIndex:
    """Samples merged by id on disk, as :meth:`Collection.merge` merges collections, for inputs too large to load:
    a SQLite file in ``folder`` with one row per ``(dataset, split, id)`` (its JSON and its place of first appearance).

    ``add(samples)`` adds a source's samples in turn: a new id is inserted, one seen before is read back, merged
    (:func:`merge_sample`) and written back; its conflicts are logged and returned.  ``entries()`` gives the merged
    samples in order of first appearance, as ``Collection.merge`` of the sources in the order added holds them.
    Memory: one sample at a time and SQLite's page cache; disk: about the size of the merged JSON.  A context manager
    (the file is removed on exit)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        import sqlite3
        import tempfile

        Path(folder).mkdir(parents=True, exist_ok=True)
        self._tmp = tempfile.TemporaryDirectory(prefix=".merge.", dir=folder)
        self._db = sqlite3.connect(Path(self._tmp.name) / "merge.sqlite", isolation_level=None)
        self._db.execute("PRAGMA journal_mode=OFF")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute("CREATE TABLE samples (seq INTEGER PRIMARY KEY, dataset TEXT, split TEXT, id TEXT, doc TEXT, "
                         "UNIQUE (dataset, split, id))")
        self.samples = 0

    def __enter__(self) -> MergeIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self._db.close()
        self._tmp.cleanup()

    def add(self, samples: Iterable[tuple[str, str, Sample]]) -> list[str]:
        import json

        db = self._db
        conflicts: list[str] = []
        db.execute("BEGIN")
        try:
            for d, s, x in samples:
                row = db.execute("SELECT seq, doc FROM samples WHERE dataset = ? AND split = ? AND id = ?", (d, s, x.id)).fetchone()
                if row is None:
                    db.execute("INSERT INTO samples (dataset, split, id, doc) VALUES (?, ?, ?, ?)",
                               (d, s, x.id, json.dumps(x.to_dict(), ensure_ascii=False)))
                    self.samples += 1
                    continue
                mine = io.parse_record(json.loads(row[1]), 0, path=None, dataset=d, split=s)
                conflicts.extend(merge_sample(mine, x, f"{d}/{s}/{x.id}"))
                db.execute("UPDATE samples SET doc = ? WHERE seq = ?", (json.dumps(mine.to_dict(), ensure_ascii=False), row[0]))
        finally:
            db.execute("COMMIT")
        for c in conflicts:  # after the source, as Collection.merge logs them
            log.warning("merge conflict: %s", c)
        return conflicts

    def get(self, dataset: str, split: str, sample_id: str) -> Sample | None:
        """The merged sample of that id (a fresh object: changing it changes nothing here), or None."""
        import json

        row = self._db.execute("SELECT doc FROM samples WHERE dataset = ? AND split = ? AND id = ?",
                               (dataset, split, sample_id)).fetchone()
        return None if row is None else io.parse_record(json.loads(row[0]), 0, path=None, dataset=dataset, split=split)

    def entries(self) -> Iterator[io.Entry]:
        import json

        counts: dict[tuple[str, str], int] = {}
        for d, s, doc in self._db.execute("SELECT dataset, split, doc FROM samples ORDER BY seq"):
            i = counts.get((d, s), 0)
            counts[(d, s)] = i + 1
            yield io.Entry(d, s, io.parse_record(json.loads(doc), i, path=None, dataset=d, split=s), i)


def merge_sample(mine: Sample, theirs: Sample, where: str) -> list[str]:
    """``theirs`` (a copy of the same sample, by id) merged into ``mine`` in place, as :meth:`Collection.merge` merges
    two samples: new CoTs appended, answers and annotations of a CoT in both added; the conflicts returned (not logged),
    ``where`` their prefix (``dataset/split/id``)."""
    conflicts = []
    for key in ("question", "type", "choices", "answer", "cot", "context"):
        if getattr(mine, key) != getattr(theirs, key):
            conflicts.append(f"{where}: field '{key}' differs; kept {getattr(mine, key)!r}")
    by_id = {c.id: c for c in mine.generated_cot}
    for cot in theirs.generated_cot:
        if cot.id is None:  # no id to match by: keep it unless an identical copy is here
            if cot.to_dict() not in [c.to_dict() for c in mine.generated_cot]:
                mine.generated_cot.append(_copy(cot))
        elif cot.id not in by_id:
            mine.generated_cot.append(_copy(cot))
            by_id[cot.id] = mine.generated_cot[-1]
        else:
            conflicts.extend(_merge_cot(by_id[cot.id], cot, f"{where}/cot {cot.id}"))
    return conflicts


def _merge_cot(mine: GeneratedCot, theirs: GeneratedCot, where: str) -> list[str]:
    conflicts = []
    a, b = mine.to_dict(), theirs.to_dict()
    for key in sorted(set(a) | set(b)):
        if key in ("annotations", "answers") or a.get(key) == b.get(key):
            continue
        conflicts.append(f"{where}: field '{key}' differs; kept {str(a.get(key))[:60]!r}")
    have_answers = {x.id: x for x in mine.answers}
    for ans in theirs.answers:
        if ans.id not in have_answers:
            mine.answers.append(ans.model_copy())
        elif have_answers[ans.id] != ans:
            conflicts.append(f"{where}: answer {ans.id} differs; kept the existing one")
    have_ann = [n.to_dict() for n in mine.annotations]
    for n in theirs.annotations:
        if n.to_dict() not in have_ann:
            mine.annotations.append(n.model_copy())
    return conflicts
