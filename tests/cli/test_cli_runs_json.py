"""--json on runs evaluate / outliers / best: the results alone on stdout, as JSON a script reads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_in_process import run_cli


def ts(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def test_runs_commands_print_json(examples_dir: Path) -> None:
    f = examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
    ev = ts("runs", "evaluate", str(f), "--json")
    assert ev.returncode == 0, ev.stderr
    rows = json.loads(ev.stdout)
    assert len(rows) == 6 and {r["file"] for r in rows} == {f.name} and sum(r["correct"] for r in rows) == 492
    best = json.loads(ts("runs", "best", str(f), "--json").stdout)
    assert best["mode"] == "strict" and best["accuracy"]["med_qa"] == {"model: gpt-4 · instruction: none · trigger: zhou-01": 0.76}
    assert {b["dataset"] for b in best["best"]} == set(best["accuracy"])
    out = ts("runs", "outliers", str(f), "--json")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert isinstance(listed, list) and all("dataset" in r for r in listed)
    shown = ts("runs", "outliers", str(f)).stdout
    assert shown.startswith(f"{len(listed)} outliers")
