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

__all__ = ["TASKS", "Problem", "Task", "TrainingRecord", "check_task_options", "get_task", "task_class"]


def task_class(name: str) -> type[Task]:
    """The class of task ``name`` (a dataset or file not in :data:`TASKS`: DatasetTask), without making the task."""
    if name in TASKS:
        module, _, cls = TASKS[name].partition(":")
        return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]
    from .from_dataset import DatasetTask

    return DatasetTask


def task_option_names(cls: type) -> list[str]:
    """The keyword options a task class takes: its __init__'s, and those its **options pass on to the parent's."""
    import inspect

    names: list[str] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = list(inspect.signature(klass.__init__).parameters.values())[1:]  # type: ignore[misc]
        if klass is not cls:
            params = params[1:]  # the parent's first argument is the subclass's own choice (DatasetTask's dataset)
        names += [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return sorted(set(names))


def check_task_options(name: str, options: dict[str, Any]) -> None:
    """Refuse a ``task_options`` key the task does not take, with the closest known ones (a typo was a TypeError
    traceback at the start of the run)."""
    import difflib

    from ...errors import ConfigError

    cls = task_class(name)
    known = task_option_names(cls)
    if name not in TASKS:  # DatasetTask(name, ...): the dataset is the task's name, not an option
        known = [k for k in known if k != "dataset"]
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=2)
            hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
            raise ConfigError(f"STaR task '{name}': unknown task_options key '{key}'{hint}; it takes: {', '.join(known)}")


def get_task(name: str, **options: Any) -> Task:
    if name in TASKS or Path(name).exists():
        check_task_options(name, options)
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
    check_task_options(name, options)
    return DatasetTask(name, **options)
