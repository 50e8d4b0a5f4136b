"""``star run`` flags, ``--seeds`` and ``--json``, ``star compare`` / ``star report`` through typer's CliRunner
and the real entry point (in process), with the STaR loop replaced by one that writes synthetic runs (no model)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from star_synthetic import summary, write_run
from typer.testing import CliRunner

from cli_in_process import run_cli
from thoughtsource.cli import app
from thoughtsource.errors import ConfigError

runner = CliRunner()


# --------------------------------------------------------------------------- new flags, --seeds, --json (no model)
def _fake_loop(monkeypatch: pytest.MonkeyPatch, *, noise: bool = False) -> list[Any]:
    """Replace the STaR loop with one that records its config and writes a synthetic run; with
    ``noise`` it also prints to stdout, as libraries do while training."""
    from thoughtsource.star import loop

    seen: list[Any] = []

    def fake(cfg: Any, out: Any, *, resume: bool = False, show_progress: bool = True) -> dict[str, Any]:
        seen.append((cfg, Path(out), resume))
        if noise:
            print("{'loss': 0.5}  <- a library printing to stdout")
        s = summary(test=[(10, 100), (20 + cfg.seed, 100)], dev=[(5, 50), (9, 50)], seed=cfg.seed)
        s["config"] = cfg.model_dump(mode="json")
        write_run(Path(out), s)
        return s

    monkeypatch.setattr(loop, "run_star", fake)
    return seen


def test_run_flags_reach_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fake_loop(monkeypatch)
    r = runner.invoke(app, ["star", "run", "--out", str(tmp_path / "a"), "--filter", "verified", "--train-with-fewshot",
                            "--per-iteration", "500", "--pool-size", "50000", "--n-dev", "40", "--threads", "1",
                            "--digits", "1-3", "--seed", "3"])
    assert r.exit_code == 0, r.output
    cfg = seen[0][0]
    assert cfg.filter == "verified" and cfg.train_with_fewshot is True and cfg.seed == 3
    assert cfg.task_options == {"min_digits": 1, "max_digits": 3, "per_iteration": 500, "pool_size": 50000, "n_dev_per_digit": 40}
    assert cfg.generation.threads == 1
    # dataset tasks: --n-dev is n_dev, --prompts reaches the task
    r = runner.invoke(app, ["star", "run", "--out", str(tmp_path / "b"), "--task", "gsm8k", "--n-dev", "100",
                            "--prompts", "reference", "--no-train-with-fewshot"])
    assert r.exit_code == 0, r.output
    cfg = seen[1][0]
    assert cfg.task_options == {"n_dev": 100, "prompts": "reference"} and cfg.train_with_fewshot is False
    # human tables (stdout): accuracy with its interval, the best iteration on dev
    assert "20/100 = 0.200 [0.133, 0.289]" in r.stdout and "Best iteration per arm" in r.stdout
    assert "wrote" not in r.stdout and "wrote" in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--prompts", "star"], "not arithmetic"),
    (["--seeds", "0,1", "--seed", "2"], "not both"),
    (["--filter", "strict"], "strict"),
])
def test_bad_run_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    seen = _fake_loop(monkeypatch)
    r = runner.invoke(app, ["star", "run", "--out", str(tmp_path / "o"), *args])
    assert r.exit_code != 0 and message in r.output
    assert seen == []


def test_run_json_is_the_only_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_loop(monkeypatch, noise=True)
    r = runner.invoke(app, ["star", "run", "--out", str(tmp_path / "a"), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["out"] == str(tmp_path / "a") and data["seeds"] is None
    assert data["stats"]["best"]["iteration"] == 1 and data["stats"]["best"]["chosen_on"] == "dev"
    assert data["stats"]["vs_iteration_0"]["final"]["p_value"] > 0.05
    assert data["summary"]["iterations"][1]["test_correct"] == 20
    assert "a library printing" in r.stderr


def test_run_seeds_then_resume(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _fake_loop(monkeypatch)
    out = tmp_path / "multi"
    r = runner.invoke(app, ["star", "run", "--out", str(out), "--seeds", "0-2", "--filter", "verified", "--json"])
    assert r.exit_code == 0, r.output
    assert [(c.seed, o) for c, o, _ in seen] == [(s, out / f"seed_{s}") for s in (0, 1, 2)]
    data = json.loads(r.stdout)
    assert data["seeds"] == [0, 1, 2] and data["summary"]["iterations"][1]["test_correct"] == 20 + 21 + 22
    assert (out / "aggregate.json").exists() and (out / "plots" / "aggregate.png").exists()
    # without --json: the seeds table on stdout
    r = runner.invoke(app, ["star", "run", "--out", str(out), "--seeds", "0-2", "--resume"])
    assert r.exit_code == 0, r.output
    assert "Seeds" in r.stdout and "0.200, 0.210, 0.220" in r.stdout and "STaR training" not in r.stdout
    # --resume takes the config of the first seed's run; command-line flags still win
    r = runner.invoke(app, ["star", "run", "--out", str(out), "--seeds", "0-2", "--resume", "--iterations", "5"])
    assert r.exit_code == 0, r.output
    resumed = [c for c, _, resume in seen[6:] if resume]
    assert len(resumed) == 3 and all(c.filter == "verified" and c.iterations == 5 for c in resumed)


# --------------------------------------------------------------------------- compare and report
def _two_runs(tmp_path: Path) -> list[str]:
    a = write_run(tmp_path / "a", summary(test=[(20, 100), (50, 100)], dev=[(10, 50), (25, 50)]))
    b = write_run(tmp_path / "b", summary(test=[(20, 100), (24, 100)], dev=[(10, 50), (11, 50)], rationalization=False))
    return [f"STaR={a}", f"no rat={b}"]


def test_compare_json_on_stdout_logs_on_stderr(tmp_path: Path) -> None:
    """A real subprocess: stdout must parse as JSON on its own."""
    args = _two_runs(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    p = run_cli("star", "compare", *args, "--reference", "no rat", "--json", "--out", str(tmp_path / "cmp.png"), env=env)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["reference"] == "no rat"
    final = data["vs_reference"]["STaR"]["final"]
    assert (final["a"]["correct"], final["b"]["correct"]) == (50, 24) and final["significant_at_0.05"] is True
    assert "wrote" in p.stderr and (tmp_path / "cmp.png").stat().st_size > 1000


def test_compare_tables_markdown_and_report(tmp_path: Path) -> None:
    args = _two_runs(tmp_path)
    r = runner.invoke(app, ["star", "compare", *args, "--markdown", str(tmp_path / "cmp.md")])
    assert r.exit_code == 0, r.output
    assert "Each arm against STaR" in r.stdout and "no rat − STaR" in r.stdout
    md = (tmp_path / "cmp.md").read_text()
    assert "| no rat − STaR | final | 1 vs 1 |" in md
    r = runner.invoke(app, ["star", "report", *args, "--out", str(tmp_path / "docs" / "r.md"), "--title", "Arithmetic"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "docs" / "r.md").read_text() == "## Arithmetic\n\n" + md
    r = runner.invoke(app, ["star", "compare", *args, "--reference", "missing"])
    assert isinstance(r.exception, ConfigError) and "missing" in str(r.exception)
