"""Honest statistics of STaR runs: every accuracy with its Wilson 95 % interval, two-proportion tests,
the best iteration chosen on the dev split and reported on test.

Test: **two-sided Fisher's exact test** on the 2×2 table (correct, wrong) × (arm A, arm B), computed
in :mod:`thoughtsource.statistics` from the hypergeometric distribution (no SciPy needed; the tests check it against
``scipy.stats.fisher_exact``).  Exact, so it stays valid for the small counts STaR runs on CPU
produce (0/20 vs 5/20), where a z-test's normal approximation is poor.  The difference of two
accuracies gets Newcombe's hybrid score interval (method 10 of Newcombe 1998), built from the two
Wilson intervals.  Both treat the two accuracies as independent samples; two iterations of one run
are scored on the same test problems, for which the unpaired test is, if anything, conservative.

A run is its ``metrics.json`` summary ``{"config": ..., "iterations": [...]}``; keys added later
(``test_correct_by_group``, ``dev_*``) may be absent in old runs and are then derived or left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ...statistics import fisher_exact, newcombe_interval, wilson_interval

ALPHA = 0.05
TEST_NAME = "Fisher's exact test, two-sided"
Split = Literal["test", "dev"]


# --------------------------------------------------------------------------- one proportion
@dataclass(frozen=True)
class Proportion:
    """``correct`` of ``n`` with its Wilson 95 % interval."""

    correct: int
    n: int

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.correct, self.n)

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.interval
        acc = self.accuracy
        return {"correct": self.correct, "n": self.n, "accuracy": None if acc is None else round(acc, 4),
                "ci95": None if acc is None else [round(lo, 4), round(hi, 4)]}

    def fmt(self, *, counts: bool = True) -> str:
        """``3/24 = 0.125 [0.043, 0.310]`` (a proportion, as every table of the toolkit shows accuracy; Wilson 95 %)."""
        if not self.n:
            return "—"
        lo, hi = self.interval
        head = f"{self.correct}/{self.n} = " if counts else ""
        return f"{head}{self.correct / self.n:.3f} [{lo:.3f}, {hi:.3f}]"


# --------------------------------------------------------------------------- two proportions
def difference_interval(a: Proportion, b: Proportion) -> tuple[float, float]:
    """Newcombe's hybrid score 95 % interval of ``acc(a) - acc(b)`` from the two Wilson intervals."""
    return newcombe_interval(a.correct, a.n, b.correct, b.n)


@dataclass(frozen=True)
class Comparison:
    """``a`` against ``b``: difference of accuracies with its interval, Fisher's exact p-value."""

    a: Proportion
    b: Proportion

    @property
    def difference(self) -> float:
        return self.a.correct / self.a.n - self.b.correct / self.b.n

    @property
    def interval(self) -> tuple[float, float]:
        return difference_interval(self.a, self.b)

    @property
    def p_value(self) -> float:
        return fisher_exact(self.a.correct, self.a.n, self.b.correct, self.b.n)

    def significant(self, alpha: float = ALPHA) -> bool:
        return self.p_value < alpha

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {"a": self.a.to_dict(), "b": self.b.to_dict(), "difference": round(self.difference, 4),
                "difference_ci95": [round(lo, 4), round(hi, 4)], "p_value": float(f"{self.p_value:.6g}"),
                "test": TEST_NAME, "significant_at_0.05": self.significant()}

    def fmt(self) -> str:
        """``+0.083 [-0.051, +0.210], p = 0.42`` (a difference of proportions)."""
        lo, hi = self.interval
        return f"{self.difference:+.3f} [{lo:+.3f}, {hi:+.3f}], p = {fmt_p(self.p_value)}"


def compare(a: Proportion | None, b: Proportion | None) -> Comparison | None:
    """The comparison of two proportions, or None when either is missing or empty."""
    if a is None or b is None or not a.n or not b.n:
        return None
    return Comparison(a, b)


def fmt_p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


# --------------------------------------------------------------------------- one run's metrics
def proportion(m: dict[str, Any], split: Split = "test", group: str | None = None,
               config: dict[str, Any] | None = None) -> Proportion | None:
    """The accuracy of one iteration's metrics on ``split`` (overall, or of one ``group``)."""
    if group is not None:
        return group_proportions(m, split, config).get(group)
    n, k = m.get(f"{split}_n"), m.get(f"{split}_correct")
    if n is None or k is None:
        return None
    return Proportion(int(k), int(n))


def group_proportions(m: dict[str, Any], split: Split = "test", config: dict[str, Any] | None = None) -> dict[str, Proportion]:
    """Per-group counts: ``{split}_correct_by_group`` ({g: [correct, n]}) when written; for old runs
    that stored only accuracies, counts are derived for arithmetic from ``n_test_per_digit`` of the
    config when that reproduces the stored accuracy exactly, otherwise the group is left out."""
    counts = m.get(f"{split}_correct_by_group")
    if counts:
        return {g: Proportion(int(k), int(n)) for g, (k, n) in counts.items()}
    accs = m.get(f"{split}_accuracy_by_group") or {}
    per = ((config or {}).get("task_options") or {}).get(f"n_{split}_per_digit")
    if not accs or not per or (config or {}).get("task") != "arithmetic":
        return {}
    out = {}
    for g, acc in accs.items():
        if acc is None:
            continue
        k = round(acc * per)
        if round(k / per, 4) == round(acc, 4):
            out[g] = Proportion(k, int(per))
    return out


