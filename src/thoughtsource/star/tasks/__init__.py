"""Registry of STaR tasks: ``TASKS = {name: "module:Class"}``.

Any other name is taken as a registered ThoughtSource dataset or a ThoughtSource file
(``DatasetTask``), so STaR runs on every dataset with multiplechoice, number or bool gold answers.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ... import datasets as registry
from ...errors import ConfigError, UnknownNameError
from .base import Problem, Task, TrainingRecord
from .from_dataset import DatasetTask

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
    return DatasetTask


def task_option_names(cls: type) -> list[str]:
    """The keyword options a task class takes: its __init__'s, and those its **options pass on to the parent's."""
    return sorted(task_option_types(cls))


def task_option_types(cls: type) -> dict[str, Any]:
    """``{option: its type}`` of the keyword options a task class takes (see :func:`task_option_names`): the fields of
    its ``options_type`` (DatasetTask's DatasetOptions; not ``dataset`` where the class names its own), else the
    keywords of its __init__."""
    import dataclasses
    import inspect
    import typing

    options_type = getattr(cls, "options_type", None)
    if options_type is not None:
        hints = typing.get_type_hints(options_type)
        fixed = {"dataset"} & set(getattr(cls, "option_defaults", {}))
        return {f.name: hints[f.name] for f in dataclasses.fields(options_type) if f.init and f.name not in fixed}
    names: dict[str, Any] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = list(inspect.signature(klass.__init__).parameters.values())[1:]  # type: ignore[misc]
        if klass is not cls:
            params = params[1:]  # the parent's first argument is the subclass's own choice (DatasetTask's dataset)
        hints = typing.get_type_hints(klass.__init__)  # type: ignore[misc]
        for p in params:
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
                names.setdefault(p.name, hints.get(p.name, Any))
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names


def check_task_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked against what the task takes: a key it does not take is refused with the closest known ones
    (a typo was a TypeError traceback at the start of the run), and values of the wrong type all at once (a word for
    a number was a TypeError deep in the task); returns the values as the task's types read them."""
    import difflib

    from pydantic import TypeAdapter, ValidationError

    types = task_option_types(task_class(name))
    if name not in TASKS:  # DatasetTask(name, ...): the dataset is the task's name, not an option
        types.pop("dataset", None)
    known = sorted(types)
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=2)
            hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
            raise ConfigError(f"STaR task '{name}': unknown task_options key '{key}'{hint}; it takes: {', '.join(known)}")
    checked, problems = {}, []
    for key, value in options.items():
        try:
            checked[key] = TypeAdapter(types[key]).validate_python(value)
        except ValidationError as e:
            problems += [f"task_options.{key}: {err['msg']} (got {value!r})" for err in e.errors()[:1]]
    if problems:
        raise ConfigError(f"STaR task '{name}': invalid task_options", problems=problems)
    return checked


def get_task(name: str, **options: Any) -> Task:
    if name in TASKS or Path(name).exists():
        options = check_task_options(name, options)
    if name in TASKS:
        return task_class(name)(**options)
    if Path(name).exists():
        return DatasetTask(DatasetTask.options_for(name, **options))
    known = set(getattr(registry, "DATASETS", {}) or {})
    if known and name not in known:
        raise UnknownNameError("STaR task or dataset", name, [*TASKS, *known])
    options = check_task_options(name, options)
    return DatasetTask(DatasetTask.options_for(name, **options))
