"""Live counters a backend exposes (``backend.counters``) for progress bars and run summaries."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Counters:
    """Monotonic counts since the backend was created.

    ``requests`` counts attempts sent (HTTP calls or generate rows), ``retries`` the attempts that
    were repeats, ``errors`` the failed attempts (429, 5xx, timeouts, dropped connections),
    ``completed`` the requests answered and ``failed`` those given up on (a BackendError); ``cancelled`` the rows
    stopped before their end because their caller left (a streaming client that disconnected).
    """

    requests: int = 0
    retries: int = 0
    errors: int = 0
    completed: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cancelled: int = 0

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


def request_seed(seed: int | None, sample_index: int) -> int:
    """The seed one sampled request runs with: distinct per ``sample_index``, reproducible, < 2**31.

    Shared by every backend so that ``sample_index`` means the same thing everywhere: the n
    self-consistency samples of one prompt differ, and each is the same on a re-run.
    """
    return ((seed or 0) * 1_000_003 + sample_index) % (2**31 - 1)


def loop_state(states: dict[Any, T], factory: Callable[[], T]) -> T:
    """The state of the running event loop in ``states`` (made by ``factory`` on first use).

    asyncio objects (clients, queues, semaphores) bind to one loop, and a backend may be used from
    several (a notebook's loop, ``asyncio.run`` per call); states of closed loops are dropped.
    """
    loop = asyncio.get_running_loop()
    for old in [old for old in states if old.is_closed()]:
        del states[old]
    state = states.get(loop)
    if state is None:
        state = states[loop] = factory()
    return state


async def take_waiting(queue: asyncio.Queue[T], wait_s: float, limit: int | None = None) -> list[T]:
    """The next item of ``queue`` and, ``wait_s`` later (so that concurrent callers arrive together), every item waiting
    then, at most ``limit`` in all: what a batching worker takes for one batch."""
    items = [await queue.get()]
    if wait_s:
        await asyncio.sleep(wait_s)
    while (limit is None or len(items) < limit) and not queue.empty():
        items.append(queue.get_nowait())
    return items
