"""Registry of source datasets.

``DATASETS`` maps each name to the module that declares it (a ``SPEC`` and a ``convert`` function, see
:mod:`._base`), or to ``"module:attr"`` when one module declares several datasets (the MMLU subjects).  Modules are imported only when used.  :func:`load` resolves the raw files
(:mod:`._resolve`), reads the converted cache or converts and caches (:mod:`._cache`), and returns
``{split: [Sample, ...]}``; ``Collection.from_datasets`` calls it.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..answers import semantic_problems
from ..errors import ChecksumError, DataError, UnknownNameError
from ..schema import Sample
from . import _cache, _resolve
from ._base import DatasetSpec, SourceFile
from ._resolve import locate, resolve
from ._text import clean_sample, sample_debris
from .published_cots import attach_published_cots
from .published_cots import sources as published_sources

log = logging.getLogger(__name__)

DATASETS: dict[str, str] = {
    "aqua": "thoughtsource.datasets.aqua",
    "asdiv": "thoughtsource.datasets.asdiv",
    "commonsense_qa": "thoughtsource.datasets.commonsense_qa",
    "entailment_bank": "thoughtsource.datasets.entailment_bank",
    "gsm8k": "thoughtsource.datasets.gsm8k",
    "math500": "thoughtsource.datasets.math500",
    "mawps": "thoughtsource.datasets.mawps",
    "med_qa": "thoughtsource.datasets.med_qa",
    "med_qa_open": "thoughtsource.datasets.med_qa_open",
    "medmc_qa": "thoughtsource.datasets.medmc_qa",
    "mmlu_anatomy": "thoughtsource.datasets.mmlu:anatomy",
    "mmlu_clinical_knowledge": "thoughtsource.datasets.mmlu:clinical_knowledge",
    "mmlu_college_biology": "thoughtsource.datasets.mmlu:college_biology",
    "mmlu_college_medicine": "thoughtsource.datasets.mmlu:college_medicine",
    "mmlu_medical_genetics": "thoughtsource.datasets.mmlu:medical_genetics",
    "mmlu_professional_medicine": "thoughtsource.datasets.mmlu:professional_medicine",
    "open_book_qa": "thoughtsource.datasets.open_book_qa",
    "pubmed_qa": "thoughtsource.datasets.pubmed_qa",
    "qed": "thoughtsource.datasets.qed",
    "strategy_qa": "thoughtsource.datasets.strategy_qa",
    "svamp": "thoughtsource.datasets.svamp",
    "worldtree": "thoughtsource.datasets.worldtree",
}


def names() -> list[str]:
    return sorted(DATASETS)


def get(name: str) -> Any:
    """The module of a registered dataset (or, for ``"module:attr"``, the object in it with ``SPEC`` and ``convert``)."""
    if name not in DATASETS:
        raise UnknownNameError("dataset", name, DATASETS)
    module, _, attr = DATASETS[name].partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attr) if attr else loaded


def spec(name: str) -> DatasetSpec:
    return get(name).SPEC


def check_splits(ds: DatasetSpec, splits: Iterable[str] | str | None) -> list[str]:
    """The requested splits (all when None), each checked against the dataset's splits."""
    if splits is None:
        return list(ds.splits)
    if isinstance(splits, str):
        splits = [splits]
    out = []
    for s in splits:
        if s not in ds.splits:
            raise UnknownNameError(f"{ds.name} split", s, ds.splits)
        out.append(s)
    return out


