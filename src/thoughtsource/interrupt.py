"""Ctrl-C while the in-process model decodes (the transformers backend, STaR's generation).

A model in this process decodes in a worker thread, which Python cannot interrupt: the default Ctrl-C raised in the
main thread, and the process then waited for the whole batch (82 s with SmolLM2 on a CPU) and stored none of it.
While :func:`graceful_sigint` is active:

* the first Ctrl-C asks the decoder to stop (:func:`requested`), which it checks between decoding steps; the batch
  returns at once with the rows that finished, which :class:`Interrupted` carries to the caller to be stored, and the
  command exits 130 as for any Ctrl-C.  With nothing decoding in process (a server backend, training, loading) the
  first Ctrl-C is the plain KeyboardInterrupt it always was;
* a second Ctrl-C aborts at once (exit 130; the completion store is SQLite in WAL mode, so what was committed stays).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 130

_stop = threading.Event()
_lock = threading.Lock()
_decoding = {"threads": 0}


class Interrupted(KeyboardInterrupt):
    """Decoding stopped by Ctrl-C; ``completions`` maps the index of each request of the batch that finished before
    the stop to its Completion (the others were cut off and are not results)."""

    def __init__(self, completions: dict[int, Any] | None = None) -> None:
        super().__init__("interrupted")
        self.completions = dict(completions or {})


def requested() -> bool:
    """Whether Ctrl-C asked the decoding to stop (checked between decoding steps)."""
    return _stop.is_set()


def request_stop() -> None:
    """Ask every in-process decoding to stop, as a Ctrl-C does (serve-model once its --shutdown-timeout has passed)."""
    _stop.set()


@contextlib.contextmanager
def decoding() -> Iterator[None]:
    """Marks in-process decoding: a Ctrl-C meanwhile stops it between steps instead of raising in the main thread."""
    with _lock:
        _decoding["threads"] += 1
    try:
        yield
    finally:
        with _lock:
            _decoding["threads"] -= 1


def _handler(signum: int, frame: Any) -> None:
    if _stop.is_set():  # the second Ctrl-C: abort at once
        sys.stderr.write("aborted\n")
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
    _stop.set()
    with _lock:
        busy = _decoding["threads"] > 0
    if busy:
        log.warning("Ctrl-C: stopping after the current decoding step and keeping every finished completion "
                    "(Ctrl-C again aborts at once)")
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def graceful_sigint() -> Iterator[None]:
    """Install the Ctrl-C handler of this module for the duration (in the main thread; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    _stop.clear()
    signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _stop.clear()


@contextlib.contextmanager
def ctrl_c_stops(server: Any) -> Iterator[None]:
    """Ctrl-C at any moment inside stops the uvicorn ``server`` (one that has not started yet starts and stops at once),
    and a KeyboardInterrupt is raised on the way out, so the command exits 130 with one line ("aborted").  SIGTERM
    keeps its meaning (uvicorn's graceful stop, then the signal).  ``serve`` and ``serve-model`` run their server in it.

    uvicorn puts its own handlers in only once its task runs.  Before that, asyncio's runner put in its SIGINT handler
    (only over Python's default one), and a Ctrl-C there cancelled the task: a CancelledError traceback.  A process
    that had SIGINT ignored (a command started with ``&`` by a script) lost the Ctrl-C altogether and went on serving
    (a test hung for an hour).  With this handler in place the runner puts in none, and uvicorn restores this one when
    it stops and raises the signals it caught again, so each is seen here."""
    caught: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        caught.append(signum)
        server.should_exit = True

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
