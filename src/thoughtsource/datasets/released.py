"""Released ThoughtSource-format CoT collections, and the ThoughtSource-100 / -33 subsets.

**Released collections.**  Files in ThoughtSource's JSON format (``{dataset: {split: [samples]}}`` with
their generated CoTs), fetched by URL and verified by sha256 like raw dataset files (``data_dir`` →
``$THOUGHTSOURCE_DATA`` → user cache; download, resume, checksum, atomic rename: :mod:`._resolve`).
:data:`RELEASED` names the published model runs of the ThoughtSource paper's follow-up (Hebenstreit et al.,
2023); :func:`load_released` also takes any URL with its sha256 (a checksum is required: a file that
cannot be verified is not loaded).

**ThoughtSource-100 / -33.**  The library's id lists (``thoughtsource_{100,33}_ids.txt``: 100 / 33 ids of
each of commonsense_qa/validation, med_qa/test, medmc_qa/validation, open_book_qa/test, strategy_qa/train,
worldtree/test).  :func:`load_thoughtsource_subset` converts each sample from our raw files where they are
present (matched by id; StrategyQA by question text, as its published qids come from another copy of the
data) and takes the rest from the released 167-sample run, which holds all 600 samples (its model's CoTs
removed).  The report says how many samples came from where.

Both give ``{dataset: {split: [samples]}}`` (:data:`thoughtsource.io.Data`); ``Collection(data=...)`` wraps it.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError, UnknownNameError
from ..io import Data, load_json
from ..schema import Sample
from . import _resolve, available_splits, load
from ._base import SourceFile
from .published_cots import normalize_question

log = logging.getLogger(__name__)

_TS = "https://raw.githubusercontent.com/OpenBioLink/ThoughtSource"
_RUNS = f"{_TS}/3b31bd84ea06f5be996274db36c79dba36f4c0fc/notebooks/internal_documentation/paper_2"
_IDS = f"{_TS}/733f262f38a29dea77175c95e7ed73e133ba3a86/libs/cot/cot/datasets/thoughtsource"
_EXAMPLES = "thoughtsource_examples"


def _run(file: str, sha256: str, size: int) -> SourceFile:
    return SourceFile(f"{_EXAMPLES}/model_runs/{file}", f"{_RUNS}/{file}", sha256, size, "json")


#: name → a released collection (ThoughtSource JSON)
RELEASED: dict[str, SourceFile] = {
    "ts100_gpt-4_zhou-01": _run("thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json",
                                "cf22e388afd5792010f73cf97d5afc2b16279b5287776427e1d1f69ffeaeec9a", 1951512),
    "ts167_cohere_command-xlarge-nightly": _run("thoughtsource_167_cohere_command-xlarge-nightly_None_None.json",
                                                "d3040770815fdb044bfbb266bca86264200076de2c9a3d9d2207aca6cc59da96", 2525120),
    "ts67_flan-t5-xxl_kojima-01_zhou-01": _run(
        "thoughtsource_67_huggingface_endpoint_flan-T5-xxl_None_None-kojima-01-zhou-01.json",
        "d643dfb978a24c1dafa711a9069cedef2e211096d459f04c65d9846cfafd812b", 2295525),
    "ts67_gpt-3.5-turbo_kojima-01_zhou-01": _run(
        "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json",
        "314b289caf66ab2fe942c2d6cc346929c19ef55a3f29bab7d62ee34f39cd2b1d", 2781322),
}

ID_LISTS: dict[int, SourceFile] = {
    100: SourceFile(f"{_EXAMPLES}/libs/cot/cot/datasets/thoughtsource/thoughtsource_100_ids.txt", f"{_IDS}/thoughtsource_100_ids.txt",
                    "c524955104d8f16175c03ac525ce8a5daa0054b43ccf8b57fd67b5a469afc0d8", 14855, "txt"),
    33: SourceFile(f"{_EXAMPLES}/libs/cot/cot/datasets/thoughtsource/thoughtsource_33_ids.txt", f"{_IDS}/thoughtsource_33_ids.txt",
                   "89380b71bc97bf689955d5b797a081076edac6c41a5df628d9dbba96c549c769", 4901, "txt"),
}
#: the released collection that holds every sample of ThoughtSource-100 (and so -33) under its final id
SUBSET_SOURCE = "ts167_cohere_command-xlarge-nightly"
#: datasets whose published ids are not ours: matched by question text
MATCH_BY_QUESTION = frozenset({"strategy_qa"})


def fetch(source: SourceFile, data_dir: str | os.PathLike[str] | None = None, *, download: bool = True) -> Path:
    """A verified local copy of ``source`` (found, or downloaded from its URL); DataError when it cannot be had."""
    path = _resolve.locate(source, data_dir)
    if path is None:
        if not download or _resolve.offline():
            raise DataError(f"not present and downloads are off; get {source.url} and put it at "
                            f"{_resolve.data_root(data_dir) / source.name}", path=source.name)
        import httpx

        try:
            path = _resolve.download(source, _resolve.download_dir() / source.name)
        except (httpx.HTTPError, OSError) as e:
            raise DataError(f"download of {source.url} failed: {type(e).__name__}: {e}"[:300], path=source.name) from None
    _resolve.verify(path, source)
    return path


def released_source(name_or_url: str, sha256: str | None = None, size: int = 0) -> SourceFile:
    """The :class:`SourceFile` of a registered collection, or of a URL given with its sha256."""
    if name_or_url in RELEASED:
        return RELEASED[name_or_url]
    if "://" not in name_or_url:
        raise UnknownNameError("released collection", name_or_url, RELEASED)
    if not sha256 or len(sha256) != 64:
        raise DataError("a released collection given by URL needs its sha256 (64 hex digits) to be verified",
                        path=name_or_url)
    file = name_or_url.rstrip("/").rsplit("/", 1)[-1] or "collection.json"
    return SourceFile(f"released/{sha256[:12]}/{file}", name_or_url, sha256.lower(), size, "json")


def load_released(
    name_or_url: str, *, sha256: str | None = None, size: int = 0, data_dir: str | os.PathLike[str] | None = None,
    download: bool = True,
) -> Data:
    """A released ThoughtSource-format collection, by name (:data:`RELEASED`) or by URL + sha256."""
    source = released_source(name_or_url, sha256, size)
    return load_json(fetch(source, data_dir, download=download))


# --------------------------------------------------------------------------- ThoughtSource-100 / -33


@dataclass
class SubsetReport:
    """Where the samples of a ThoughtSource subset came from, per ``dataset/split``."""

    size: int
    ours: Counter[str] = field(default_factory=Counter)  # converted from our raw files
    released: Counter[str] = field(default_factory=Counter)  # taken from the released collection

    def summary(self) -> str:
        parts = [f"{k}: {self.ours[k]} converted here, {self.released[k]} from the released file"
                 for k in sorted(set(self.ours) | set(self.released))]
        return f"ThoughtSource-{self.size}: " + "; ".join(parts)


def subset_ids(size: int, data_dir: str | os.PathLike[str] | None = None, *, download: bool = True) -> list[str]:
    if size not in ID_LISTS:
        raise UnknownNameError("ThoughtSource subset size", str(size), [str(k) for k in ID_LISTS])
    return fetch(ID_LISTS[size], data_dir, download=download).read_text(encoding="utf-8").split()


def load_thoughtsource_subset(
    size: int = 100, data_dir: str | os.PathLike[str] | None = None, *, download: bool = True
) -> tuple[Data, SubsetReport]:
    """ThoughtSource-``size`` (100 or 33) by the library's ids, in the id list's order, and where each came from."""
    ids = subset_ids(size, data_dir, download=download)
    wanted = set(ids)
    released = load_json(fetch(RELEASED[SUBSET_SOURCE], data_dir, download=download))
    where: dict[str, tuple[str, str, Sample]] = {}
    for ds, splits in released.items():
        for split, samples in splits.items():
            for s in samples:
                if s.id in wanted:
                    where.setdefault(s.id, (ds, split, s))
    missing = [i for i in ids if i not in where]
    if missing:
        raise DataError(f"{len(missing)} id(s) of the ThoughtSource-{size} list are not in the released collection",
                        path=RELEASED[SUBSET_SOURCE].name, problems=missing)
    ours: dict[tuple[str, str], dict[str, Sample]] = {}
    for ds, split in sorted({(ds, split) for ds, split, _ in where.values()}):
        if split in available_splits(ds, data_dir):
            samples = load(ds, [split], data_dir, download=False)[split]
            ours[(ds, split)] = {(normalize_question(s.question) if ds in MATCH_BY_QUESTION else s.id): s for s in samples}
    report = SubsetReport(size)
    data: Data = {}
    for i in ids:
        ds, split, published = where[i]
        key = normalize_question(published.question) if ds in MATCH_BY_QUESTION else i
        sample = ours.get((ds, split), {}).get(key)
        if sample is not None:
            if sample.id != i:  # matched by question: the library's id, ours kept as ref_id
                sample = sample.model_copy(update={"id": i, "ref_id": sample.id})
            report.ours[f"{ds}/{split}"] += 1
        else:
            sample = published.model_copy(update={"generated_cot": []})
            report.released[f"{ds}/{split}"] += 1
        data.setdefault(ds, {}).setdefault(split, []).append(sample)
    log.info("%s", report.summary())
    return data, report
