"""The one exception hierarchy of thoughtsource.

Every error a user should see is a :class:`ThoughtSourceError`; the CLI prints it as one red
line and exits 1.  Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError


class ThoughtSourceError(Exception):
    """Base class of all errors meant for the user."""


class DataError(ThoughtSourceError):
    """Bad input data.  Says where: file, line/column, dataset, split, record id, field."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        dataset: str | None = None,
        split: str | None = None,
        record: str | None = None,
        field: str | None = None,
        problems: Sequence[str] = (),
    ) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        self.dataset = dataset
        self.split = split
        self.record = record
        self.field = field
        self.problems = list(problems)
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path:
            loc = str(self.path)
            if self.line is not None:
                loc += f":{self.line}"
                if self.column is not None:
                    loc += f":{self.column}"
            where.append(loc)
        rec = "/".join(str(p) for p in (self.dataset, self.split, self.record) if p is not None)
        if rec:
            where.append(rec)
        if self.field:
            where.append(f"field '{self.field}'")
        text = ": ".join([*where, self.message])
        if self.problems:
            shown = self.problems[:20]
            text += "\n" + "\n".join(f"  - {p}" for p in shown)
            if len(self.problems) > len(shown):
                text += f"\n  ... and {len(self.problems) - len(shown)} more"
        return text


class Cancelled(ThoughtSourceError):
    """Long work stopped on request (e.g. a merge interrupted by a server shutting down)."""


class ChecksumError(DataError):
    """A downloaded or local raw file does not have the expected sha256."""


class ModelError(ThoughtSourceError):
    """A model cannot be found or loaded (a missing folder, a folder without a model, an unreachable hub id)."""


class EngineError(ThoughtSourceError):
    """A model engine could not be started, cannot take a request, or does not serve the model it was started for."""


class ConfigError(ThoughtSourceError):
    """A configuration is invalid; lists *all* problems at once."""

    def __init__(self, message: str, *, path: str | None = None, problems: Sequence[str] = ()) -> None:
        self.path = path
        self.problems = list(problems)
        text = f"{path}: {message}" if path else message
        if self.problems:
            text += "\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(text)


def validation_problems(error: ValidationError, *, root: str = "(root)") -> list[str]:
    """Every problem of a pydantic ``ValidationError``, one line each: ``a.b.c: message`` (``root`` names a problem of
    the whole model, whose location is empty).  What :class:`ConfigError`'s ``problems`` list for an invalid config."""
    return [f"{'.'.join(str(p) for p in err['loc']) or root}: {err['msg']}" for err in error.errors()]


class UnknownNameError(ThoughtSourceError, KeyError):
    """A name that is not in a registry (dataset, backend, fragment, task)."""

    def __init__(self, kind: str, name: str, available: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.available = sorted(set(available))
        close = difflib.get_close_matches(name, self.available, n=3)
        text = f"Unknown {kind} '{name}'."
        if close:
            text += f" Did you mean: {', '.join(close)}?"
        text += f" Available: {', '.join(self.available) or '(none)'}"
        ThoughtSourceError.__init__(self, text)

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


class BackendError(ThoughtSourceError):
    """A model backend failed after its retries ran out.

    ``fatal``: no later request can succeed either (e.g. no server accepts connections), so the
    whole run stops instead of trying every other request.
    """

    def __init__(self, message: str, *, backend: str = "", status: int | None = None, attempts: int = 0,
                 fatal: bool = False) -> None:
        self.backend = backend
        self.status = status
        self.attempts = attempts
        self.fatal = fatal
        detail = ", ".join(
            p
            for p in (
                backend and f"backend {backend}",
                (status is not None and f"status {status}") or "",
                (attempts and f"{attempts} attempts") or "",
            )
            if p
        )
        super().__init__(f"{message} ({detail})" if detail else message)


class GenerationFailed(BackendError):
    """Some CoTs or answer extractions of a generation run failed (the CLI's exit 1).

    What succeeded is attached and stored; ``report`` is the run's ``GenerateReport``.  Running the same
    generation again asks only for what is missing.
    """

    def __init__(self, message: str, *, report: Any = None) -> None:
        self.report = report
        super().__init__(message)


class MissingDependencyError(ThoughtSourceError, ImportError):
    """An optional dependency is not installed; says which extra brings it."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        ThoughtSourceError.__init__(self, f"{purpose} needs {package}, which is not installed: pip install '.[{extra}]' (in a clone of thoughtsource)")

    def __str__(self) -> str:
        return self.args[0]


def require(module: str, *, package: str | None = None, extra: str, purpose: str) -> None:
    """Raise :class:`MissingDependencyError` unless ``module`` can be imported."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(package or module, extra, purpose) from None


class StoreError(ThoughtSourceError):
    """The durable completion store is unusable."""


class AuthError(ThoughtSourceError):
    """Authentication or authorization failed (web app)."""
