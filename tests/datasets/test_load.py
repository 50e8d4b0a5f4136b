"""datasets.load(): the converted cache, split validation, Collection.from_datasets."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from thoughtsource import Collection, datasets
from thoughtsource.datasets import _cache
from thoughtsource.errors import UnknownNameError


def test_second_load_reads_the_cache(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = datasets.load("gsm8k", ["test"], data_dir=data_dir)["test"]
    module = datasets.get("gsm8k")

    def no_conversion(files, split):
        raise AssertionError("converted again instead of reading the cache")

    monkeypatch.setattr(module, "convert", no_conversion)
    again = datasets.load("gsm8k", ["test"], data_dir=data_dir)["test"]
    assert [x.to_dict() for x in again] == [x.to_dict() for x in first]


def test_new_converter_version_converts_again(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    datasets.load("svamp", data_dir=data_dir)
    module = datasets.get("svamp")
    calls = []
    real = module.convert
    monkeypatch.setattr(module, "convert", lambda files, split: calls.append(split) or real(files, split))
    monkeypatch.setattr(module, "SPEC", dataclasses.replace(module.SPEC, converter_version=module.SPEC.converter_version + 1))
    assert len(datasets.load("svamp", data_dir=data_dir)["train"]) == 1000
    assert calls == ["train"]
    assert len(datasets.load("svamp", data_dir=data_dir)["train"]) == 1000
    assert calls == ["train"]  # and then cached under the new key


def test_broken_cache_entry_is_rebuilt(data_dir: Path) -> None:
    datasets.load("asdiv", data_dir=data_dir)
    spec = datasets.spec("asdiv")
    hashes = {s.name: s.sha256 for s in spec.sources}
    path = _cache.cache_path(spec, "train", hashes)
    assert path.is_file()
    path.write_bytes(b"not parquet")
    assert len(datasets.load("asdiv", data_dir=data_dir)["train"]) == 1218
    assert _cache.read(path, "asdiv", "train") is not None


def test_unknown_names() -> None:
    with pytest.raises(UnknownNameError, match="Did you mean: svamp"):
        datasets.load("svam")
    with pytest.raises(UnknownNameError, match=r"Unknown gsm8k split 'validation'.*Available: test, train"):
        datasets.load("gsm8k", ["validation"])


def test_collection_from_datasets(data_dir: Path) -> None:
    c = Collection.from_datasets(["gsm8k", "svamp"], splits=["train"], data_dir=data_dir)
    assert {d: {s: len(x) for s, x in splits.items()} for d, splits in c} == {"gsm8k": {"train": 7473}, "svamp": {"train": 1000}}


def test_data_dir_from_environment(thoughtsource_data: Path) -> None:
    assert len(datasets.load("aqua", ["test"])["test"]) == 254


@pytest.mark.parametrize("name", datasets.names())
def test_ids_unique_across_splits(name: str, data_dir: Path) -> None:
    splits = datasets.available_splits(name, data_dir)
    if not splits:
        pytest.skip(f"{name}: no raw files present under {data_dir}")
    ids = [x.id for xs in datasets.load(name, splits, data_dir=data_dir).values() for x in xs]
    assert len(ids) == len(set(ids))
