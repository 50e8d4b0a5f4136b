"""What a STaR run measures: one iteration's metrics (``iter_n/metrics.json``) and the run's summary
(``OUT/metrics.json``, with its plots)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..statistics import pass_at_k
from . import dist
from .analysis.plots import plot_run
from .artifacts import write
from .config import StarConfig
from .tasks import Problem, Task, TrainingRecord

log = logging.getLogger(__name__)


def accuracy(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


@dataclass(frozen=True, kw_only=True)
class IterationResults:
    """What iteration ``n`` produced, as its steps wrote it (``iter_n/*.json``): what :func:`iteration_metrics` reads.

    Iteration 0 (the base model) has only ``test`` (and ``dev``); the others are for n > 0.
    """

    n: int
    #: M_n's path
    model: str
    #: the test step (``test.json``): its rows ({"group", "correct", ...}) and ``wall_s``
    test: dict[str, Any]
    #: the dev step (``dev.json``), when the task has a dev set
    dev: dict[str, Any] | None = None
    #: the iteration's training problems
    train: Sequence[Problem] = ()
    #: the generate and rationalize steps (``generate.json``, ``rationalize.json``); None where the arm has none
    gen: dict[str, Any] | None = None
    rat: dict[str, Any] | None = None
    #: the training set D_n ∪ D_n^rat (``train.jsonl``)
    records: Sequence[TrainingRecord] | None = None
    #: the train step (``train_stats.json``)
    train_stats: dict[str, Any] | None = None
    #: the filter's report (``filter.json``)
    filter_report: dict[str, Any] | None = None


def iteration_metrics(cfg: StarConfig, task: Task, results: IterationResults) -> dict[str, Any]:
    """Iteration n's metrics: test (and dev) accuracy of M_n, and for n > 0 what its training set was made of."""
    n, train, gen, rat, records, train_stats = results.n, results.train, results.gen, results.rat, results.records, results.train_stats
    m: dict[str, Any] = {"iteration": n, "model": results.model, "seed": cfg.seed, "timings_s": {}}
    for name, res in (("test", results.test), ("dev", results.dev)):
        if res is None:
            continue
        rows = res["rows"]
        groups: dict[str, list[bool]] = {}
        for r in rows:
            if r["group"] is not None:
                groups.setdefault(r["group"], []).append(r["correct"])
        k = sum(r["correct"] for r in rows)
        m.update({
            f"{name}_n": len(rows),
            f"{name}_correct": k,
            f"{name}_accuracy": accuracy(k, len(rows)),
            f"{name}_accuracy_by_group": {g: accuracy(sum(v), len(v)) for g, v in sorted(groups.items())},
            f"{name}_correct_by_group": {g: [sum(v), len(v)] for g, v in sorted(groups.items())},
        })
        m["timings_s"][name] = res["wall_s"]
    if n > 0:
        correct = sum(r["correct"] for r in gen["rows"]) if gen else None
        rat_ok = sum(r["correct"] for r in rat["rows"]) if rat else 0
        m.update({
            "train_n": len(train),
            "train_correct_before_rationalization": correct,
            "train_accuracy_before_rationalization": accuracy(correct, len(train)) if correct is not None else None,
            "rationalization_attempted": len(rat["rows"]) if rat else 0,
            "rationalization_correct": rat_ok,
            "rationalization_acceptance": accuracy(rat_ok, len(rat["rows"])) if rat else None,
            "train_accuracy_after_rationalization": accuracy((correct or 0) + rat_ok, len(train)) if correct is not None else None,
            "kept": len(records or []),
            "filter": results.filter_report,
            # the k samples' pass@k and valid-pass@k, and (sampling.accumulate) the union trained on: None where absent
            "pass_at_k": (results.filter_report or {}).get("pass_at_k"),
            "accumulated": (results.filter_report or {}).get("accumulated"),
            "kept_rationalized": sum(r.rationalized for r in records or []),
            "steps": (train_stats or {}).get("steps"),
            "train_loss": (train_stats or {}).get("train_loss"),
        })
        m["timings_s"].update({"generate": gen["wall_s"] if gen else 0.0, "rationalize": rat["wall_s"] if rat else 0.0,
                               "train": (train_stats or {}).get("wall_s", 0.0)})
        m["generation_tokens_per_s"] = gen["stats"]["tokens_per_s"] if gen else None
        m["train_target"] = "pseudo_label" if train and "gold_answer" in train[0].meta else "gold"
        if m["train_target"] == "pseudo_label" and gen:
            # the train_* accuracies above are against the pseudo-labels (what the filter kept); these against gold
            gold_gen = sum(bool(r.get("correct_vs_gold")) for r in gen["rows"])
            gold_rat = sum(bool(r.get("correct_vs_gold")) for r in (rat or {"rows": []})["rows"])
            m.update({"train_correct_vs_gold_before_rationalization": gold_gen,
                      "train_accuracy_vs_gold_before_rationalization": accuracy(gold_gen, len(train)),
                      "rationalization_correct_vs_gold": gold_rat})
        if gen and task.groups(train[0]) is not None:
            by_g: dict[str, list[int]] = {}
            gmap = {p.id: cast(str, task.groups(p)) for p in train}  # a task groups all its problems or none
            rmap = {r["id"]: r["correct"] for r in (rat or {"rows": []})["rows"]}
            for r in gen["rows"]:
                v = by_g.setdefault(gmap[r["id"]], [0, 0, 0])
                v[0] += 1
                v[1] += r["correct"]
                v[2] += bool(rmap.get(r["id"]))
            m["train_by_group"] = {g: {"n": v[0], "correct": v[1], "rationalized_correct": v[2]} for g, v in sorted(by_g.items())}
    return m


def pass_at_k_metrics(k: int, counts: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """pass@k and valid-pass@k over the training problems, from each problem's k samples (the generate step, no hint).

    ``counts``: per problem, (samples whose answer is right, of those the ones that also pass the task's rationale
    check, :meth:`~.tasks.Task.verify`).  pass@k: the share of problems with a right sample; valid-pass@k: with a
    right one that passes the check (whichever filter the run keeps rationales with).  pass@1 and valid-pass@1: the
    unbiased estimates of Chen et al. (2021) from the same k samples (:func:`~thoughtsource.statistics.pass_at_k`).
    """
    n = len(counts)

    def mean(j: int, kk: int) -> float | None:
        return round(sum(pass_at_k(k, c[j], kk) for c in counts) / n, 4) if n else None

    return {"k": k, "problems": n, "solved": sum(c > 0 for c, _ in counts), "validly_solved": sum(v > 0 for _, v in counts),
            "pass_at_k": mean(0, k), "valid_pass_at_k": mean(1, k), "pass_at_1": mean(0, 1), "valid_pass_at_1": mean(1, 1)}


def pseudo_label_metrics(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How many training questions got a majority label, and how often it is the gold answer (``pseudo_labels.json``)."""
    return {"labelled": sum(r["label"] is not None for r in rows), "n": len(rows),
            "label_accuracy": accuracy(sum(bool(r["label_correct"]) for r in rows), len(rows))}


def write_summary(cfg: StarConfig, out: Path, all_metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """``OUT/metrics.json`` (the config and every iteration's metrics so far) and, on rank 0, the run's plots."""
    summary = {"config": cfg.model_dump(mode="json"), "iterations": all_metrics}
    write(out / "metrics.json", summary)
    if not dist.is_main():
        return summary
    try:
        plot_run(summary, out)
    except Exception as e:  # plotting never breaks a run
        log.warning("plots not written: %s", e)
    return summary