def groups(summary: dict[str, Any], split: Split = "test") -> list[str]:
    """The groups of a run, in natural order (1-digit, 2-digit, ..., 10-digit)."""
    seen = {g for m in summary["iterations"] for g in group_proportions(m, split, summary.get("config"))}
    return sorted(seen, key=group_key)


def digits_of(group: str) -> int:
    """The digit count of an arithmetic group name (``"7-digit"`` -> 7)."""
    return int(group.split("-", 1)[0])


def group_key(g: str) -> tuple[int, str]:
    head = g.split("-", 1)[0]
    return (int(head), g) if head.isdigit() else (10**9, g)


#: a base has learnt its range when it gets at least this share of dev problems right at every digit count <= k
LEARNT_SHARE = 0.9


def learnt_range(dev_correct_by_group: Mapping[str, list[int] | tuple[int, int]], k: int, *, share: float = LEARNT_SHARE,
                 lo: int = 1) -> bool:
    """Whether the base learnt what it was taught: dev accuracy >= ``share`` at every digit count lo..k
    with enough problems to tell (n >= 10; the one-digit dev set can be smaller)."""
    cells = [(c, n) for g, (c, n) in dev_correct_by_group.items() if lo <= digits_of(g) <= k and n >= 10]
    return bool(cells) and all(c >= share * n for c, n in cells)


@dataclass(frozen=True)
class Best:
    """The best iteration: highest dev accuracy (ties: earliest), reported with its test accuracy."""

    iteration: int
    chosen_on: Split
    test: Proportion | None
    dev: Proportion | None

    @property
    def note(self) -> str:
        if self.chosen_on == "dev":
            return f"iteration {self.iteration}: highest dev accuracy (ties: earliest); test accuracy reported"
        return (f"iteration {self.iteration}: no dev split, chosen on TEST accuracy (ties: earliest) — "
                "optimistic, not an unbiased estimate")

    def to_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "chosen_on": self.chosen_on,
                "test": self.test.to_dict() if self.test else None, "dev": self.dev.to_dict() if self.dev else None,
                "note": self.note}


def best_iteration(summary: dict[str, Any], group: str | None = None) -> Best | None:
    """The iteration with the highest dev accuracy (ties → earliest), or — when no iteration has a dev
    split — the highest test accuracy, which ``Best.chosen_on == "test"`` and its note say."""
    cfg = summary.get("config")
    splits: tuple[Split, ...] = ("dev", "test")
    for split in splits:
        scored = []
        for m in summary["iterations"]:
            p = proportion(m, split, group, cfg)
            if p is not None and p.n:
                scored.append((p.correct / p.n, -m["iteration"], m))
        if scored:
            m = max(scored, key=lambda t: (t[0], t[1]))[2]
            return Best(m["iteration"], split, proportion(m, "test", group, cfg), proportion(m, "dev", group, cfg))
    return None


def at_iteration(summary: dict[str, Any], n: int | None) -> dict[str, Any] | None:
    return next((m for m in summary["iterations"] if m["iteration"] == n), None)


def claim_points(summary: dict[str, Any], group: str | None = None) -> dict[str, dict[str, Any] | None]:
    """The iterations a report makes claims about: ``first`` (0, the few-shot model), ``final`` and ``best`` (on dev)."""
    its = summary["iterations"]
    best = best_iteration(summary, group)
    return {"first": min(its, key=lambda m: m["iteration"]), "final": max(its, key=lambda m: m["iteration"]),
            "best": at_iteration(summary, best.iteration) if best else None}


def proportion_at(summary: dict[str, Any], m: dict[str, Any] | None, group: str | None = None) -> Proportion | None:
    """The test accuracy of iteration metrics ``m`` of ``summary`` (None for no iteration)."""
    return proportion(m, "test", group, summary.get("config")) if m is not None else None


def iteration_stats(m: dict[str, Any], config: dict[str, Any] | None = None, group: str | None = None) -> dict[str, Any]:
    """One iteration's accuracies with intervals (test, dev; per group unless ``group`` picks one), JSON-ready."""
    out: dict[str, Any] = {"iteration": m["iteration"]}
    splits: tuple[Split, ...] = ("test", "dev")
    for split in splits:
        p = proportion(m, split, group, config)
        if p is not None:
            out[split] = p.to_dict()
        by_g = group_proportions(m, split, config) if group is None else {}
        if by_g:
            out[f"{split}_by_group"] = {g: by_g[g].to_dict() for g in sorted(by_g, key=group_key)}
    return out


def run_stats(summary: dict[str, Any], group: str | None = None) -> dict[str, Any]:
    """One run's statistics (``star run --json``, one arm of ``star compare --json``): per-iteration
    accuracies with intervals, the best iteration (on dev, reported on test) and the final and best
    iteration each against iteration 0 (the few-shot model); an iteration is not compared with itself."""
    cfg = summary.get("config")
    pts = claim_points(summary, group)
    best = best_iteration(summary, group)
    vs0: dict[str, Any] = {}
    for which in ("final", "best"):
        m = pts[which]
        if m is None or m is pts["first"]:
            continue
        c = compare(proportion_at(summary, m, group), proportion_at(summary, pts["first"], group))
        if c is not None:
            vs0[which] = {"iteration": m["iteration"], **c.to_dict()}
    final = max(m["iteration"] for m in summary["iterations"])
    out = {"iterations": [iteration_stats(m, cfg, group) for m in sorted(summary["iterations"], key=lambda m: m["iteration"])],
           "best": best.to_dict() if best else None, "final_iteration": final, "vs_iteration_0": vs0}
    if "seeds" in summary:
        out["seeds"] = summary["seeds"]
    return out
