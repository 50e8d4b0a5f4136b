"""``python -m thoughtsource ARGS`` run in the test's own process: the CLI tests' fast path.

``run_cli`` calls the real entry point (``thoughtsource.cli.main``: errors become one line and an exit code, usage
errors exit 2, Ctrl-C 130) with stdin, stdout and stderr swapped for buffers (typer's ``CliRunner`` isolation), and
returns what ``subprocess.run(..., capture_output=True, text=True)`` returns, so a test reads ``returncode``,
``stdout`` and ``stderr`` either way.  It starts each run as a new process would (the console not quiet, no
``--debug``, logging not yet set up) and puts the test process's logging back afterwards.

Tests where the process itself is the point keep a real subprocess: a kill or a signal, the console script, a
server that must keep running, start-up time, a memory cap (``setrlimit``), ``accelerate launch``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path


@contextlib.contextmanager
def fresh_process_state(argv: list[str]) -> Iterator[None]:
    """What a new ``python -m thoughtsource`` starts with, and the test process's own state back afterwards (logging,
    the console's quiet flag, ``--debug``, ``sys.argv``, the environment, torch's CPU threads)."""
    from thoughtsource import cli, console

    root, package = logging.getLogger(), logging.getLogger("thoughtsource")
    saved = (root.handlers[:], root.level, package.level, dict(console._quiet), dict(cli._state), sys.argv, dict(os.environ))
    console._quiet["on"] = False
    cli._state["debug"] = False
    sys.argv = [str(Path(cli.__file__).parents[1] / "__main__.py"), *argv]  # as `python -m thoughtsource ARGS` has it
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        yield
    finally:
        if threads is not None and torch.get_num_threads() != threads:  # --threads N sets torch's, process-wide
            torch.set_num_threads(threads)
        root.handlers[:], root.level = saved[0], saved[1]
        package.setLevel(saved[2])
        console._quiet.update(saved[3])
        cli._state.update(saved[4])
        sys.argv = saved[5]
        if dict(os.environ) != saved[6]:  # a command that sets a variable (star's TENSORBOARD_LOGGING_DIR) for its run
            os.environ.clear()
            os.environ.update(saved[6])


@contextlib.contextmanager
def _chdir(path: str | Path) -> Iterator[None]:
    """``contextlib.chdir`` (Python 3.11) for Python 3.10 as well."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def run_cli(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    cwd: str | Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """The command ``thoughtsource ARGS`` in this process.  ``env``, as for ``subprocess.run``, is the whole
    environment of the run (variables it lacks are unset for the run); ``input`` is stdin (empty by default);
    ``cwd`` the working folder for the run."""
    from typer.testing import CliRunner

    from thoughtsource.cli import main

    argv = [str(a) for a in args]
    overrides: dict[str, str | None] = {}
    if env is not None:
        overrides = {k: None for k in os.environ if k not in env}
        overrides.update(env)
    code = 0
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(_chdir(cwd))
        stack.enter_context(fresh_process_state(argv))
        out, err, _ = stack.enter_context(CliRunner().isolation(input=input, env=overrides))
        try:
            main(argv)
        except SystemExit as e:  # what the interpreter does with it at the end of a process
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except Exception:  # an uncaught error: its traceback on stderr, exit 1, as in a process of its own
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = (s.getvalue().decode("utf-8", errors="replace") for s in (out, err))
    return subprocess.CompletedProcess(["thoughtsource", *argv], code, stdout, stderr)
