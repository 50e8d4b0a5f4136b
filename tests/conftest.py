"""Shared fixtures: the real data under ../shared/data, an isolated THOUGHTSOURCE_HOME."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import pytest

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    env = os.environ.get("THOUGHTSOURCE_DATA") or os.environ.get("THOUGHTSOURCE_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


SHARED_DATA = _shared_data()
_USER_CACHE = platformdirs.user_cache_dir("thoughtsource")


def pytest_configure(config: pytest.Config) -> None:
    """Before any test module is imported (several copy ``os.environ`` for the processes they start):

    - no test sees the terminal size of whoever runs pytest: pytest-xdist's workers get ``COLUMNS=80`` and
      ``LINES=24``, and the result console then cut tables it writes whole to a pipe (4 CLI tests failed under
      ``-n 2``); a test that wants a width sets it;
    - under pytest-xdist (``make test``: ``-n auto``) each worker gets its share of the cores as torch's thread count
      (``OMP_NUM_THREADS``, read when torch loads, inherited by the processes a test starts), unless it is set by
      hand: two workers of two threads each on two cores ran every torch test oversubscribed.
    """
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // int(workers)))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or $THOUGHTSOURCE_DATA); skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder not found at {SHARED_DATA} (set THOUGHTSOURCE_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def examples_dir(shared_data: Path) -> Path:
    d = shared_data / "thoughtsource_examples"
    if not d.is_dir():
        pytest.skip(f"ThoughtSource example files not found at {d}")
    return d


@pytest.fixture(scope="session")
def gpt35_replicated(examples_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """(path, ``Replicated``): the released GPT-3.5 run replicated to 300 MB (71,700 samples, 215,100 short real CoTs),
    written once a session (a pytest-xdist worker) for the bounded-memory tests of ``evaluate``, ``stats`` and
    ``training-data``, which only read it."""
    from thoughtsource.testing.scale import write_replicated

    src = examples_dir / "model_runs" / "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"
    big = tmp_path_factory.mktemp("replicated") / "gpt35-300mb.json"
    return big, write_replicated(json.loads(src.read_text(encoding="utf-8")), big, 300 << 20)


@pytest.fixture(scope="session")
def embedded_model() -> tuple:
    """(model, tokenizer) of the embedded SmolLM2, loaded once per session for every test that generates with it
    (wrap it with ``TransformersBackend.from_loaded``).  Tests that load the model by name, where loading is the
    point, load it themselves."""
    pytest.importorskip("transformers")
    from thoughtsource.embedded import load_model

    model, tok = load_model("embedded")
    return model.eval(), tok


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own THOUGHTSOURCE_HOME (db, secrets), never the user's.  Converted datasets and models
    (``paths.cache_dir``, under THOUGHTSOURCE_HOME once it is set) stay in one cache shared by the tests, the user
    cache as before, unless THOUGHTSOURCE_CACHE names one."""
    monkeypatch.setenv("THOUGHTSOURCE_HOME", str(tmp_path_factory.mktemp("home")))
    monkeypatch.setenv("THOUGHTSOURCE_CACHE", os.environ.get("THOUGHTSOURCE_CACHE") or _USER_CACHE)


@pytest.fixture(autouse=True)
def _not_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with the console not quiet: a CLI run in process with ``-q`` (CliRunner) sets the console's
    quiet flag for the rest of the process, which silenced the progress lines of a later test in the full suite."""
    from thoughtsource import console

    monkeypatch.setitem(console._quiet, "on", False)


def _reopen_closed_log_streams() -> None:
    """Point every logging StreamHandler whose stream (or bound ``flush``) was closed at the current ``sys.stderr``."""
    loggers = [logging.getLogger(), *(x for x in logging.Logger.manager.loggerDict.values() if isinstance(x, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if not isinstance(handler, logging.StreamHandler):
                continue
            if getattr(handler.stream, "closed", False):
                handler.stream = sys.stderr  # not setStream: it flushes the closed stream first
            flush = vars(handler).get("flush")  # transformers binds its handler's flush to the sys.stderr of the time
            if flush is not None and getattr(getattr(flush, "__self__", None), "closed", False):
                del handler.flush


@pytest.fixture(autouse=True)
def _open_log_streams() -> None:
    """No log handler writes to a closed stream: a library that first sets up its logging during a CLI run in process
    (transformers' StreamHandler, made while CliRunner's capture was sys.stderr) keeps that stream after the run closes
    it, and a later test that logs through it got Python's "--- Logging error ---" traceback on its stderr (a damaged
    star config's one error line came with 20 lines of it, in one test order)."""
    _reopen_closed_log_streams()


@dataclass(frozen=True)
class _LoggingState:
    """What decides whether the package's log records reach a handler: the root logger's level and own handlers
    (pytest's capture handlers aside), the ``thoughtsource`` logger's level, propagation and on/off, and
    ``logging.disable``."""

    root_level: int
    root_handlers: tuple[logging.Handler, ...]
    level: int
    propagate: bool
    disabled: bool
    disable: int

    @classmethod
    def now(cls) -> _LoggingState:
        root, package = logging.getLogger(), logging.getLogger("thoughtsource")
        return cls(root.level, tuple(h for h in root.handlers if not _is_pytests(h)), package.level, package.propagate,
                   package.disabled, logging.root.manager.disable)

    def restore(self) -> None:
        root, package = logging.getLogger(), logging.getLogger("thoughtsource")
        root.setLevel(self.root_level)
        root.handlers[:] = [*self.root_handlers, *(h for h in root.handlers if _is_pytests(h))]
        package.setLevel(self.level)
        package.propagate, package.disabled = self.propagate, self.disabled
        logging.disable(self.disable)


def _is_pytests(handler: logging.Handler) -> bool:
    return type(handler).__module__.startswith("_pytest")


@pytest.fixture(autouse=True)
def _logging_put_back() -> Iterator[None]:
    """Every test leaves logging as it found it.  A CLI run in process (``CliRunner().invoke(app, ...)``, ``main``)
    sets up the package's logging as a process of its own would: a RichHandler on the root logger, and the package
    logger at INFO, or at WARNING with ``-q``, for the rest of the process.  Under pytest-xdist whichever test ran next
    on that worker lost its INFO records (``test_published_keys_and_bad_templates`` failed in CI, in one file order of
    many): tests/test_isolation.py."""
    before = _LoggingState.now()
    yield
    if _LoggingState.now() != before:
        before.restore()
