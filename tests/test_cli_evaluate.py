"""``thoughtsource evaluate FILE``: rich tables, CSV/Markdown tables and PNG plots."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from thoughtsource.cli import app
from thoughtsource.collection import Collection
from thoughtsource.datasets.cot_logs import log_to_samples, read_kojima_log_file
from thoughtsource.errors import ConfigError

runner = CliRunner()


def test_evaluate_model_run(examples_dir: Path, tmp_path: Path) -> None:
    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    out = tmp_path / "ev"
    r = runner.invoke(app, ["evaluate", str(f), "--out", str(out), "--scored", str(tmp_path / "scored.json")])
    assert r.exit_code == 0, r.output
    assert "accuracy (strict)" in r.output and "med_qa" in r.output
    assert {p.name for p in out.iterdir()} == {
        "accuracy.csv",
        "accuracy.md",
        "answers.csv",
        "accuracy.png",
        "trigger_heatmap.png",
    }
    assert (out / "accuracy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    csv = (out / "accuracy.csv").read_text().splitlines()
    assert csv[0].startswith(
        "dataset,split,model,instruction,cot_trigger,answer_extraction,mode,n,correct,accuracy,ci_low,ci_high"
    )
    assert len(csv) == 1 + 2 * 6  # 6 datasets x 2 modes
    scored = Collection.load(tmp_path / "scored.json")
    flags = [a.correct_answer for _, _, s in scored.samples() for _, a in s.iter_answers()]
    assert len(flags) == 600 and sum(flags) == 492  # 82.0%, as printed


def test_evaluate_numbers_flexible(shared_data: Path, tmp_path: Path) -> None:
    log = read_kojima_log_file(shared_data / "kojima_logs" / "multiarith_zero_shot_cot.log")
    f = tmp_path / "multiarith.json"
    Collection(data={"multiarith": {"test": log_to_samples(log)}}).dump(f)
    r = runner.invoke(app, ["evaluate", str(f), "--mode", "flexible", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "accuracy (flexible)" in r.output and "79.8" in r.output  # 479/600, see docs/evaluation.md
    md = (tmp_path / "o" / "accuracy.md").read_text()
    assert "| multiarith" in md and "79.8" in md


def test_bad_k_is_a_config_error(examples_dir: Path, tmp_path: Path) -> None:
    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    r = runner.invoke(app, ["evaluate", str(f), "--k", "a,b", "--out", str(tmp_path)])
    assert isinstance(r.exception, ConfigError)