def available_splits(name: str, data_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Splits whose required raw files are present locally (no download, no hashing)."""
    ds = spec(name)
    return [s for s in ds.splits if all(src.optional or _resolve.locate(src, data_dir) for src in ds.sources_for(s))]


def convert_split(ds: DatasetSpec, module: Any, files: dict[str, Path], split: str, *, clean: bool = True) -> list[Sample]:
    """Run a module's converter and check the result: valid samples, unique ids, no semantic problems.

    With ``clean`` (always, except to measure the raw debris for the docs) every sample goes through
    :func:`._text.clean_sample`.
    """
    samples: list[Sample] = []
    seen: set[str] = set()
    problems: list[str] = []
    try:
        for sample in module.convert(files, split):
            if clean:
                sample = clean_sample(sample)
            if sample.id in seen:
                problems.append(f"{sample.id}: duplicate id")
            seen.add(sample.id)
            problems.extend(f"{sample.id}: {p}" for p in semantic_problems(sample))
            samples.append(sample)
    except ValidationError as e:  # a converter built an invalid Sample from a raw record
        raise DataError(f"converter produced an invalid sample: {e.errors()[0]['msg']}", dataset=ds.name, split=split) from None
    if problems:
        raise DataError(f"{len(problems)} problem(s) in converted samples", dataset=ds.name, split=split, problems=problems)
    return samples


def _resolve_available(
    ds: DatasetSpec, splits: list[str], data_dir: str | os.PathLike[str] | None, download: bool
) -> tuple[list[str], dict[str, tuple[Path, str]]]:
    """The splits whose raw files are present or could be downloaded, and those files.

    A split whose files cannot be had is skipped with a warning that names it and its files; when no split
    can be had, one DataError names every split and file.  A checksum mismatch is never skipped.
    """
    files: dict[str, tuple[Path, str]] = {}
    ok: list[str] = []
    missing: list[str] = []
    for split in splits:
        try:
            files.update(_resolve.resolve(ds, [split], data_dir, download_missing=download))
            ok.append(split)
        except ChecksumError:
            raise
        except DataError as e:
            missing.extend(f"{split}: {p}" for p in e.problems)
    if not ok:
        raise DataError(f"raw files missing for every split {splits}", dataset=ds.name, problems=missing)
    if missing:
        log.warning("%s: loading %s; skipped split(s) whose raw files are missing:\n  %s", ds.name, ok, "\n  ".join(missing))
    return ok, files


def load_available(
    data_dir: str | os.PathLike[str] | None = None, **load_kwargs: Any
) -> dict[str, dict[str, list[Sample]]]:
    """``{dataset: {split: [Sample, ...]}}`` of every registered dataset with at least one split whose raw
    files are present locally (nothing is downloaded); the others are named in one log line."""
    out: dict[str, dict[str, list[Sample]]] = {}
    absent: list[str] = []
    for name in names():
        present = available_splits(name, data_dir)
        if present:
            out[name] = load(name, present, data_dir, download=False, **load_kwargs)
        else:
            absent.append(name)
    if absent:
        log.info("datasets without raw files here (run 'thoughtsource datasets download NAME'): %s", ", ".join(absent))
    return out


def debris_counts(name: str, data_dir: str | os.PathLike[str] | None = None) -> tuple[Counter[str], Counter[str]]:
    """Fields with raw debris (per kind, see ``_text.DEBRIS_KINDS``) over the locally present splits of a
    dataset: (converted without the clean-up, converted with it).  For the before/after table of the docs."""
    ds = spec(name)
    module = get(name)
    present = available_splits(name, data_dir)
    files = _resolve.resolve(ds, present, data_dir, download_missing=False)
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    for split in present:
        split_files = {s.name: files[s.name][0] for s in ds.sources_for(split) if s.name in files}
        for clean, counter in ((False, before), (True, after)):
            for sample in convert_split(ds, module, split_files, split, clean=clean):
                counter.update(sample_debris(sample))
    return before, after


def load(
    name: str,
    splits: Iterable[str] | str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download: bool = True,
    use_cache: bool = True,
    published_cots: bool = True,
) -> dict[str, list[Sample]]:
    """``{split: [Sample, ...]}`` of a registered dataset.

    ``splits=None`` loads every split whose raw files are present or can be downloaded and names the
    others in a warning (``aqua`` without its train file loads validation and test); splits named
    explicitly must all be had, else one DataError names the missing files.

    Raw files come from ``data_dir`` / ``$THOUGHTSOURCE_DATA`` / the user cache (downloaded when missing
    and ``download``); converted splits are cached as Parquet unless ``use_cache`` is False.  With
    ``published_cots`` the published model-generated CoTs whose logs are present locally are attached as
    ``generated_cot`` entries (see :mod:`.published_cots`).
    """
    module = get(name)
    ds: DatasetSpec = module.SPEC
    wanted = check_splits(ds, splits)
    if splits is None:  # every split that can be had; the others are named in one warning
        wanted, files = _resolve_available(ds, wanted, data_dir, download)
    else:
        files = _resolve.resolve(ds, wanted, data_dir, download_missing=download)
    out: dict[str, list[Sample]] = {}
    for split in wanted:
        used = [s.name for s in ds.sources_for(split) if s.name in files]
        split_files = {n: files[n][0] for n in used}
        logs: dict[str, tuple[Path, str]] = {}
        if published_cots:
            for src in published_sources(ds, split):
                found = _resolve.locate(src, data_dir)
                if found is not None:
                    logs[src.name] = (found, _resolve.verify(found, src))
        hashes = {n: files[n][1] for n in used} | {f"published:{n}": h for n, (_, h) in logs.items()}
        path = _cache.cache_path(ds, split, hashes)
        cached = _cache.read(path, name, split) if use_cache else None
        if cached is not None:
            log.debug("%s/%s: %d samples from cache %s", name, split, len(cached), path)
            out[split] = cached
            continue
        samples = convert_split(ds, module, split_files, split)
        if logs:
            attach_published_cots(ds, split, samples, {n: p for n, (p, _) in logs.items()})
        log.info("%s/%s: converted %d samples", name, split, len(samples))
        if use_cache:
            _cache.write(path, samples, name, split)
        out[split] = samples
    return out


def equations(name: str, split: str, data_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """``{sample id: its equation}`` of one split, read from the raw files: an equation tree (``_parse.Op`` nodes over
    Fractions; mawps, asdiv, svamp) or the solution lines with GSM8K's calculator annotations (gsm8k).  The gold
    rationales of STaR's calculator format (:mod:`thoughtsource.star.calculator`) are made from them."""
    module = get(name)
    if not hasattr(module, "equations"):
        raise DataError(f"{name} has no equations (have: mawps, asdiv, svamp, gsm8k)", dataset=name)
    ds: DatasetSpec = module.SPEC
    files = _resolve.resolve(ds, check_splits(ds, split), data_dir)
    return dict(module.equations({n: p for n, (p, _) in files.items()}, split))


__all__ = [
    "DATASETS",
    "DatasetSpec",
    "SourceFile",
    "available_splits",
    "check_splits",
    "debris_counts",
    "equations",
    "get",
    "load",
    "load_available",
    "locate",
    "names",
    "resolve",
    "spec",
]
