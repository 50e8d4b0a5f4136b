"""``thoughtsource star run`` / ``star compare`` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thoughtsource.cli import app
from thoughtsource.errors import ConfigError

runner = CliRunner()


@pytest.mark.slow
def test_fewshot_baseline_via_cli_then_compare(tmp_path: Path) -> None:
    out = tmp_path / "fewshot"
    args = ["star", "run", "--task", "arithmetic", "--model", "embedded", "--digits", "1-2", "--n-train", "4", "--n-test", "1",
            "--n-dev", "1", "--fewshot-k", "1", "--max-new-tokens", "40", "--baseline", "fewshot", "--iterations", "3", "--out", str(out)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert [m["iteration"] for m in metrics["iterations"]] == [0]  # few-shot: no training
    # one dev problem a digit count, not the task's default 50 (100 greedy decodes the test never looked at)
    assert metrics["config"]["task_options"] == {"min_digits": 1, "max_digits": 2, "n_train": 4, "n_test_per_digit": 1,
                                                 "n_dev_per_digit": 1}
    assert set(metrics["iterations"][0]["dev_accuracy_by_group"]) == {"1-digit", "2-digit"}
    assert set(metrics["iterations"][0]["test_accuracy_by_group"]) == {"1-digit", "2-digit"}
    resolved = json.loads((out / "config.json").read_text())
    assert resolved["baseline"] == "fewshot" and resolved["generation"]["max_new_tokens"] == 40
    # the same --out again without --resume is refused; with --resume nothing is redone
    r = runner.invoke(app, args)
    assert isinstance(r.exception, ConfigError) and "--resume" in str(r.exception)
    mtime = (out / "iter_0" / "test.json").stat().st_mtime_ns
    r = runner.invoke(app, [*args, "--resume", "--json"])
    assert r.exit_code == 0, r.output
    assert (out / "iter_0" / "test.json").stat().st_mtime_ns == mtime
    data = json.loads(r.stdout)  # --json: stdout is the summary alone
    it0 = metrics["iterations"][0]
    assert data["stats"]["iterations"][0]["test"]["correct"] == it0["test_correct"] and data["stats"]["best"]["chosen_on"] == "dev"

    png = tmp_path / "cmp.png"
    r = runner.invoke(app, ["star", "compare", f"a={out}", f"b={out}", "--out", str(png)])
    assert r.exit_code == 0, r.output
    assert png.stat().st_size > 1000


def test_bad_options_are_config_errors(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("iterations: -1\nsteps: {first: 0}\nlearning_rate: 3\n")
    r = runner.invoke(app, ["star", "run", "--config", str(cfg), "--out", str(tmp_path / "o")])
    assert isinstance(r.exception, ConfigError)
    text = str(r.exception)
    assert "iterations" in text and "steps.first" in text and "learning_rate" in text
    assert not (tmp_path / "o").exists()


def test_help_lists_the_star_commands() -> None:
    r = runner.invoke(app, ["star", "--help"])
    assert r.exit_code == 0 and all(c in r.output for c in ("run", "compare", "report"))


def test_out_that_is_a_file_is_a_config_error(tmp_path: Path) -> None:
    f = tmp_path / "run.json"
    f.write_text("{}")
    r = runner.invoke(app, ["star", "run", "--out", str(f), "--baseline", "fewshot"])
    assert isinstance(r.exception, ConfigError) and str(r.exception) == f"{f}: is a file; --out is the run's folder"
    assert f.read_text() == "{}"


def test_every_run_option_reaches_a_config_field_or_the_task() -> None:
    """``star run``'s named options are made from StarConfig's fields and the task options' model (each names a field that
    exists, with its description as help), and every parameter of the command is one of them, ``--set``, or one the
    command itself uses."""
    import inspect

    from thoughtsource.cli.config_options import field_at
    from thoughtsource.cli.star import RUN_OPTIONS, run

    for option in RUN_OPTIONS:
        assert field_at(option.model, option.path).description, option.path
    own = {"out", "config", "seeds", "resume", "as_json"}
    assert set(inspect.signature(run).parameters) == own | {"set_"} | {o.param for o in RUN_OPTIONS}


@pytest.mark.parametrize("task, typo, hint", [("arithmetic", "min_digit", "'min_digits'"), ("gsm8k", "n_trian", "'n_train'")])
def test_a_task_options_typo_is_one_line_with_did_you_mean(tmp_path: Path, task: str, typo: str, hint: str) -> None:
    """A typo inside task_options was a TypeError traceback (unexpected keyword 'min_digit') once the run had started."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"task: {task}\ntask_options: {{{typo}: 2}}\n")
    r = runner.invoke(app, ["star", "run", "--config", str(cfg), "--out", str(tmp_path / "o")])
    assert isinstance(r.exception, ConfigError), r.exception
    assert f"unknown task_options key '{typo}' (did you mean {hint}" in str(r.exception)
    assert "\n" not in str(r.exception) and not (tmp_path / "o").exists()


def test_base_config_task_options_typo_is_a_config_error(tmp_path: Path) -> None:
    from thoughtsource.star.scratch_model import BaseConfig

    with pytest.raises(ConfigError, match="did you mean 'max_digits'"):
        BaseConfig.from_dict({"task_options": {"max_digit": 3}}).make_task()
