"""The bootstrap report's statistics: the exact McNemar test and the dev-chosen iteration."""

from __future__ import annotations

import pytest

from thoughtsource.star.analysis.bootstrap_experiment import chosen_iteration, mcnemar_exact, paired


@pytest.mark.parametrize(("b", "c"), [(0, 0), (0, 1), (1, 0), (3, 3), (0, 10), (7, 2), (12, 40), (95, 5), (0, 200)])
def test_mcnemar_exact_is_the_two_sided_binomial_test_on_discordant_pairs(b: int, c: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    expected = 1.0 if b + c == 0 else stats.binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_paired_counts_only_problems_both_answered() -> None:
    a = {"p1": True, "p2": True, "p3": False, "p4": True}
    b = {"p1": True, "p2": False, "p3": True, "p5": False}
    r = paired(a, b)
    assert (r["n"], r["only_a"], r["only_b"], r["difference"]) == (3, 1, 1, 0.0) and r["p_value"] == 1.0


def test_chosen_iteration_is_the_best_dev_accuracy_above_k_earliest_on_ties() -> None:
    def it(i: int, five: int, six: int, one: int = 8) -> dict:
        return {"iteration": i, "dev_correct_by_group": {"1-digit": [one, 8], "5-digit": [five, 50], "6-digit": [six, 50]}}

    # iteration 2 is best above k = 4 (digits 5-6) although iteration 1 is best overall (its 1-digit score)
    summary = {"iterations": [it(0, 10, 0), it(1, 30, 5, one=8), it(2, 30, 9, one=0), it(3, 31, 8, one=0)]}
    assert chosen_iteration(summary, 4) == 2
    assert chosen_iteration({"iterations": [it(0, 10, 0), it(1, 20, 0), it(2, 20, 0)]}, 4) == 1  # tie: the earliest
    assert chosen_iteration({"iterations": [it(0, 10, 0), it(1, 20, 0)]}, 6) == 0  # nothing above k: iteration 0


def test_a_base_has_learnt_its_range_only_if_every_digit_count_up_to_k_is_right_on_dev() -> None:
    from thoughtsource.star.scratch_model import learnt_range

    seed_0 = {"1-digit": [8, 8], "2-digit": [50, 50], "3-digit": [50, 50], "4-digit": [50, 50], "5-digit": [49, 50], "6-digit": [1, 50]}
    seed_2 = {"1-digit": [8, 8], "2-digit": [21, 50], "3-digit": [3, 50], "4-digit": [0, 50], "5-digit": [0, 50]}  # the real seed 2
    assert learnt_range(seed_0, 4) and not learnt_range(seed_2, 4)
    assert learnt_range({"1-digit": [6, 8], "2-digit": [50, 50]}, 2)  # too few one-digit problems to tell
    assert not learnt_range({"1-digit": [6, 8]}, 1)  # nothing to tell from: not learnt


def test_gold_ceiling_counts_every_digit_count_the_base_saw_in_gold() -> None:
    """Issue 30: a few extra gold examples at k+1 make k+1 'seen'; only digit counts above every gold one are never seen."""
    from pathlib import Path

    from thoughtsource.io import read_json
    from thoughtsource.star.analysis.bootstrap_experiment import gold_ceiling

    committed = Path(__file__).resolve().parents[2] / "docs" / "star-results" / "bootstrap_v2"
    for seed in (0, 1, 2):  # the real bases: taught 1-4 digits, plus 800 five-digit examples (2 %)
        info = read_json(committed / f"base_{seed}" / "thoughtsource_base.json")
        assert info["k"] == 4 and gold_ceiling(info) == 5
    recipe_only = {"k": 4, "config": {"data": {"digits": [1, 4], "extra": {"5": 0.02, "6": 0.01}}}}
    assert gold_ceiling(recipe_only) == 6
    assert gold_ceiling({"k": 3, "data": {"by_digits": {"1": 10, "2": 10, "3": 10, "4": 0}}}) == 3


def test_the_never_seen_rule_needs_two_never_seen_digit_counts_at_90_percent_in_two_of_three_seeds(tmp_path) -> None:
    import json

    from thoughtsource.star.analysis.bootstrap_experiment import report

    def run(seed: int, at_last: dict[str, int]) -> None:
        base = tmp_path / f"base_{seed}"
        base.mkdir()
        (base / "thoughtsource_base.json").write_text(json.dumps(
            {"k": 2, "data": {"by_digits": {"1": 100, "2": 100, "3": 5}}, "dev_correct_by_group": {"2-digit": [50, 50]}}))
        folder = tmp_path / f"seed_{seed}" / "star"
        its = []
        for i, acc in enumerate([{"3-digit": 0, "4-digit": 0, "5-digit": 0}, at_last]):
            (folder / f"iter_{i}").mkdir(parents=True)
            rows = [{"id": f"{g}-{j}", "group": g, "correct": j < c} for g, c in acc.items() for j in range(200)]
            (folder / f"iter_{i}" / "test.json").write_text(json.dumps({"rows": rows}))
            its.append({"iteration": i, "dev_correct_by_group": {g: [c // 4, 50] for g, c in acc.items()},
                        "test_correct_by_group": {g: [c, 200] for g, c in acc.items()}})
        (folder / "metrics.json").write_text(json.dumps({"config": {"model": str(base)}, "iterations": its}))

    run(0, {"3-digit": 200, "4-digit": 190, "5-digit": 181})  # 3 digits were seen (5 gold examples): 4 and 5 count
    run(1, {"3-digit": 200, "4-digit": 200, "5-digit": 179})  # 5-digit at 89.5 %: one never-seen count only
    run(2, {"3-digit": 200, "4-digit": 199, "5-digit": 198})
    rep = report(tmp_path)
    assert {s: rep["seeds"][s]["star"]["never_seen"]["reached_target"] for s in ("0", "1", "2")} == {
        "0": ["4-digit", "5-digit"], "1": ["4-digit"], "2": ["4-digit", "5-digit"]}
    assert rep["never_seen_acceptance"]["seeds_holding"] == 2 and rep["never_seen_acceptance"]["holds"]
