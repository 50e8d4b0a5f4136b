"""Several seeds of one STaR config aggregated: ``OUT/aggregate.json`` and ``OUT/plots/aggregate.png`` from the
seeds' ``OUT/seed_<s>/`` runs (:func:`thoughtsource.star.seeds.run_seeds` runs them).

Aggregation per iteration (only iterations every seed reached): pooled counts (the sum of correct
and of n over seeds) with their Wilson interval, and the per-seed accuracies with their mean,
sample standard deviation, min and max.  The pooled interval treats all scored problems as
independent; when the seeds share one test set (or the seeds' models are correlated) it is too
narrow, and the spread between seeds is the honest measure of run-to-run variation.

``aggregate.json`` has the shape of a run summary (``config`` and ``iterations`` with pooled
``test_n``/``test_correct``/...), so ``star compare`` and ``star report`` read it as one arm.
"""

from __future__ import annotations

import logging
import statistics
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...io import read_json, write_json
from .accuracy import Proportion, best_iteration, group_key, group_proportions, proportion
from .plots import plot_aggregate

log = logging.getLogger(__name__)


def write_aggregate(out: str | Path, summaries: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """``OUT/aggregate.json`` and ``OUT/plots/aggregate.png`` (a failing plot is logged, not raised)."""
    agg = aggregate(summaries)
    write_json(Path(out) / "aggregate.json", agg)
    try:
        plot_aggregate(agg, Path(out) / "plots")
    except Exception as e:  # plotting never breaks a run
        log.warning("aggregate plot not written: %s", e)
    return agg


def load_seed_runs(out: str | Path) -> dict[int, dict[str, Any]]:
    """The ``metrics.json`` of every ``OUT/seed_<s>/`` (seeds in numeric order)."""
    runs = {}
    for d in Path(out).glob("seed_*"):
        tail = d.name.removeprefix("seed_")
        if tail.lstrip("-").isdigit() and (d / "metrics.json").exists():
            runs[int(tail)] = read_json(d / "metrics.json")
    return dict(sorted(runs.items()))


def _spread(values: list[float]) -> dict[str, float | None]:
    return {"mean": round(statistics.fmean(values), 4) if values else None,
            "sd": round(statistics.stdev(values), 4) if len(values) > 1 else None,
            "min": min(values, default=None), "max": max(values, default=None)}


def _pool(props: list[Proportion | None]) -> Proportion | None:
    """The sum of several seeds' counts; None unless every seed has them."""
    present = [p for p in props if p is not None]
    if not props or len(present) < len(props):
        return None
    return Proportion(sum(p.correct for p in present), sum(p.n for p in present))


def aggregate(summaries: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Pooled and per-seed statistics of several seeds' summaries (see the module docstring)."""
    if not summaries:
        raise ConfigError("no seed runs to aggregate")
    seeds = list(summaries)
    by_seed = {s: {m["iteration"]: m for m in summ["iterations"]} for s, summ in summaries.items()}
    common = sorted(set.intersection(*(set(v) for v in by_seed.values())))
    config = dict(summaries[seeds[0]]["config"])
    config.pop("seed", None)
    iterations = []
    for n in common:
        ms = {s: by_seed[s][n] for s in seeds}
        row: dict[str, Any] = {"iteration": n}
        for split in ("test", "dev"):
            props = {s: proportion(m, split) for s, m in ms.items()}
            pooled = _pool(list(props.values()))
            if pooled is None:
                continue
            row[f"{split}_n"], row[f"{split}_correct"] = pooled.n, pooled.correct
            row[f"{split}_accuracy"] = round(pooled.correct / pooled.n, 4) if pooled.n else None
            accs = [p.accuracy for p in props.values() if p is not None and p.accuracy is not None]
            row[f"{split}_accuracy_by_seed"] = {str(s): round(p.accuracy, 4) for s, p in props.items() if p and p.accuracy is not None}
            row[f"{split}_accuracy_seeds"] = _spread(accs)
            g_props = {s: group_proportions(m, split, summaries[s]["config"]) for s, m in ms.items()}
            names = sorted(set.intersection(*(set(v) for v in g_props.values())), key=group_key)
            if names:
                pooled_g = {g: _pool([g_props[s][g] for s in seeds]) for g in names}
                row[f"{split}_correct_by_group"] = {g: [p.correct, p.n] for g, p in pooled_g.items() if p}
                row[f"{split}_accuracy_by_group"] = {g: round(p.correct / p.n, 4) for g, p in pooled_g.items() if p and p.n}
        for key in ("train_n", "kept", "kept_rationalized", "train_correct_before_rationalization"):
            vals = [m[key] for m in ms.values() if m.get(key) is not None]
            if vals and len(vals) == len(ms):
                row[key] = sum(vals)
        iterations.append(row)
    per_seed_best = {}
    for s, summ in summaries.items():
        b = best_iteration(summ)
        if b is not None:
            per_seed_best[str(s)] = b.to_dict()
    agg: dict[str, Any] = {"seeds": seeds, "config": config, "iterations": iterations, "best_by_seed": per_seed_best,
                           "pooling": "sums of correct and n over seeds; Wilson interval assumes independent problems"}
    best = best_iteration(agg)
    agg["best"] = best.to_dict() if best else None
    return agg
