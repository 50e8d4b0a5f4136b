"""The two rich Consoles, logging set-up and the one progress-bar helper.

Results (tables, JSON, summaries a script reads) go to ``stdout``; logs, progress bars and
messages about what was written go to ``console`` (stderr), so ``thoughtsource info F > x`` and
``thoughtsource evaluate F --json | jq`` get only the results.
"""

from __future__ import annotations

import logging
import os
import time
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

from .io import json_safe

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


#: Seconds between two progress log lines when stderr is not a terminal ($THOUGHTSOURCE_PROGRESS_INTERVAL).
PROGRESS_LOG_INTERVAL_S = 10.0


def progress_log_interval() -> float | None:
    """Where a bar cannot be drawn (stderr is a pipe or a file: ``2> log``, nohup, CI), long work logs a progress line
    every this many seconds instead; None: no lines (a terminal draws the bar; ``-q``; pytest in process)."""
    if _quiet["on"] or console.is_terminal or "PYTEST_CURRENT_TEST" in os.environ:
        return None
    try:
        return max(0.0, float(os.environ.get("THOUGHTSOURCE_PROGRESS_INTERVAL", PROGRESS_LOG_INTERVAL_S)))
    except ValueError:
        return PROGRESS_LOG_INTERVAL_S


def note(*objects: Any, **kwargs: Any) -> None:
    """A message for the user on stderr ("wrote 3 files to out/"); hidden by ``-q``, like INFO logs."""
    if not _quiet["on"]:
        kwargs.setdefault("soft_wrap", True)  # a path is never broken over two lines
        console.print(*objects, **kwargs)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (NaN as null, so any JSON parser reads it)."""
    import json

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
    bar = _RateProgress(*columns, console=console, disable=not progress_enabled(enabled), transient=transient)
    bar.log_interval = progress_log_interval() if enabled and bar.disable else None
    bar.extra_fields = extra_fields
    return bar


def _duration(seconds: float) -> str:
    whole = round(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class _RateProgress(Progress):
    """Progress that keeps a human-readable ``rate`` field up to date; without a terminal (``log_interval`` set) it
    logs a line ("generate: 40/100 (40%), 3.1/s, elapsed 0:13, ETA 0:19") at most every ``log_interval`` seconds."""

    log_interval: float | None = None
    extra_fields: tuple[str, ...] = ()

    def add_task(self, description: str, *args: Any, **fields: Any) -> Any:
        fields.setdefault("rate", "")
        task_id = super().add_task(description, *args, **fields)
        if self.log_interval is not None:
            self._logged = getattr(self, "_logged", {})
            self._logged[task_id] = (time.monotonic(), -1.0)
        return task_id

    def advance(self, task_id: Any, advance: float = 1) -> None:
        super().advance(task_id, advance)
        if self.log_interval is not None:
            self._log_line(task_id)
        if self.disable:  # task.speed scans the recent samples: not worth it per request when nothing is drawn
            return
        task = self._tasks[task_id]
        speed = task.speed
        task.fields["rate"] = f"{speed:.1f}/s" if speed else ""

    def update(self, task_id: Any, *args: Any, **kwargs: Any) -> None:
        super().update(task_id, *args, **kwargs)
        if self.log_interval is not None and ("completed" in kwargs or "advance" in kwargs):
            self._log_line(task_id)

    def stop(self) -> None:
        super().stop()
        if self.log_interval is not None:  # the last state of a task that was logged before but not at its end
            for task_id, (_, completed) in list(getattr(self, "_logged", {}).items()):
                if completed >= 0 and self._tasks[task_id].completed != completed:
                    self._log_line(task_id, force=True)

    def _log_line(self, task_id: Any, force: bool = False) -> None:
        now = time.monotonic()
        last, last_completed = self._logged.get(task_id, (now, -1.0))
        task = self._tasks[task_id]
        finished = task.total is not None and task.completed >= task.total
        if not force and now - last < self.log_interval and not (finished and last_completed >= 0):  # type: ignore[operator]
            return
        if task.completed == last_completed:
            return
        self._logged[task_id] = (now, task.completed)
        elapsed = task.elapsed or 0.0
        parts = [f"{task.description}: {task.completed:g}" + (f"/{task.total:g}" if task.total is not None else "")]
        if task.total:
            parts[0] += f" ({100 * task.completed / task.total:.0f}%)"
        if elapsed > 0 and task.completed:
            rate = task.completed / elapsed
            parts.append(f"{rate:.1f}/s")
        parts.append(f"elapsed {_duration(elapsed)}")
        if task.total is not None and elapsed > 0 and task.completed and not finished:
            parts.append(f"ETA {_duration((task.total - task.completed) * elapsed / task.completed)}")
        parts.extend(f"{name} {task.fields[name]}" for name in self.extra_fields if str(task.fields.get(name, "")) != "")
        logging.getLogger("thoughtsource.progress").info(", ".join(parts))
