"""``thoughtsource datasets list|download|export|subset`` (typer CliRunner, real raw files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thoughtsource import io
from thoughtsource.cli import app
from thoughtsource.console import stdout
from thoughtsource.datasets.subset import build_subset
from thoughtsource.errors import DataError, UnknownNameError

runner = CliRunner()


def test_list(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdout, "width", 250)  # one table row per line (tables go to stdout)
    r = runner.invoke(app, ["datasets", "list", "--data-dir", str(data_dir)])
    assert r.exit_code == 0, r.output
    lines = {line.split("│")[1].strip(): line for line in r.output.splitlines() if line.count("│") > 3}
    assert "train (7,473), test (1,319)" in lines["gsm8k"] and "MIT" in lines["gsm8k"] and "all 2" in lines["gsm8k"]
    assert "2/3 (missing: aqua/train.json)" in lines["aqua"] and "multiplechoice" in lines["aqua"]
    r = runner.invoke(app, ["datasets", "list", "--data-dir", str(tmp_path)])
    assert r.exit_code == 0 and "0/2 (missing: gsm8k/train.jsonl, gsm8k/test.jsonl)" in r.output


def test_download_verifies_present_files(data_dir: Path) -> None:
    r = runner.invoke(app, ["datasets", "download", "svamp", "--data-dir", str(data_dir)])
    assert r.exit_code == 0, r.output
    assert "ok svamp: 1 file(s) verified" in r.output


def test_download_all_reports_what_is_missing(data_dir: Path) -> None:
    r = runner.invoke(app, ["datasets", "download", "all", "--data-dir", str(data_dir)])
    assert isinstance(r.exception, DataError)
    assert "ok gsm8k" in r.output and "ok asdiv" in r.output
    assert "aqua/train.json" in str(r.exception) and "deepmind/AQuA" in str(r.exception)


def test_download_unknown_name() -> None:
    r = runner.invoke(app, ["datasets", "download", "gsm8", "--data-dir", "."])
    assert isinstance(r.exception, UnknownNameError) and "Did you mean: gsm8k" in str(r.exception)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "thoughtsource-json"])
def test_export(fmt: str, data_dir: Path, tmp_path: Path) -> None:
    r = runner.invoke(
        app,
        [
            "datasets",
            "export",
            "aqua",
            "--format",
            fmt,
            "--out",
            str(tmp_path),
            "--split",
            "validation",
            "--data-dir",
            str(data_dir),
        ],
    )
    assert r.exit_code == 0, r.output
    if fmt == "parquet":
        data = io.load_parquet(tmp_path)
    elif fmt == "jsonl":
        data = io.load_jsonl(tmp_path / "aqua.jsonl")
    else:
        data = io.load_json(tmp_path / "aqua.json", validate=True)
    assert list(data) == ["aqua"] and list(data["aqua"]) == ["validation"]
    samples = data["aqua"]["validation"]
    assert len(samples) == 254 and samples[0].id == "aqua-validation-1" and samples[0].answer == ["32400"]


def test_subset_cli_is_deterministic(data_dir: Path, tmp_path: Path) -> None:
    args = ["datasets", "subset", "--n", "7", "--seed", "3", "-d", "gsm8k", "-d", "svamp", "--data-dir", str(data_dir)]
    r1 = runner.invoke(app, [*args, "--out", str(tmp_path / "a.json")])
    r2 = runner.invoke(app, [*args, "--out", str(tmp_path / "b.json")])
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output
    a = json.loads((tmp_path / "a.json").read_text())
    assert a == json.loads((tmp_path / "b.json").read_text())
    assert {d: {s: len(x) for s, x in splits.items()} for d, splits in a.items()} == {"gsm8k": {"test": 7}, "svamp": {"train": 7}}


def test_subset_builder(data_dir: Path) -> None:
    c = build_subset(["gsm8k", "aqua", "asdiv"], n=20, seed=0, data_dir=data_dir)
    assert {d: list(s) for d, s in c.items()} == {"gsm8k": ["test"], "aqua": ["test"], "asdiv": ["train"]}
    ids = [x.id for x in c["gsm8k"]["test"]]
    assert len(ids) == len(set(ids)) == 20
    # source order, and every sample keeps its gold answer and reference CoT
    assert ids == sorted(ids, key=lambda i: int(i.rsplit("-", 1)[1]))
    assert all(x.answer and x.cot for x in c["gsm8k"]["test"])
    # a dataset's draw does not depend on which other datasets are in the subset; another seed gives another draw
    alone = build_subset(["gsm8k"], n=20, seed=0, data_dir=data_dir)
    assert [x.id for x in alone["gsm8k"]["test"]] == ids
    assert [x.id for x in build_subset(["gsm8k"], n=20, seed=1, data_dir=data_dir)["gsm8k"]["test"]] != ids
    # N larger than the split: all of it
    assert len(build_subset(["aqua"], n=1000, split="validation", data_dir=data_dir)["aqua"]["validation"]) == 254


def test_subset_of_absent_dataset(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no raw files present"):
        build_subset(["gsm8k"], n=5, data_dir=tmp_path)
    assert len(build_subset(None, n=5, data_dir=tmp_path)) == 0
