"""thoughtsource.statistics: each estimator against scipy / statsmodels on a range of inputs, edge cases included
(0 of 0, n = 1, all and none correct), and the old import paths still giving the same functions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats
from scipy.special import comb
from statsmodels.stats import contingency_tables, proportion

from thoughtsource import statistics as st

# (correct, n): the edges (n = 1, none and all correct) and a spread of ordinary counts
COUNTS = [(0, 1), (1, 1), (0, 2), (1, 2), (2, 2), (0, 5), (3, 5), (5, 5), (1, 10), (8, 10), (0, 24), (3, 24),
          (24, 24), (17, 50), (99, 100), (500, 1000), (1, 1000), (1234, 5000)]


@pytest.mark.parametrize(("k", "n"), COUNTS)
def test_wilson_interval_matches_scipy_and_statsmodels(k: int, n: int) -> None:
    ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = st.wilson_interval(k, n)
    assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-12)
    sm_lo, sm_hi = proportion.proportion_confint(k, n, alpha=0.05, method="wilson")
    assert (lo, hi) == pytest.approx((max(0.0, sm_lo), min(1.0, sm_hi)), abs=1e-12)  # statsmodels does not clamp
    assert 0.0 <= lo <= k / n <= hi <= 1.0


def test_wilson_interval_edges() -> None:
    assert all(math.isnan(v) for v in st.wilson_interval(0, 0))
    assert st.wilson_interval(0, 3)[0] == 0.0 and st.wilson_interval(3, 3)[1] == 1.0  # clamped, not 5.55e-17
    lo99, hi99 = st.wilson_interval(3, 10, z=scipy_stats.norm.ppf(0.995))
    ci = scipy_stats.binomtest(3, 10).proportion_ci(confidence_level=0.99, method="wilson")
    assert (lo99, hi99) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert abs(st.Z95 - scipy_stats.norm.ppf(0.975)) < 1e-15


def test_wilson_intervals_is_the_scalar_interval_elementwise() -> None:
    ks = np.array([k for k, _ in COUNTS] + [0, 0.5 * 2])
    ns = np.array([n for _, n in COUNTS] + [0, 2])
    p, low, high = st.wilson_intervals(ks, ns)
    for i, (k, n) in enumerate(zip(ks, ns, strict=True)):
        lo, hi = st.wilson_interval(float(k), int(n))
        if n == 0:
            assert math.isnan(p[i]) and math.isnan(low[i]) and math.isnan(high[i]) and math.isnan(lo)
        else:
            assert (low[i], high[i]) == (lo, hi) and p[i] == k / n  # bit for bit: one formula


@pytest.mark.parametrize("n", [2, 3, 10, 57])
def test_binomial_stderr_is_the_standard_error_of_0_1_values(n: int) -> None:
    for c in (0, 1, n // 2, n):
        values = np.array([1.0] * c + [0.0] * (n - c))
        assert st.binomial_stderr(c / n, n) == pytest.approx(scipy_stats.sem(values), abs=1e-12)
    assert math.isnan(st.binomial_stderr(1.0, 1)) and math.isnan(st.binomial_stderr(math.nan, 5))


def test_fisher_exact_matches_scipy() -> None:
    for k1, n1, k2, n2 in [(0, 1, 1, 1), (1, 1, 1, 1), (0, 20, 5, 20), (20, 20, 0, 20), (3, 4, 1, 4), (8, 10, 1, 6),
                           (55, 100, 24, 100), (30, 100, 10, 100), (7, 13, 7, 13), (0, 5, 0, 9), (250, 400, 231, 400)]:
        expected = scipy_stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
        assert st.fisher_exact(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-7, abs=1e-12), (k1, n1, k2, n2)
    with pytest.raises(ValueError):
        st.fisher_exact(0, 0, 1, 2)


@pytest.mark.parametrize(("a", "b"), [((0, 1), (1, 1)), ((1, 1), (1, 1)), ((0, 20), (5, 20)), ((20, 20), (0, 20)),
                                      ((56, 70), (48, 80)), ((9, 10), (3, 10)), ((30, 100), (10, 100)), ((5, 5), (5, 5))])
def test_newcombe_interval_matches_statsmodels(a: tuple[int, int], b: tuple[int, int]) -> None:
    expected = proportion.confint_proportions_2indep(a[0], a[1], b[0], b[1], method="newcomb", compare="diff")
    assert st.newcombe_interval(*a, *b) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("b", "c"), [(0, 0), (0, 1), (1, 0), (1, 1), (0, 5), (5, 0), (3, 12), (12, 3), (20, 20),
                                      (40, 60), (1, 300)])
def test_mcnemar_exact_matches_scipy_and_statsmodels(b: int, c: int) -> None:
    expected = 1.0 if b + c == 0 else scipy_stats.binomtest(min(b, c), b + c, 0.5).pvalue
    assert st.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)
    result = contingency_tables.mcnemar([[7, b], [c, 4]], exact=True)
    assert st.mcnemar_exact(b, c) == pytest.approx(result.pvalue, rel=1e-9, abs=1e-300)


def test_pass_at_k_is_chen_et_al_formula() -> None:
    for n in (1, 2, 5, 20, 200):
        for c in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            for k in sorted({1, 2, n // 2, n} - {0}):
                if k > n or c < 0:
                    continue
                expected = 1 - comb(n - c, k, exact=True) / comb(n, k, exact=True)
                assert st.pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)
    assert st.pass_at_k(1, 1, 1) == 1.0 and st.pass_at_k(1, 0, 1) == 0.0
    for bad in ((3, 1, 4), (3, 1, 0)):
        with pytest.raises(ValueError):
            st.pass_at_k(*bad)


def test_mean_over_k_subsets_is_exact_at_the_ends_and_the_subset_mean_between() -> None:
    correct = [True, False, True, True, False]
    any_right = lambda pick: any(correct[i] for i in pick)  # noqa: E731 -- a score: pass@k's event
    assert st.mean_over_k_subsets(correct, 1, any_right) == pytest.approx(0.6)
    assert st.mean_over_k_subsets(correct, 5, any_right) == 1.0
    for k in (2, 3, 4):  # the mean over every k-subset, which pass@k computes in closed form
        estimate = st.mean_over_k_subsets(correct, k, any_right, resamples=4000, rng=np.random.default_rng(1))
        assert estimate == pytest.approx(st.pass_at_k(5, 3, k), abs=0.03)
    assert st.mean_over_k_subsets(correct, 3, any_right) == st.mean_over_k_subsets(correct, 3, any_right)  # seeded
    assert st.mean_over_k_subsets([False], 1, any_right) == 0.0  # n = 1
    with pytest.raises(ValueError):
        st.mean_over_k_subsets(correct, 6, any_right)


def test_bootstrap_interval_matches_scipy_percentile_bootstrap() -> None:
    rng = np.random.default_rng(7)
    for q in (rng.integers(0, 2, 200).astype(float), rng.random(60), np.linspace(0, 1, 30)):
        low, high = st.bootstrap_interval(q, iters=20000)
        ref = scipy_stats.bootstrap((q,), np.mean, n_resamples=20000, method="percentile", random_state=1).confidence_interval
        se = q.std(ddof=1) / math.sqrt(q.size)  # two Monte Carlo runs of one interval agree to a fraction of its width
        assert low == pytest.approx(ref.low, abs=0.1 * se) and high == pytest.approx(ref.high, abs=0.1 * se)
        assert low <= q.mean() <= high
    assert st.bootstrap_interval(np.ones(10)) == (1.0, 1.0)  # all correct
    assert st.bootstrap_interval([0.0]) == (0.0, 0.0)  # n = 1
    assert all(math.isnan(x) for x in st.bootstrap_interval([]))  # no questions


def test_star_analysis_computes_with_the_shared_statistics() -> None:
    from thoughtsource.star.analysis import accuracy, bootstrap_experiment

    same = [(accuracy.fisher_exact, st.fisher_exact), (bootstrap_experiment.mcnemar_exact, st.mcnemar_exact)]
    assert all(old is new for old, new in same)
    assert accuracy.difference_interval(accuracy.Proportion(3, 24), accuracy.Proportion(9, 24)) == st.newcombe_interval(3, 24, 9, 24)


def test_stderr_of_mean_matches_scipy_sem() -> None:
    rng = np.random.default_rng(3)
    samples = [rng.random(n) for n in (2, 3, 10, 250)] + [np.ones(4), np.array([0.0, 1.0])]
    std = [s.std(ddof=1) for s in samples]
    got = st.stderr_of_mean(std, [s.size for s in samples])
    assert got == pytest.approx([scipy_stats.sem(s) for s in samples], abs=1e-15)
    assert got[4] == 0.0  # all equal (all correct)
    assert math.isnan(st.stderr_of_mean([math.nan], [1])[0])  # n = 1: pandas' std is nan
    assert math.isnan(st.stderr_of_mean([math.nan], [0])[0])  # no questions: nan, not a warning
