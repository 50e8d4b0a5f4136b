"""star.analysis.accuracy and star.seeds / star.analysis.seed_aggregate: intervals and tests against published values, best iteration on dev,
counts of old runs, aggregation over seeds."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from star_synthetic import summary, write_run

from thoughtsource.errors import ConfigError
from thoughtsource.star.analysis.accuracy import (
    Comparison,
    Proportion,
    best_iteration,
    compare,
    difference_interval,
    fisher_exact,
    group_proportions,
    groups,
    run_stats,
)
from thoughtsource.star.analysis.seed_aggregate import aggregate, load_seed_runs
from thoughtsource.star.config import StarConfig
from thoughtsource.star.seeds import parse_seeds, run_seeds

DOCS = Path(__file__).resolve().parents[2] / "docs" / "star-results"


# --------------------------------------------------------------------------- intervals and tests
@pytest.mark.parametrize(("k", "n", "lo", "hi"), [
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I, Wilson score method
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718),
])
def test_wilson_interval_matches_newcombe_1998(k: int, n: int, lo: float, hi: float) -> None:
    got = Proportion(k, n).interval
    assert got == pytest.approx((lo, hi), abs=5e-5)
    assert Proportion(k, n).to_dict()["ci95"] == pytest.approx([lo, hi], abs=1e-4)


def test_proportion_formats_counts_percent_and_interval() -> None:
    assert Proportion(3, 24).fmt() == "3/24 = 0.125 [0.043, 0.310]"
    assert Proportion(0, 0).fmt() == "—" and Proportion(0, 0).accuracy is None
    assert Proportion(0, 0).to_dict() == {"correct": 0, "n": 0, "accuracy": None, "ci95": None}


def test_fisher_exact_textbook_tables() -> None:
    # Fisher's lady tasting tea: 3 of 4 cups right, margins 4/4/4/4: P = (1 + 16 + 16 + 1) / 70
    assert fisher_exact(3, 4, 1, 4) == pytest.approx(34 / 70, rel=1e-12)
    # scipy.stats.fisher_exact's documented example [[8, 2], [1, 5]]
    assert fisher_exact(8, 10, 1, 6) == pytest.approx(0.0349650349650, rel=1e-9)
    # symmetric in the arms, 1 for equal proportions
    assert fisher_exact(1, 6, 8, 10) == pytest.approx(fisher_exact(8, 10, 1, 6))
    assert fisher_exact(5, 10, 5, 10) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        fisher_exact(3, 2, 1, 4)


def test_fisher_exact_agrees_with_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = random.Random(12)
    tables = [(rng.randint(0, n1), n1, rng.randint(0, n2), n2) for n1, n2 in
              ((rng.randint(1, 80), rng.randint(1, 80)) for _ in range(300))]
    tables += [(0, 24, 0, 24), (24, 24, 0, 24), (480, 1000, 520, 1000)]
    for k1, n1, k2, n2 in tables:
        expected = scipy_stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
        assert fisher_exact(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-7, abs=1e-12), (k1, n1, k2, n2)


@pytest.mark.parametrize(("a", "b", "lo", "hi"), [
    # Newcombe (1998), "Interval estimation for the difference between independent proportions", method 10
    ((56, 70), (48, 80), 0.0524, 0.3339), ((9, 10), (3, 10), 0.1705, 0.8090), ((5, 56), (0, 29), -0.0381, 0.1926),
])
def test_difference_interval_matches_newcombe_1998(a: tuple[int, int], b: tuple[int, int], lo: float, hi: float) -> None:
    assert difference_interval(Proportion(*a), Proportion(*b)) == pytest.approx((lo, hi), abs=5e-5)


def test_comparison_reports_difference_p_and_significance() -> None:
    c = Comparison(Proportion(20, 20), Proportion(5, 20))
    d = c.to_dict()
    assert d["difference"] == 0.75 and d["significant_at_0.05"] is True and d["p_value"] < 1e-5
    assert c.fmt().startswith("+0.750 [")
    small = compare(Proportion(5, 24), Proportion(2, 24))
    assert small is not None and not small.significant() and small.p_value == pytest.approx(0.4158007587, rel=1e-8)
    assert compare(Proportion(1, 2), None) is None and compare(Proportion(0, 0), Proportion(1, 2)) is None


# --------------------------------------------------------------------------- one run
def test_best_iteration_is_chosen_on_dev_and_reported_on_test() -> None:
    # test peaks at iteration 3, dev at iteration 2 (tied with 4: the earliest wins)
    s = summary(test=[(10, 100), (20, 100), (30, 100), (40, 100), (25, 100)],
                dev=[(5, 50), (10, 50), (20, 50), (15, 50), (20, 50)])
    b = best_iteration(s)
    assert b is not None and (b.iteration, b.chosen_on) == (2, "dev")
    assert b.test == Proportion(30, 100) and b.dev == Proportion(20, 50)
    assert "dev" in b.note
    # no dev split: chosen on test, and the note says it is optimistic
    s_nodev = summary(test=[(10, 100), (20, 100), (40, 100), (40, 100)])
    b = best_iteration(s_nodev)
    assert b is not None and (b.iteration, b.chosen_on, b.dev) == (2, "test", None)
    assert "TEST" in b.note and "optimistic" in b.note


def test_run_stats_compares_final_and_best_with_iteration_0() -> None:
    s = summary(test=[(10, 100), (20, 100), (30, 100), (40, 100)], dev=[(5, 50), (10, 50), (20, 50), (15, 50)],
                by_group=[{"1-digit": (k, 50), "2-digit": (0, 50)} for k in (10, 20, 30, 40)])
    r = run_stats(s)
    assert r["final_iteration"] == 3 and r["best"]["iteration"] == 2
    assert r["vs_iteration_0"]["final"]["difference"] == 0.3 and r["vs_iteration_0"]["final"]["significant_at_0.05"]
    assert r["vs_iteration_0"]["best"]["iteration"] == 2
    assert r["vs_iteration_0"]["best"]["p_value"] == pytest.approx(fisher_exact(30, 100, 10, 100), rel=1e-5)
    it1 = r["iterations"][1]
    assert it1["test"]["correct"] == 20 and it1["dev"]["n"] == 50
    assert it1["test_by_group"]["1-digit"]["ci95"] == pytest.approx(list(Proportion(20, 50).interval), abs=1e-4)
    # a run whose best iteration is 0 is not compared with itself
    flat = run_stats(summary(test=[(10, 100), (5, 100)]))
    assert set(flat["vs_iteration_0"]) == {"final"}


def test_group_counts_of_old_runs_are_derived_only_when_exact() -> None:
    old = json.loads((DOCS / "star_metrics.json").read_text())
    assert "test_correct_by_group" not in old["iterations"][0]  # written before the counts existed
    g = group_proportions(old["iterations"][0], "test", old["config"])
    assert g == {"1-digit": Proportion(3, 8), "2-digit": Proportion(0, 8), "3-digit": Proportion(0, 8)}
    assert groups(old) == ["1-digit", "2-digit", "3-digit"]
    # an accuracy that no count of n_test_per_digit reproduces is left out, not guessed
    m = {"test_accuracy_by_group": {"1-digit": 0.3}}
    assert group_proportions(m, "test", {"task": "arithmetic", "task_options": {"n_test_per_digit": 8}}) == {}
    assert group_proportions(m, "test", {"task": "gsm8k", "task_options": {}}) == {}
    # new runs: the written counts win
    m = {"test_correct_by_group": {"10-digit": [1, 3], "2-digit": [2, 4]}}
    assert group_proportions(m) == {"10-digit": Proportion(1, 3), "2-digit": Proportion(2, 4)}
    assert groups({"iterations": [m]}) == ["2-digit", "10-digit"]


# --------------------------------------------------------------------------- seeds
def test_parse_seeds() -> None:
    assert parse_seeds("0,1,2") == [0, 1, 2]
    assert parse_seeds("0-2,7,1") == [0, 1, 2, 7]
    for bad in ("", "a", "1-x"):
        with pytest.raises(ConfigError):
            parse_seeds(bad)


def _three_seeds() -> dict[int, dict[str, Any]]:
    g = [{"1-digit": (k, 10)} for k in (1, 2, 3)]
    return {
        0: summary(test=[(10, 100), (20, 100), (30, 100)], dev=[(5, 50), (10, 50), (12, 50)], by_group=g, seed=0),
        1: summary(test=[(12, 100), (26, 100), (20, 100)], dev=[(6, 50), (15, 50), (10, 50)], by_group=g, seed=1),
        2: summary(test=[(8, 100), (23, 100)], dev=[(4, 50), (14, 50)], by_group=g[:2], seed=2),  # one iteration short
    }


def test_aggregate_pools_counts_and_spreads_per_seed_accuracies() -> None:
    agg = aggregate(_three_seeds())
    assert agg["seeds"] == [0, 1, 2] and "seed" not in agg["config"]
    assert [m["iteration"] for m in agg["iterations"]] == [0, 1]  # only iterations every seed reached
    it1 = agg["iterations"][1]
    assert (it1["test_correct"], it1["test_n"]) == (20 + 26 + 23, 300)
    assert (it1["dev_correct"], it1["dev_n"]) == (10 + 15 + 14, 150)
    assert it1["test_accuracy_by_seed"] == {"0": 0.2, "1": 0.26, "2": 0.23}
    spread = it1["test_accuracy_seeds"]
    assert spread["mean"] == pytest.approx(0.23) and spread["sd"] == pytest.approx(0.03)
    assert (spread["min"], spread["max"]) == (0.2, 0.26)
    assert it1["test_correct_by_group"] == {"1-digit": [6, 30]}
    assert it1["kept"] == 3 * 16
    # best on the pooled dev accuracy; every seed's own best on its dev
    assert agg["best"]["iteration"] == 1 and agg["best"]["chosen_on"] == "dev"
    assert agg["best"]["test"]["correct"] == 69
    assert {s: b["iteration"] for s, b in agg["best_by_seed"].items()} == {"0": 2, "1": 1, "2": 1}
    # the aggregate reads as a run: run_stats works on it
    assert run_stats(agg)["seeds"] == [0, 1, 2]


def test_run_seeds_runs_each_seed_into_its_folder_and_writes_the_aggregate(tmp_path: Path) -> None:
    fake = _three_seeds()
    calls: list[tuple[int, Path, bool]] = []

    def runner(cfg: StarConfig, out: Path, *, resume: bool, show_progress: bool) -> dict[str, Any]:
        calls.append((cfg.seed, Path(out), resume))
        return write_run(Path(out), fake[cfg.seed]) and fake[cfg.seed]

    agg = run_seeds(StarConfig(iterations=2), tmp_path, [0, 1, 2], resume=True, runner=runner)
    assert calls == [(s, tmp_path / f"seed_{s}", True) for s in (0, 1, 2)]
    on_disk = json.loads((tmp_path / "aggregate.json").read_text())
    assert on_disk == json.loads(json.dumps(agg))
    for png in ("aggregate.png", "aggregate_per_group.png"):
        assert (tmp_path / "plots" / png).stat().st_size > 5000
    assert list(load_seed_runs(tmp_path)) == [0, 1, 2]
    with pytest.raises(ConfigError):
        aggregate({})
