"""The two rich Consoles, logging set-up and the one progress-bar helper.

Results (tables, JSON, summaries a script reads) go to ``stdout``; logs, progress bars and
messages about what was written go to ``console`` (stderr), so ``thoughtsource info F > x`` and
``thoughtsource evaluate F --json | jq`` get only the results.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from rich.console import Console, ConsoleDimensions
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: The width of results written to a pipe or a file: wide enough that no table is cut or folded.
PIPE_WIDTH = 10_000


class _ResultConsole(Console):
    """Results on stdout: as wide as the terminal on one; to a pipe or a file, tables are neither cut to 80 columns
    nor truncated (``| grep``, ``> table.txt`` get whole rows), unless ``COLUMNS`` says otherwise."""

    @property
    def size(self) -> ConsoleDimensions:
        if not self.is_terminal and not self._environ.get("COLUMNS"):
            return ConsoleDimensions(PIPE_WIDTH, super().size.height)
        return super().size

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = Console(stderr=True)
#: Results: tables and JSON (``print_json``).
stdout = _ResultConsole()

_quiet = {"on": False}


def setup_logging(verbosity: int = 0) -> None:
    """-1 quiet (WARNING), 0 INFO, 1+ DEBUG; one RichHandler on the root logger."""
    from rich.logging import RichHandler

    level = logging.WARNING if verbosity < 0 else logging.DEBUG if verbosity > 0 else logging.INFO
    _quiet["on"] = verbosity < 0
    root = logging.getLogger()
    root.handlers[:] = [RichHandler(console=console, show_path=False, show_time=False, markup=False)]
    root.setLevel(logging.WARNING)
    logging.getLogger("thoughtsource").setLevel(level)


def progress_enabled(requested: bool = True) -> bool:
    """Progress bars only on a terminal, never with ``-q`` and never under pytest."""
    return requested and not _quiet["on"] and console.is_terminal and "PYTEST_CURRENT_TEST" not in os.environ


def note(*objects: Any, **kwargs: Any) -> None:
    """A message for the user on stderr ("wrote 3 files to out/"); hidden by ``-q``, like INFO logs."""
    if not _quiet["on"]:
        kwargs.setdefault("soft_wrap", True)  # a path is never broken over two lines
        console.print(*objects, **kwargs)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (NaN as null, so any JSON parser reads it)."""
    import json

    from .io import json_safe

    stdout.file.write(json.dumps(json_safe(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    stdout.file.flush()


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
        if self.disable:  # task.speed scans the recent samples: not worth it per request when nothing is drawn
            return
        task = self._tasks[task_id]
        speed = task.speed
        task.fields["rate"] = f"{speed:.1f}/s" if speed else ""
