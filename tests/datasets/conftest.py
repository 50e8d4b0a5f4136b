"""Fixtures of the dataset tests: the shared raw data, an isolated converted/raw cache, no internet."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from thoughtsource import datasets
from thoughtsource.schema import Sample


@pytest.fixture(scope="session")
def dataset_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One THOUGHTSOURCE_CACHE for the dataset tests of a test run: conversions are reused across their modules."""
    return tmp_path_factory.mktemp("ts_cache")


@pytest.fixture(scope="module", autouse=True)
def _isolated_cache(dataset_cache: Path) -> Iterator[Path]:
    """While a module of this folder runs: its own cache and never a download, the data folder given by argument only.

    Module scope, not session scope: a session fixture of a sub-folder's conftest stays set up until the session ends,
    so every test that ran after the first dataset test on a worker (pytest-xdist) got this cache, no
    THOUGHTSOURCE_DATA and offline mode; each worker then converted the embedded model a second time (~40 s) into it.
    ``tests/test_isolation.py`` checks the environment after a dataset test."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("THOUGHTSOURCE_CACHE", str(dataset_cache))
        mp.setenv("THOUGHTSOURCE_OFFLINE", "1")
        mp.delenv("THOUGHTSOURCE_DATA", raising=False)
        mp.delenv("THOUGHTSOURCE_SHARED_DATA", raising=False)
        yield dataset_cache


@pytest.fixture(scope="session")
def data_dir(shared_data: Path) -> Path:
    """The raw files of ../shared/data, used as ``data_dir``."""
    return shared_data


@pytest.fixture
def thoughtsource_data(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$THOUGHTSOURCE_DATA`` pointing at the shared raw data (for code paths that take no data_dir)."""
    monkeypatch.setenv("THOUGHTSOURCE_DATA", str(data_dir))
    return data_dir


@pytest.fixture(scope="session")
def load_split(data_dir: Path) -> Callable[[str, str], list[Sample]]:
    """``load_split(name, split)``: samples of one split from the shared data, or skip when its raw files are absent."""

    def load(name: str, split: str) -> list[Sample]:
        if split not in datasets.available_splits(name, data_dir):
            files = [s.name for s in datasets.spec(name).sources_for(split) if not s.optional]
            pytest.skip(f"{name}/{split}: raw file(s) {files} not present under {data_dir}")
        return datasets.load(name, [split], data_dir=data_dir)[split]

    return load

