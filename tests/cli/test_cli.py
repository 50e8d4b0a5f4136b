from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cli_in_process import run_cli
from thoughtsource.cli import app

runner = CliRunner()


def test_info_table(examples_dir: Path):
    r = runner.invoke(app, ["info", str(examples_dir / "annotated" / "annotated_set.json")])
    assert r.exit_code == 0, r.output
    assert "commonsense_qa" in r.output and "strategy_qa" in r.output


def test_convert_and_validate(examples_dir: Path, tmp_path: Path):
    src = examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"
    r = runner.invoke(app, ["convert", str(src), str(tmp_path / "pq"), "--to", "parquet"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "pq" / "worldtree" / "train.parquet").exists()
    r = runner.invoke(app, ["convert", str(tmp_path / "pq"), str(tmp_path / "back.json"), "--to", "thoughtsource-json"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["validate", str(tmp_path / "back.json")])
    assert r.exit_code == 0, r.output


def test_user_error_is_one_line_without_traceback(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    p = run_cli("info", bad)
    assert p.returncode == 1
    assert "Traceback" not in p.stderr
    assert f"{bad}:1:3: invalid JSON" in p.stderr


def test_help_is_fast_and_imports_nothing_heavy():
    code = "import sys, time; t=time.time(); from thoughtsource.cli import app; print(time.time()-t); print('torch' in sys.modules or 'transformers' in sys.modules or 'datasets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[1] == "False"
    p = subprocess.run([sys.executable, "-m", "thoughtsource", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "info" in p.stdout  # its time is measured in docs/benchmarks.md, not asserted here


def test_a_bad_generate_config_file_is_named_with_every_problem(tmp_path: Path):
    cfg = tmp_path / "gen.yaml"
    cfg.write_text("model: 3\ntemperatur: 0.5\n")
    p = run_cli("generate", "--config", str(cfg), "--dataset", "gsm8k", "--out", str(tmp_path / "o.json"))
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.splitlines() == [f"error: {cfg}: invalid generate config (this file with the flags on top)",
                                     "  - model: Input should be a valid string", "  - temperatur: Extra inputs are not permitted"]
    assert not (tmp_path / "o.json").exists()
