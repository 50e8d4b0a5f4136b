"""The ablations report over the committed bootstrap metrics and reruns laid beside them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from thoughtsource.star.analysis.ablations import hinted_by_digits, load_runs, markdown, mean_interval, report, run_test_counts

ORIGINALS = Path(__file__).resolve().parents[2] / "docs" / "star-results" / "bootstrap_v2"


def _rerun(root: Path, seed: int, arm: str, train_seed: int, five_digit: list[int]) -> None:
    """A rerun's metrics: the original's, with iteration 1's and 2's 5-digit test counts replaced."""
    m = copy.deepcopy(json.loads((ORIGINALS / f"seed_{seed}_{arm}_metrics.json").read_text()))
    m["iterations"] = [it for it in m["iterations"] if it["iteration"] <= 2]
    for it, right in zip(m["iterations"][1:], five_digit, strict=True):
        it["test_correct_by_group"]["5-digit"] = [right, 200]
    out = root / f"seed_{seed}" / f"{arm}@train_{train_seed}"
    out.mkdir(parents=True)
    (out / "metrics.json").write_text(json.dumps(m))


def test_counts_and_hints_come_from_the_committed_metrics() -> None:
    m = json.loads((ORIGINALS / "seed_0_star_metrics.json").read_text())
    assert run_test_counts(m, 0)[5] == (2, 200)  # the base: 2 of 200 five-digit test sums
    assert run_test_counts(m, 99) == {}
    hinted = hinted_by_digits(m, 1)
    assert hinted[5] == 12 and hinted[6] == 0 and sum(hinted.values()) == 43  # 43 rationalized records at iteration 1
    assert hinted_by_digits(json.loads((ORIGINALS / "seed_0_norat_metrics.json").read_text()), 1) == {
        d: 0 for d in range(1, 11)}


def test_runs_by_training_seed_their_interval_and_the_comparison(tmp_path: Path) -> None:
    _rerun(tmp_path, 0, "norat", 101, [10, 20])
    _rerun(tmp_path, 0, "norat", 102, [4, 8])
    runs = load_runs(ORIGINALS, tmp_path, [0], ("norat", "star"))
    assert sorted(runs[0]["norat"]) == [0, 101, 102] and sorted(runs[0]["star"]) == [0]
    rep = report(ORIGINALS, tmp_path, [0], digits=(5,))
    cell = next(r for r in rep["spread"] if r["arm"] == "norat" and r["iteration"] == 1)
    assert cell["by_train_seed"] == {0: 3, 101: 10, 102: 4}  # the original norat got 3 of 200 at iteration 1
    assert cell["mean"] == pytest.approx(17 / 3) and cell["ci95"][0] < 17 / 3 < cell["ci95"][1]
    cmp = next(c for c in rep["comparisons"] if c["a"] == "star" and c["b"] == "norat" and c["iteration"] == 1)
    assert cmp["a_runs"] == [18] and cmp["welch_p"] is None  # one star run: no test over runs
    assert "| 0 | norat | 1 | 5 | 0: 3, 101: 10, 102: 4 |" in markdown(rep)


def test_mean_interval_matches_scipy() -> None:
    from scipy import stats

    r = mean_interval([85.0, 159.0, 161.0])
    lo, hi = stats.t.interval(0.95, 2, loc=135.0, scale=stats.sem([85.0, 159.0, 161.0]))
    assert r["ci95"] == pytest.approx([lo, hi]) and (r["min"], r["max"]) == (85.0, 161.0)
    assert mean_interval([5.0])["ci95"] is None
