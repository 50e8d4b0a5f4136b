from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thoughtsource.cli import app
from thoughtsource.cli.demo import load_demo_data


def test_demo_data_is_a_real_sample(shared_data: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("THOUGHTSOURCE_DATA", str(shared_data))
    c, source = load_demo_data(5, seed=0)
    assert len(c) == 5
    assert source.startswith(("gsm8k/test", "worldtree/train"))
    again, _ = load_demo_data(5, seed=0)
    assert again == c


@pytest.mark.slow
def test_demo_runs_end_to_end(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("transformers")
    monkeypatch.setenv("THOUGHTSOURCE_DATA", str(shared_data))
    out = tmp_path / "demo"
    r = CliRunner().invoke(app, ["demo", "--out", str(out), "--n-samples", "2", "--max-tokens", "12"])
    assert r.exit_code == 0, r.output
    data = json.loads((out / "demo.json").read_text())
    samples = [x for splits in data.values() for xs in splits.values() for x in xs]
    assert len(samples) == 2
    for x in samples:  # ours under both triggers, next to the published Kojima et al. CoT of the same question
        ours = [g for g in x["generated_cot"] if g["author"] != "kojima"]
        assert sorted(g["cot_trigger"] for g in ours) == ["kojima-01", "none"]
        assert [g["model"] for g in x["generated_cot"] if g["author"] == "kojima"] == ["text-davinci-002"]
    assert all(isinstance(g["answers"][0]["correct_answer"], bool) for x in samples for g in x["generated_cot"])
    assert (out / "accuracy.png").stat().st_size > 1000 and (out / "accuracy.csv").exists() and (out / "config.yaml").exists()
    assert "accuracy" in r.output.lower() and "text-davinci-002" in r.output
