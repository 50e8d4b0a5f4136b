"""The bootstrap's ablations: arm differences over training runs, the norat + verified arm, and where the hints went.

Issue 41 showed that one training run per arm cannot carry an arm comparison at the frontier (the same kept data
gave 85 or 161 of 200 five-digit sums by training seed alone).  So each (base seed, arm) is run again for its first
iterations with other training seeds (``star run --train-seed T``: the same base, problems, prompts and generation
seeds; only the Trainer's data order and dropout change), and arms are compared over those runs as well as over
problems.  Inputs:

* the original runs' ``metrics.json`` (the committed ``docs/star-results/bootstrap_v2/seed_<s>_<arm>_metrics.json``,
  or a run folder's), whose training seed is the base seed;
* the ablation root ``ROOT/seed_<s>/<arm>@train_<t>/metrics.json`` (``experiments/star_bootstrap.py --train-seeds``)
  and ``ROOT/seed_<s>/<arm>/metrics.json`` for arms run in full there (``norat_verified``).

:func:`report` gives, per (seed, arm, iteration, digit count), the test counts of every training run, their mean and
a 95 % t-interval over runs; per pair of arms a Welch t-test over runs; and per (seed, arm, iteration) the hinted
(rationalized, answer-correct) training records per digit count.  :func:`markdown` renders it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ...io import read_json
from .accuracy import digits_of

#: The arms whose training runs are compared, and the pairs compared over runs.
ARMS = ("star", "verified", "norat", "norat_verified")
PAIRS = (("norat_verified", "norat"), ("star", "norat"), ("verified", "star"), ("norat_verified", "verified"))


def _iteration(metrics: dict[str, Any], n: int) -> dict[str, Any] | None:
    return next((m for m in metrics["iterations"] if m["iteration"] == n), None)


def run_test_counts(metrics: dict[str, Any], n: int) -> dict[int, tuple[int, int]]:
    """``{digit count: (right, n)}`` of iteration n's test set (empty when the run has not reached it)."""
    m = _iteration(metrics, n)
    if m is None or "test_correct_by_group" not in m:
        return {}
    return {digits_of(g): (int(c), int(t)) for g, (c, t) in m["test_correct_by_group"].items()}


def hinted_by_digits(metrics: dict[str, Any], n: int) -> dict[int, int]:
    """Iteration n's answer-correct rationalized (hinted) training records per digit count."""
    m = _iteration(metrics, n)
    if m is None:
        return {}
    return {digits_of(g): int(v.get("rationalized_correct", 0)) for g, v in (m.get("train_by_group") or {}).items()}


def mean_interval(values: list[float]) -> dict[str, Any]:
    """Mean, min, max and the 95 % t-interval of the mean over runs (None with fewer than 2 runs)."""
    from scipy import stats

    k = len(values)
    mean = sum(values) / k
    if k < 2:
        return {"runs": k, "mean": mean, "min": mean, "max": mean, "ci95": None}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (k - 1))
    half = float(stats.t.ppf(0.975, k - 1)) * sd / math.sqrt(k)
    return {"runs": k, "mean": mean, "min": min(values), "max": max(values), "ci95": [mean - half, mean + half]}


