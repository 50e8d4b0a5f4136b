"""The filter of a STaR iteration: D_n ∪ D_n^rat, the training records kept from the rationales M_{n-1} generated
and rationalized, and its report (``iter_n/filter.json``).

A rationale is kept when its answer is right (``filter: answer``, the paper), or also when it passes the task's check
(``filter: verified``).  The task's check runs on every answer-correct rationale whichever filter is on, so each run
records how many kept rationales a verified filter would reject, and pass@k and valid-pass@k of the samples.
``sampling.k > 1``: each correct distinct sample of a problem is a record (up to ``sampling.max_kept``).
"""

from __future__ import annotations

from typing import Any

from .accumulate import rationale_key
from .config import StarConfig
from .metrics import pass_at_k_metrics
from .tasks import Problem, Task, TrainingRecord


def filter_rationales(cfg: StarConfig, task: Task, train: list[Problem], gen: dict[str, Any], rat: dict[str, Any] | None,
                      train_ex: list[Problem]) -> tuple[list[TrainingRecord], dict[str, Any], set[tuple[str, str]]]:
    """The records kept from ``gen`` and ``rat`` (the rows of ``generate.json`` and ``rationalize.json`` for the problems
    ``train``; ``train_ex`` the few-shot exemplars put into them), the filter's report, and the (problem id, kind) of
    each problem with a kept record (kind: generate or rationalize)."""
    records: list[TrainingRecord] = []
    by_id = {p.id: p for p in train}
    rat_rows = {r["id"]: r for r in (rat or {"rows": []})["rows"]}
    report: dict[str, Any] = {"name": cfg.filter, "generate": {"answer_correct": 0, "rejected": 0},
                              "rationalize": {"answer_correct": 0, "rejected": 0}, "examples": []}
    kept: set[tuple[str, str]] = set()
    sampled = cfg.sampling.k > 1
    if sampled:
        report["samples"] = {"k": cfg.sampling.k, "temperature": cfg.sampling.temperature,
                             "max_kept": cfg.sampling.max_kept, "problems": len(gen["rows"]),
                             "drawn": sum(len(row.get("samples") or [row]) for row in gen["rows"]),
                             "answer_correct": 0, "duplicates": 0, "capped": 0, "kept": 0,
                             "problems_with_correct": 0, "problems_with_kept": 0}
    counts: list[tuple[int, int]] = []  # per problem: answer-right samples, of them the check-passing ones
    for row in gen["rows"]:
        p = by_id[row["id"]]
        counts.append((0, 0))
        for kind, r in (("generate", row), ("rationalize", rat_rows.get(row["id"]))):
            if r is None or not r["correct"]:
                continue
            candidates = r.get("samples") or [r]
            seen: set[str] = set()
            for c in candidates:
                if not c["correct"]:
                    continue
                reason = task.verify(p, c["text"], rationalized=kind == "rationalize")
                if kind == "generate":
                    counts[-1] = (counts[-1][0] + 1, counts[-1][1] + (reason is None))
                report[kind]["answer_correct"] += 1
                if reason is not None:
                    report[kind]["rejected"] += 1
                    if len(report["examples"]) < 8:
                        report["examples"].append({"id": p.id, "kind": kind, "reason": reason, "text": c["text"]})
                if reason is not None and cfg.filter != "answer":
                    continue
                key = rationale_key(c["text"])
                if key in seen:  # identical rationales (up to white space) are one record
                    if sampled:
                        report["samples"]["duplicates"] += 1
                    continue
                if cfg.sampling.max_kept is not None and len(seen) >= cfg.sampling.max_kept:
                    report["samples"]["capped"] += 1
                    continue
                seen.add(key)
                records.append(task.training_record(p, c["text"], rationalized=kind == "rationalize", exemplars=train_ex))
                kept.add((p.id, kind))
            if sampled and kind == "generate":
                report["samples"]["answer_correct"] += sum(bool(c["correct"]) for c in candidates)
                report["samples"]["problems_with_correct"] += 1
                report["samples"]["kept"] += len(seen)
                report["samples"]["problems_with_kept"] += bool(seen)
            break  # rationalization only ran on problems answered wrongly
    report["pass_at_k"] = pass_at_k_metrics(cfg.sampling.k, counts)
    return records, report, kept
