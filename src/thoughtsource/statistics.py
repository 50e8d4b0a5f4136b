"""The toolkit's estimators, each written once: every accuracy, interval and test that evaluate, reporting and STaR print.

One proportion
    :func:`wilson_interval` (one) and :func:`wilson_intervals` (arrays): the Wilson score interval, one formula.
    :func:`binomial_stderr`: the standard error of a mean of n 0/1 values (lm-evaluation-harness's ``mean_stderr``);
    :func:`stderr_of_mean`: the same of any n values from their sample standard deviation (arrays).
Two proportions
    :func:`fisher_exact`: two-sided Fisher's exact test (independent samples); :func:`newcombe_interval`: the
    hybrid score interval of a difference (method 10 of Newcombe 1998); :func:`mcnemar_exact`: the exact McNemar
    test (paired samples, a two-sided binomial test on the discordant pairs).
Several samples per question
    :func:`pass_at_k`: the unbiased pass@k of Chen et al. (2021); :func:`mean_over_k_subsets`: maj@k's estimator
    (the mean of a score over random k-subsets of the n samples); :func:`bootstrap_interval`: the percentile
    bootstrap interval of a mean over questions.

Pure arithmetic (numpy inside the array functions): the bottom layer, importable from anywhere.  Each estimator is
checked against scipy/statsmodels in ``tests/test_statistics.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "Z95",
    "binomial_stderr",
    "bootstrap_interval",
    "fisher_exact",
    "mcnemar_exact",
    "mean_over_k_subsets",
    "newcombe_interval",
    "pass_at_k",
    "stderr_of_mean",
    "wilson_interval",
    "wilson_intervals",
]

#: The two-sided 95 % normal quantile.
Z95 = 1.959963984540054


# --------------------------------------------------------------------------- one proportion
def _wilson_bounds(p: Any, n: Any, z: float, sqrt: Callable[[Any], Any]) -> tuple[Any, Any]:
    """The Wilson score interval's unclamped (centre - half, centre + half), for floats (math.sqrt) or arrays (np.sqrt)."""
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return centre - half, centre + half


def wilson_interval(correct: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% for the default z); (nan, nan) for n = 0.

    The interval always contains the point estimate ``correct / n`` and lies in [0, 1]: at 0 or n
    correct the rounding of ``centre ∓ half`` (e.g. 5.55e-17 for 0 of 3) is clamped to the estimate.
    """
    if n <= 0:
        return (math.nan, math.nan)
    p = correct / n
    low, high = _wilson_bounds(p, n, z, math.sqrt)
    return (min(p, max(0.0, low)), max(p, min(1.0, high)))


def wilson_intervals(correct: Any, n: Any, z: float = Z95) -> tuple[Any, Any, Any]:
    """Vectorized :func:`wilson_interval`: arrays (accuracy, low, high); NaN where n = 0; low <= accuracy <= high."""
    import numpy as np

    n = np.asarray(n, dtype=float)
    k = np.asarray(correct, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        low, high = _wilson_bounds(p, n, z, np.sqrt)
    low = np.minimum(p, np.clip(low, 0.0, 1.0))
    high = np.maximum(p, np.clip(high, 0.0, 1.0))
    return p, low, high


def binomial_stderr(p: float, n: int) -> float:
    """The standard error of a mean of n 0/1 values with mean p (sample standard deviation, as lm-eval's
    ``mean_stderr``); nan for n <= 1 or p nan."""
    return math.sqrt(p * (1 - p) / (n - 1)) if n > 1 and p == p else math.nan


def stderr_of_mean(std: Any, n: Any) -> Any:
    """Vectorized standard error of a mean, ``std / sqrt(n)`` (std: the sample standard deviation); NaN where n = 0."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(std, dtype=float) / np.sqrt(n)


# --------------------------------------------------------------------------- two proportions
def _log_hypergeom(x: int, total: int, successes: int, draws: int) -> float:
    def lchoose(n: int, k: int) -> float:
        return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)

    return lchoose(successes, x) + lchoose(total - successes, draws - x) - lchoose(total, draws)


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test for k1/n1 vs k2/n2: the probability, under equal
    proportions and fixed margins, of a table no more likely than the observed one (the relative
    tolerance 1e-7 of R's ``fisher.test`` decides ties)."""
    if not (0 <= k1 <= n1 and 0 <= k2 <= n2) or n1 == 0 or n2 == 0:
        raise ValueError(f"need 0 <= k <= n and n > 0, got {k1}/{n1} and {k2}/{n2}")
    total, successes = n1 + n2, k1 + k2
    lo, hi = max(0, successes - n2), min(successes, n1)
    observed = _log_hypergeom(k1, total, successes, n1)
    p = 0.0
    for x in range(lo, hi + 1):
        lp = _log_hypergeom(x, total, successes, n1)
        if lp <= observed + 1e-7:
            p += math.exp(lp)
    return min(1.0, p)


def newcombe_interval(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """Newcombe's hybrid score 95 % interval of ``k1/n1 - k2/n2`` from the two Wilson intervals (n1, n2 > 0)."""
    pa, pb = k1 / n1, k2 / n2
    (la, ua), (lb, ub) = wilson_interval(k1, n1), wilson_interval(k2, n2)
    d = pa - pb
    return (d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2), d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (b: only A right, c: only B right)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


# --------------------------------------------------------------------------- several samples per question
def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of Chen et al. (2021): 1 - C(n-c, k) / C(n, k), from n samples of which c are correct.

    The probability that at least one of k samples drawn without replacement from the n is correct; computed as
    a product, stable for any n.  Needs n >= k.
    """
    if k > n or k < 1:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_over_k_subsets(correct: Sequence[bool], k: int, score: Callable[[Sequence[int]], bool], *,
                        resamples: int = 200, rng: Any = None) -> float:
    """maj@k's estimator: the mean of ``score(indices)`` over random k-subsets of the n = len(correct) samples.

    ``score`` says whether what the samples at those indices (in that order) agree on is right, e.g. whether their
    majority vote is correct.  Exact for k = 1 (the mean of ``correct``) and k = n (``score(range(n))``, one
    subset); else ``resamples`` subsets drawn without replacement (``rng``, default ``default_rng(0)``).
    """
    import numpy as np

    n = len(correct)
    if k > n or k < 1:
        raise ValueError(f"maj@k needs 1 <= k <= n, got k={k}, n={n}")
    if k == 1:
        return float(np.mean(correct)) if n else math.nan
    if k == n:
        return float(score(range(n)))
    rng = rng if rng is not None else np.random.default_rng(0)
    hits = 0
    for _ in range(resamples):
        hits += score(rng.permutation(n)[:k])
    return hits / resamples


def bootstrap_interval(per_question: Any, *, iters: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over questions (the questions are resampled with replacement)."""
    import numpy as np

    q = np.asarray(per_question, dtype=float)
    if q.size == 0:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = q[rng.integers(0, q.size, size=(iters, q.size))].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    mean = float(q.mean())
    return (min(mean, float(low)), max(mean, float(high)))
