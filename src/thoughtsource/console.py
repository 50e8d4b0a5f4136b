"""The rich Console, logging set-up and the one progress-bar helper."""

from __future__ import annotations

import logging
import os
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)


def setup_logging(verbosity: int = 0) -> None:
    """-1 quiet (WARNING), 0 INFO, 1+ DEBUG; one RichHandler on the root logger."""
    from rich.logging import RichHandler

    level = logging.WARNING if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.INFO
    root = logging.getLogger()
    root.handlers[:] = [RichHandler(console=console, show_path=False, show_time=False, markup=False)]
    root.setLevel(logging.WARNING)
    logging.getLogger("thoughtsource").setLevel(level)


def progress_enabled(requested: bool = True) -> bool:
    """Progress bars only on a terminal and never under pytest."""
    return requested and console.is_terminal and "PYTEST_CURRENT_TEST" not in os.environ


def progress(*extra_fields: str, enabled: bool = True, transient: bool = False) -> Progress:
    """A Progress with done/total, rate, ETA and optional extra ``{task.fields[...]}`` columns.

    Use as ``with progress("retries", "errors") as p: t = p.add_task("generate", total=n, retries=0, errors=0)``.
    """
    columns: list[Any] = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("[cyan]{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    ]
    columns.extend(TextColumn(f"{name}: {{task.fields[{name}]}}") for name in extra_fields)
    return _RateProgress(*columns, console=console, disable=not progress_enabled(enabled), transient=transient)


class _RateProgress(Progress):
    """Progress that keeps a human-readable ``rate`` field up to date."""

    def add_task(self, description: str, *args: Any, **fields: Any) -> Any:
        fields.setdefault("rate", "")
        return super().add_task(description, *args, **fields)

    def advance(self, task_id: Any, advance: float = 1) -> None:
        super().advance(task_id, advance)
        task = self._tasks[task_id]
        speed = task.speed
        task.fields["rate"] = f"{speed:.1f}/s" if speed else ""
