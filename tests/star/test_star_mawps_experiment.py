"""experiments/star_mawps.py at tiny scale on CPU: the real CLI runs the arms from configs/star/mawps/run.yaml
(shrunk), resumes, and --report (the script's entry point, run in the test's process) writes the paired tests, the
plot and the compressed per-problem rows.

The star arm runs first; its completion store is shared into the gold arm (``thoughtsource.store.share_completions``,
as experiments/star_word_problems.py does), so gold's iteration 0 (the same few-shot base, prompts and greedy
decoding, hence the same store keys) is read, not generated again; then one call runs all three arms, which resumes
the finished star arm."""

from __future__ import annotations

import gzip
import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from thoughtsource.io import read_json
from thoughtsource.store import share_completions

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "experiments" / "star_mawps.py"


@pytest.mark.timeout(3600)  # ~170 s on a quiet 2-core machine, 4x that at load 8
def test_arms_side_by_side_then_the_report(shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = yaml.safe_load((REPO / "configs" / "star" / "mawps" / "run.yaml").read_text(encoding="utf-8"))
    cfg.update(task_options={"per_iteration": 4, "n_test": 3, "n_dev": 2}, iterations=1, fewshot_k=2, bf16=False,
               steps={"first": 2, "warmup_steps": 0}, batch_size=2,
               generation={"engine": "transformers", "batch_size": 8, "max_new_tokens": 24, "threads": 1})
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    root = tmp_path / "runs"
    cmd = [sys.executable, str(SCRIPT), "--root", str(root), "--arms", "star,direct,gold", "--config", str(config),
           "--data", str(shared_data)]
    assert subprocess.run([*cmd[:5], "star", *cmd[6:]], check=False).returncode == 0
    assert share_completions(root / "star" / "completions.sqlite", root / "gold") > 0
    steps = [root / "star" / "iter_1" / f for f in ("generate.json", "train_stats.json", "test.json")]
    before = [f.stat().st_mtime_ns for f in steps]
    assert subprocess.run(cmd, check=False).returncode == 0
    assert [f.stat().st_mtime_ns for f in steps] == before  # the finished star arm resumes: no step redone
    for arm in ("star", "direct", "gold"):
        assert (root / arm / "metrics.json").is_file() and (root / "logs" / f"{arm}.log").is_file()
    for split, n in (("test", 3), ("dev", 2)):  # gold's iteration 0: every completion read from star's, none generated
        stats = read_json(root / "gold" / "iter_0" / f"{split}.json")["stats"]
        assert stats["from_store"] == n and stats["requested"] == 0, stats

    out = tmp_path / "report"
    # the report reads files and runs no model: the script's own entry point, in this process (no third start)
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), "--root", str(root), "--arms", "star,direct,gold", "--report", str(out)])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(SCRIPT), run_name="__main__")
    assert done.value.code == 0
    rep = read_json(out / "report.json")
    assert {"star vs fewshot", "direct vs fewshot", "gold vs fewshot", "star vs direct", "gold vs star"} == set(rep["paired_tests"])
    for t in rep["paired_tests"].values():
        assert t["n"] == 3 and 0 <= t["p_value"] <= 1
    # matched compute: direct and gold train the schedule's steps; star too whenever it kept an example
    its = {a: rep["per_iteration"][a][1] for a in ("star", "direct", "gold")}
    assert its["direct"]["steps"] == its["gold"]["steps"] == 2 and its["star"]["steps"] == (2 if its["star"]["kept"] else 0)
    with gzip.open(out / "test_rows.json.gz", "rt", encoding="utf-8") as fh:
        rows = json.load(fh)
    assert set(rows) == {"star", "direct", "gold"} and all(set(v) == {"0", "1"} for v in rows.values())
    # iteration 0 is the same few-shot base in every arm: gold's requests had star's store keys (weights, prompt, decoding)
    assert rows["star"]["0"] == rows["gold"]["0"]
    assert all(len(v) == 3 for arm in rows.values() for v in arm.values())
    assert (out / "test_accuracy.png").stat().st_size > 0 and "star vs direct" in (out / "report.md").read_text(encoding="utf-8")