def welch(a: list[float], b: list[float]) -> float | None:
    """Two-sided Welch t-test p over runs (None when either side has < 2 runs or both have no spread)."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2 or (len(set(a)) == 1 and len(set(b)) == 1):
        return None if len(a) < 2 or len(b) < 2 else (1.0 if a[0] == b[0] else 0.0)
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def load_runs(originals: Path, root: Path, seeds: list[int], arms: tuple[str, ...] = ARMS) -> dict[int, dict[str, dict[int, Any]]]:
    """``{seed: {arm: {training seed: metrics}}}``: the original run (training seed = the seed) and the reruns."""
    out: dict[int, dict[str, dict[int, Any]]] = {}
    for s in seeds:
        for arm in arms:
            runs: dict[int, Any] = {}
            committed = originals / f"seed_{s}_{arm}_metrics.json"
            full = root / f"seed_{s}" / arm / "metrics.json"
            for path in (committed, full):
                if path.is_file():
                    runs[s] = read_json(path)
                    break
            for rerun in sorted((root / f"seed_{s}").glob(f"{arm}@train_*/metrics.json")):
                runs[int(rerun.parent.name.rsplit("_", 1)[1])] = read_json(rerun)
            if runs:
                out.setdefault(s, {})[arm] = runs
    return out


def report(originals: str | Path, root: str | Path, seeds: list[int], *, iterations: tuple[int, ...] = (1, 2),
           digits: tuple[int, ...] = (5, 6, 7, 8)) -> dict[str, Any]:
    runs = load_runs(Path(originals), Path(root), seeds)
    spread: list[dict[str, Any]] = []
    comparisons: list[dict[str, Any]] = []
    for s, arms in sorted(runs.items()):
        for n in iterations:
            per_arm: dict[str, dict[int, dict[int, int]]] = {}
            for arm, by_train in arms.items():
                counts = {t: run_test_counts(m, n) for t, m in sorted(by_train.items())}
                counts = {t: c for t, c in counts.items() if c}
                for d in digits:
                    cells = {t: c[d][0] for t, c in counts.items() if d in c}
                    if cells:
                        per_arm.setdefault(arm, {})[d] = cells
                        spread.append({"seed": s, "arm": arm, "iteration": n, "digits": d, "of": next(iter(counts.values()))[d][1],
                                       "by_train_seed": cells, **mean_interval([float(v) for v in cells.values()])})
            for a, b in PAIRS:
                for d in digits:
                    va = [float(v) for v in per_arm.get(a, {}).get(d, {}).values()]
                    vb = [float(v) for v in per_arm.get(b, {}).get(d, {}).values()]
                    if va and vb:
                        comparisons.append({"seed": s, "iteration": n, "digits": d, "a": a, "b": b, "a_runs": va, "b_runs": vb,
                                            "difference": sum(va) / len(va) - sum(vb) / len(vb), "welch_p": welch(va, vb)})
    hinted = [{"seed": s, "arm": arm, "iteration": m["iteration"], "by_digits": hinted_by_digits(by_train[s], m["iteration"])}
              for s, arms in sorted(runs.items()) for arm, by_train in arms.items() if s in by_train
              for m in by_train[s]["iterations"] if m["iteration"] > 0 and hinted_by_digits(by_train[s], m["iteration"])]
    return {"seeds": seeds, "iterations": list(iterations), "digits": list(digits), "spread": spread,
            "comparisons": comparisons, "hinted": [h for h in hinted if sum(h["by_digits"].values())]}


def _fmt(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def markdown(rep: dict[str, Any]) -> str:
    lines = ["## Test answers right of 200 per training run (iterations 1-2)", "",
             "Each cell: the runs by training seed (the base seed's original first), their mean and the 95 % t-interval "
             "of the mean over runs.", "",
             "| seed | arm | iteration | digits | runs (train seed: right) | mean [95 % CI] |", "|---|---|---|---|---|---|"]
    for r in rep["spread"]:
        runs = ", ".join(f"{t}: {v}" for t, v in r["by_train_seed"].items())
        ci = f" [{_fmt(r['ci95'][0])}, {_fmt(r['ci95'][1])}]" if r["ci95"] else ""
        lines.append(f"| {r['seed']} | {r['arm']} | {r['iteration']} | {r['digits']} | {runs} | {_fmt(r['mean'])}{ci} |")
    lines += ["", "## Arms compared over training runs (Welch t-test on the runs' counts)", "",
              "| seed | iteration | digits | A | B | A runs | B runs | mean A - B | p |", "|---|---|---|---|---|---|---|---|---|"]
    for c in rep["comparisons"]:
        p = "n/a" if c["welch_p"] is None else f"{c['welch_p']:.3g}"
        lines.append(f"| {c['seed']} | {c['iteration']} | {c['digits']} | {c['a']} | {c['b']} | {c['a_runs']} | {c['b_runs']} | "
                     f"{_fmt(c['difference'])} | {p} |")
    return "\n".join([*lines, "", hint_markdown(rep)])


def hint_markdown(rep: dict[str, Any]) -> str:
    """The hint policy and the hinted records per digit count (also kept in the experiment's report.md)."""
    lines = ["## Hinted records per digit count (the original runs)", "",
              "Rationalization is tried once, greedy, for every training problem no rationale of the model answered "
              "right, with the gold answer written into the prompt (`Target: <answer>`); a hinted rationale whose answer "
              "is right (and, with `--filter verified`, whose scratchpad checks) becomes a training record without the "
              "hint. Arms with `--no-rationalization` have none.", "",
              "| seed | arm | iteration | hinted answer-correct records by digit count |", "|---|---|---|---|"]
    for h in rep["hinted"]:
        cells = ", ".join(f"{d}: {v}" for d, v in sorted(h["by_digits"].items()) if v)
        lines.append(f"| {h['seed']} | {h['arm']} | {h['iteration']} | {cells} |")
    return "\n".join(lines)
