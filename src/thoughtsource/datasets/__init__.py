"""Registry of source datasets.

``DATASETS`` maps each name to the module that declares it (a ``SPEC`` and a ``convert`` function, see
:mod:`._base`).  Modules are imported only when used.  :func:`load` resolves the raw files
(:mod:`._resolve`), reads the converted cache or converts and caches (:mod:`._cache`), and returns
``{split: [Sample, ...]}``; ``Collection.from_datasets`` calls it.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import DataError, UnknownNameError
from ..schema import Sample, semantic_problems
from . import _cache, _resolve
from ._base import DatasetSpec, SourceFile

log = logging.getLogger(__name__)

DATASETS: dict[str, str] = {
    "aqua": "thoughtsource.datasets.aqua",
    "asdiv": "thoughtsource.datasets.asdiv",
    "gsm8k": "thoughtsource.datasets.gsm8k",
    "mawps": "thoughtsource.datasets.mawps",
    "svamp": "thoughtsource.datasets.svamp",
}


def names() -> list[str]:
    return sorted(DATASETS)


def get(name: str) -> Any:
    """The module of a registered dataset."""
    if name not in DATASETS:
        raise UnknownNameError("dataset", name, DATASETS)
    return importlib.import_module(DATASETS[name])


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


def convert_split(ds: DatasetSpec, module: Any, files: dict[str, Path], split: str) -> list[Sample]:
    """Run a module's converter and check the result: valid samples, unique ids, no semantic problems."""
    samples: list[Sample] = []
    seen: set[str] = set()
    problems: list[str] = []
    try:
        for sample in module.convert(files, split):
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


def load(
    name: str,
    splits: Iterable[str] | str | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download: bool = True,
    use_cache: bool = True,
) -> dict[str, list[Sample]]:
    """``{split: [Sample, ...]}`` of a registered dataset (all splits when ``splits`` is None).

    Raw files come from ``data_dir`` / ``$THOUGHTSOURCE_DATA`` / the user cache (downloaded when missing
    and ``download``); converted splits are cached as Parquet unless ``use_cache`` is False.
    """
    module = get(name)
    ds: DatasetSpec = module.SPEC
    wanted = check_splits(ds, splits)
    files = _resolve.resolve(ds, wanted, data_dir, download_missing=download)
    out: dict[str, list[Sample]] = {}
    for split in wanted:
        used = [s.name for s in ds.sources_for(split) if s.name in files]
        split_files = {n: files[n][0] for n in used}
        path = _cache.cache_path(ds, split, {n: files[n][1] for n in used})
        cached = _cache.read(path, name, split) if use_cache else None
        if cached is not None:
            log.debug("%s/%s: %d samples from cache %s", name, split, len(cached), path)
            out[split] = cached
            continue
        samples = convert_split(ds, module, split_files, split)
        log.info("%s/%s: converted %d samples", name, split, len(samples))
        if use_cache:
            _cache.write(path, samples, name, split)
        out[split] = samples
    return out


__all__ = ["DATASETS", "DatasetSpec", "SourceFile", "available_splits", "check_splits", "get", "load", "names", "spec"]
