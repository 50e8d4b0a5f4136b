"""The ``thoughtsource`` command line (typer + rich).

One module per command group; each exposes ``register(app)``.  Modules import nothing heavy at
import time, so ``thoughtsource --help`` stays fast.

Conventions (tested in ``tests/cli/test_cli_conventions.py``):

* results (tables, ``--json``) go to stdout; logs, progress bars and "wrote ..." notes to stderr;
* a user error (:class:`ThoughtSourceError`) is one red line on stderr and exit code 1; a usage
  error (unknown option, missing or bad argument) one line and exit code 2; ``--debug`` shows
  tracebacks; a file-system error on a path the user named (it exists as a file where a folder is
  needed, permission denied, disk full) is one line too, exit code 1; anything else is a bug and
  keeps its traceback;
* flags mean one thing everywhere: ``--out`` is what the command writes, a file (its suffix names the format:
  .json, .jsonl, .csv, .png, .md) or the folder that holds what it writes (never a folder named after the input
  inside it); ``--limit`` how many samples (lm-eval's word); ``--n`` CoTs per prompt; ``--json`` the result as JSON
  on stdout; old names (``--n-samples``, ``subset --n``, ``stats --n``) still work, hidden from ``--help``;
* accuracies are proportions (0.820) in every table, file and JSON document;
* Ctrl-C prints "aborted" and exits 130; work already committed (the completion store, files
  written atomically) stays as it is, so re-running the command resumes.
"""

from __future__ import annotations

import errno
import importlib
import sys

import typer

from ..console import console, setup_logging
from ..errors import ThoughtSourceError

app = typer.Typer(
    name="thoughtsource",
    help="Chain-of-thought datasets, generation, evaluation, annotation and STaR.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command groups, in the order they appear in --help.  Each module has register(app).
COMMAND_MODULES = [
    "thoughtsource.cli.data",
    "thoughtsource.cli.datasets",
    "thoughtsource.cli.generate",
    "thoughtsource.cli.evaluate",
    "thoughtsource.cli.runs",
    "thoughtsource.cli.store",
    "thoughtsource.cli.stats",
    "thoughtsource.cli.web",
    "thoughtsource.cli.model_server",
    "thoughtsource.cli.demo",
    "thoughtsource.cli.star",
    "thoughtsource.cli.training_data",
]

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        import importlib.metadata

        try:
            version = importlib.metadata.version("thoughtsource")
        except importlib.metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
            version = "unknown"
        typer.echo(f"thoughtsource {version}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="More log output (-vv for debug)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only warnings and errors."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of errors."),
) -> None:
    _state["debug"] = debug
    setup_logging(-1 if quiet else verbose)


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def _click_types(name: str) -> tuple[type[BaseException], ...]:
    """``name`` (ClickException, Abort) from click and from the copy typer vendors (typer >= 0.17 raises its own)."""
    found: list[type[BaseException]] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def _error(message: str) -> None:
    from rich.markup import escape

    console.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False, soft_wrap=True)


def _user_file_error(e: OSError) -> bool:
    """A file-system error about a named path that the user can fix (not a bug, not a network error)."""
    user_fixable = {errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS,
                    errno.ENOENT, errno.EDQUOT, errno.ENAMETOOLONG}
    return e.filename is not None and e.errno in user_fixable


def _usage_error(e: BaseException) -> int:
    """One line on stderr: the problem and where to read more; returns the exit code."""
    code = int(getattr(e, "exit_code", EXIT_USAGE))
    if type(e).__name__ == "NoArgsIsHelpError":  # a group called without a command: typer has printed its help
        return code
    message = " ".join(str(e.format_message()).split())  # type: ignore[attr-defined]
    ctx = getattr(e, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if ctx is not None and code == EXIT_USAGE else ""
    _error(f"{message}{hint}")
    return code


def _aborted() -> None:
    console.print("aborted", highlight=False)
    sys.exit(EXIT_INTERRUPTED)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: runs the app and turns errors into exit codes (see the module docstring)."""
    aborts: tuple[type[BaseException], ...] = (typer.Abort, *_click_types("Abort"))
    try:
        rv = typer.main.get_command(app).main(args=argv, prog_name="thoughtsource", standalone_mode=False)
    except ThoughtSourceError as e:
        if _state["debug"]:
            raise
        _error(str(e))
        sys.exit(1)
    except OSError as e:
        if _state["debug"] or not _user_file_error(e):
            raise
        hint = " (a file stands where a folder is needed)" if e.errno in (errno.EEXIST, errno.ENOTDIR) else ""
        _error(f"{e.filename}: {e.strerror}{hint}")
        sys.exit(1)
    except KeyboardInterrupt:
        _aborted()
    except typer.Exit as e:
        if e.exit_code == EXIT_INTERRUPTED:
            _aborted()
        sys.exit(e.exit_code)
    except _click_types("ClickException") as e:
        if _state["debug"]:
            raise
        sys.exit(_usage_error(e))
    except aborts:
        _aborted()
    # typer returns the code of an Exit it caught (130 for a KeyboardInterrupt) instead of raising it
    if isinstance(rv, int) and not isinstance(rv, bool):
        if rv == EXIT_INTERRUPTED:
            _aborted()
        sys.exit(rv)
