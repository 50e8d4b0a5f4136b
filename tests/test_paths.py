"""One raw-data variable ($THOUGHTSOURCE_DATA, old name $THOUGHTSOURCE_SHARED_DATA) honoured by every command;
converted datasets and models under $THOUGHTSOURCE_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cli_in_process import run_cli
from thoughtsource import paths
from thoughtsource.cli.demo import _shared_data_dirs
from thoughtsource.datasets._resolve import data_root

REPO = Path(__file__).resolve().parents[1]


def test_one_data_variable_and_its_old_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    monkeypatch.delenv("THOUGHTSOURCE_DATA", raising=False)
    monkeypatch.setenv("THOUGHTSOURCE_SHARED_DATA", str(old))
    assert paths.data_env() == old and data_root() == old  # the old name still works, for datasets too
    assert _shared_data_dirs()[0] == old
    monkeypatch.setenv("THOUGHTSOURCE_DATA", str(new))
    assert paths.data_env() == new and data_root() == new and _shared_data_dirs()[0] == new  # the demo reads it too
    assert data_root(tmp_path) == tmp_path  # --data-dir wins


def test_converted_data_lives_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THOUGHTSOURCE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("THOUGHTSOURCE_CACHE")
    assert paths.cache_dir("converted") == tmp_path / "home" / "cache" / "converted"
    assert paths.cache_dir("models").is_relative_to(tmp_path / "home")
    monkeypatch.setenv("THOUGHTSOURCE_CACHE", str(tmp_path / "elsewhere"))
    assert paths.cache_dir("converted") == tmp_path / "elsewhere" / "converted"


@pytest.mark.parametrize("variable", ["THOUGHTSOURCE_DATA", "THOUGHTSOURCE_SHARED_DATA"])
def test_a_command_reads_the_data_variable_and_converts_under_home(variable: str, shared_data: Path, tmp_path: Path) -> None:
    if not (shared_data / "gsm8k").is_dir():
        pytest.skip("no gsm8k raw files")
    env = {k: v for k, v in os.environ.items() if not k.startswith("THOUGHTSOURCE_") and k != "PYTEST_CURRENT_TEST"}
    env.update({variable: str(shared_data), "THOUGHTSOURCE_HOME": str(tmp_path / "home"), "THOUGHTSOURCE_OFFLINE": "1",
                "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"})
    p = run_cli("datasets", "export", "gsm8k", "--split", "test", "--out", str(tmp_path / "gsm8k.json"), env=env)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "gsm8k.json").is_file()
    assert list((tmp_path / "home" / "cache" / "converted" / "gsm8k").glob("test-*.parquet"))
    assert not (tmp_path / "home" / "cache" / "raw" / "gsm8k").exists()  # read from the data folder, nothing downloaded
