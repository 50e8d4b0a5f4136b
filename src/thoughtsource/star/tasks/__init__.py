"""Registry of STaR tasks: ``TASKS = {name: "module:Class"}``, imported only when chosen.

Any other name is taken as a registered ThoughtSource dataset or a ThoughtSource file
(``DatasetTask``), so STaR runs on every dataset with multiplechoice, number or bool gold answers.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from .base import Problem, Task, TrainingRecord

TASKS: dict[str, str] = {
    "arithmetic": "thoughtsource.star.tasks.arithmetic:ArithmeticTask",
    "gsm8k": "thoughtsource.star.tasks.from_dataset:Gsm8kTask",
    "commonsense_qa": "thoughtsource.star.tasks.from_dataset:CommonsenseQaTask",
}

__all__ = ["TASKS", "Problem", "Task", "TrainingRecord", "get_task", "task_class"]


def task_class(name: str) -> type[Task]:
    """The class of task ``name`` (a dataset or file not in :data:`TASKS`: DatasetTask), without making the task."""
    if name in TASKS:
        module, _, cls = TASKS[name].partition(":")
        return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]
    from .from_dataset import DatasetTask

    return DatasetTask


def get_task(name: str, **options: Any) -> Task:
    if name in TASKS:
        return task_class(name)(**options)
    from .from_dataset import DatasetTask

    if Path(name).exists():
        return DatasetTask(name, **options)
    from ... import datasets as registry
    from ...errors import UnknownNameError

    known = set(getattr(registry, "DATASETS", {}) or {})
    if known and name not in known:
        raise UnknownNameError("STaR task or dataset", name, [*TASKS, *known])
    return DatasetTask(name, **options)
