"""An iteration's metrics from its steps' results (star/metrics.py), on a real task's problems."""

from __future__ import annotations

import dataclasses

import pytest

from thoughtsource.star.config import StarConfig
from thoughtsource.star.metrics import IterationResults, iteration_metrics
from thoughtsource.star.tasks import TrainingRecord
from thoughtsource.star.tasks.arithmetic import ArithmeticTask

TASK = ArithmeticTask(1, 2, n_train=4, n_test_per_digit=2, n_dev_per_digit=1)
CFG = StarConfig(task="arithmetic", seed=5)


def _step(problems: list, correct: list[bool], wall_s: float = 1.5) -> dict:
    """A generation or evaluation step's result as the loop writes it."""
    return {"rows": [{"id": p.id, "group": TASK.groups(p), "correct": c} for p, c in zip(problems, correct, strict=True)],
            "wall_s": wall_s, "stats": {"tokens_per_s": 12.0}}


def test_iteration_zero_is_the_base_models_evaluation() -> None:
    test, dev = TASK.load("test", 5), TASK.load("dev", 5)
    m = iteration_metrics(CFG, TASK, IterationResults(n=0, model="base", test=_step(test, [True, False, True, True]),
                                                      dev=_step(dev, [False, True], wall_s=0.5)))
    assert m["iteration"] == 0 and m["model"] == "base" and m["seed"] == 5
    assert (m["test_n"], m["test_correct"], m["test_accuracy"]) == (4, 3, 0.75)
    assert m["test_correct_by_group"] == {"1-digit": [1, 2], "2-digit": [2, 2]}
    assert (m["dev_n"], m["dev_correct"]) == (2, 1)
    assert m["timings_s"] == {"test": 1.5, "dev": 0.5}
    assert "train_n" not in m


def test_a_training_iteration_counts_what_its_training_set_was_made_of() -> None:
    train, test = TASK.load("train", 5), TASK.load("test", 5)
    gen = _step(train, [True, False, False, True], wall_s=2.0)
    wrong = [train[1], train[2]]
    rat = _step(wrong, [True, False], wall_s=1.0)
    records = [TrainingRecord(train[0].id, "p", "c"), TrainingRecord(train[3].id, "p", "c"),
               TrainingRecord(train[1].id, "p", "c", rationalized=True)]
    results = IterationResults(n=1, model="iter_1", test=_step(test, [True] * 4), train=train, gen=gen, rat=rat,
                               records=records, train_stats={"steps": 8, "train_loss": 0.25, "wall_s": 3.0},
                               filter_report={"name": "answer"})
    m = iteration_metrics(CFG, TASK, results)
    assert (m["train_n"], m["train_correct_before_rationalization"], m["rationalization_attempted"]) == (4, 2, 2)
    assert (m["rationalization_correct"], m["train_accuracy_after_rationalization"]) == (1, 0.75)
    assert (m["kept"], m["kept_rationalized"], m["steps"], m["train_loss"]) == (3, 1, 8, 0.25)
    assert m["filter"] == {"name": "answer"} and m["train_target"] == "gold"
    assert m["timings_s"] == {"test": 1.5, "generate": 2.0, "rationalize": 1.0, "train": 3.0}
    by_group = m["train_by_group"]
    assert sum(g["n"] for g in by_group.values()) == 4 and sum(g["rationalized_correct"] for g in by_group.values()) == 1


def test_iteration_results_are_keyword_only_and_frozen() -> None:
    with pytest.raises(TypeError):
        IterationResults(0, "base", {"rows": [], "wall_s": 0.0})  # type: ignore[misc]
    r = IterationResults(n=0, model="base", test={"rows": [], "wall_s": 0.0})
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.n = 1  # type: ignore[misc]
    assert (r.train, r.gen, r.rat, r.records, r.train_stats, r.dev, r.filter_report) == ((), None, None, None, None, None, None)
