"""The one store-first runner: key → store lookup → backend call → store commit, for every caller that completes
requests (:func:`thoughtsource.generation.generate` and the chains of :mod:`thoughtsource.generation.chains`).

:class:`Runner` owns what every such caller needs and none should write again: batching of requests asked for in the
same event-loop tick, at most ``concurrency`` backend calls in flight, one call for a key asked for twice, claims in
the store (another process generating into the same store waits for a key instead of paying for it too), the
backend's retries counted, empty completions refused, a fatal backend error failing everything at once, and Ctrl-C
(:class:`~thoughtsource.interrupt.Interrupted`) committing whatever finished before it.  A completion is committed to
the store before anything else happens with it.  STaR's generation (:mod:`thoughtsource.star.generation`) runs on it
too.  :func:`run_coroutine` runs a caller's coroutine from plain or Jupyter code.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..backends.base import Backend, Request
from ..errors import BackendError
from ..interrupt import Interrupted
from ..store import CompletionStore, NoStore, StoredCompletion, completion_key

log = logging.getLogger(__name__)


class Runner:
    """Store-first completion of requests: batches of missing keys go to the backend, results to the store.

    Requests submitted in the same event-loop tick are batched together (up to ``batch_size``); at
    most ``concurrency`` backend calls run at once; a key asked for twice while in flight is called
    once.  Before a batch is sent its keys are claimed in the store, so another process generating
    into the same store waits for them instead of paying for them too (see ``store.py``).  An empty
    completion is an error, not a result (unless ``allow_empty``); a *fatal* backend error (no
    server reachable) fails every pending and later request at once.  Each stored row records
    ``backend_name`` (default: the backend's name); a :class:`~thoughtsource.store.NoStore` keeps nothing.
    """

    def __init__(self, backend: Backend, store: CompletionStore | NoStore, identity: dict[str, Any] | None = None, *,
                 batch_size: int = 1, concurrency: int = 1, on_done: Callable[[], None] | None = None,
                 allow_empty: bool = False, backend_name: str | None = None) -> None:
        self.backend, self.store = backend, store
        self.identity = identity if identity is not None else backend.cache_identity()
        self.backend_name = backend_name or backend.name
        self.batch_size, self.concurrency = batch_size, concurrency
        self.on_done: Callable[[], None] = on_done or (lambda: None)
        self.allow_empty = allow_empty
        self.pending: list[tuple[str, Request, asyncio.Future[tuple[StoredCompletion, bool]]]] = []
        self.inflight: dict[str, asyncio.Future[tuple[StoredCompletion, bool]]] = {}
        self.active = 0
        self.called = 0
        self.generated_tokens = 0  # completion tokens of the completions the backend made (not read from the store)
        self.retries = 0
        self.fatal: BackendError | None = None
        self._kick_scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()

    def key(self, request: Request) -> str:
        """The store key of a request for this backend."""
        return completion_key(self.identity, request)

    async def complete(self, requests: Sequence[Request]) -> list[tuple[StoredCompletion, bool]]:
        """Every request's (row, came_from_store), in order: one store lookup for all, the backend for the rest."""
        keys = [self.key(r) for r in requests]
        hits = self.store.get_many(keys)
        return list(await asyncio.gather(*(self.get(k, r, hits.get(k)) for k, r in zip(keys, requests, strict=True))))

    async def get(self, key: str, request: Request, cached: StoredCompletion | None) -> tuple[StoredCompletion, bool]:
        """(row, came_from_store): ``cached`` (the caller's store lookup) if any, else the backend's completion, committed."""
        if cached is not None:
            return cached, True
        if self.fatal is not None:
            raise self.fatal
        if key not in self.inflight:
            fut: asyncio.Future[tuple[StoredCompletion, bool]] = asyncio.get_running_loop().create_future()
            self.inflight[key] = fut
            self.pending.append((key, request, fut))
            if not self._kick_scheduled:
                self._kick_scheduled = True
                asyncio.get_running_loop().call_soon(self._kick)
        return await asyncio.shield(self.inflight[key])

    def _kick(self) -> None:
        self._kick_scheduled = False
        if self.fatal is not None:
            self._settle(self.pending, self.fatal)
            self.pending = []
            return
        while self.pending and self.active < self.concurrency:
            batch, self.pending = self.pending[: self.batch_size], self.pending[self.batch_size :]
            self.active += 1
            task = asyncio.create_task(self._run(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            task.add_done_callback(_retrieved)  # a Ctrl-C raised in it ends the run; asyncio need not log it again

    def _settle(self, batch: list[tuple[str, Request, asyncio.Future[tuple[StoredCompletion, bool]]]],
                error: BaseException) -> None:
        for key, _, fut in batch:
            if not fut.done():
                fut.set_exception(error)
                self.on_done()
            self.inflight.pop(key, None)

    async def _run(self, batch: list[tuple[str, Request, asyncio.Future[tuple[StoredCompletion, bool]]]]) -> None:
        original = batch
        try:
            wait = 0.05
            while batch:
                mine, done = self.store.claim(key for key, _, _ in batch)
                if done:  # committed by another process since we looked
                    rows = self.store.get_many(done)
                    for key, _, fut in batch:
                        if key in rows:
                            fut.set_result((rows[key], True))
                            self.on_done()
                if mine:
                    await self._send([b for b in batch if b[0] in mine])
                batch = [b for b in batch if b[0] not in mine and b[0] not in done]
                if batch:  # claimed by another live process: wait for its result or its release
                    await asyncio.sleep(wait)
                    wait = min(1.0, wait * 2)
        except BackendError as e:
            if e.fatal and self.fatal is None:
                self._stop(e)
            self._settle(original, e)
        except asyncio.CancelledError:
            if self.fatal is not None:  # stopped by _stop: the units waiting on this batch get the fatal error
                self._settle(original, self.fatal)
            raise
        except Exception as e:
            self._settle(original, e)
        finally:
            for key, _, fut in original:
                if fut.done() and not fut.exception():
                    self.inflight.pop(key, None)
            self.active -= 1
            self._kick()

    def _stop(self, error: BackendError) -> None:
        """A fatal error: fail what is pending and cancel the calls in flight (their retries cannot succeed)."""
        self.fatal = error
        self._settle(self.pending, error)
        self.pending = []
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()

    async def _send(self, batch: list[tuple[str, Request, asyncio.Future[tuple[StoredCompletion, bool]]]]) -> None:
        """Call the backend for claimed keys; commit each completion, then resolve its future."""
        try:
            completions = await self.backend.complete([r for _, r, _ in batch])
            if len(completions) != len(batch):
                raise BackendError(f"returned {len(completions)} completions for {len(batch)} requests", backend=self.backend.name)
        except Interrupted as e:  # Ctrl-C stopped the in-process model: commit every completion that finished, then stop
            kept = set()
            for i, (key, request, _) in enumerate(batch):
                c = e.completions.get(i)
                if c is not None and (self.allow_empty or c.text.strip() or c.reasoning is not None):
                    self.store.put(key, self.backend_name, self.identity, request, c)
                    self.called += 1
                    self.generated_tokens += c.completion_tokens
                    kept.add(key)
            self.store.release(key for key, _, _ in batch if key not in kept)
            log.info("interrupted: kept %d finished completion(s) of the batch", len(kept))
            raise
        except BaseException:
            self.store.release(key for key, _, _ in batch)
            raise
        empty: list[str] = []
        for (key, request, fut), completion in zip(batch, completions, strict=True):
            self.retries += max(0, completion.attempts - 1)
            if not self.allow_empty and not completion.text.strip() and completion.reasoning is None:
                empty.append(key)
                fut.set_exception(BackendError(
                    f"empty completion (finish_reason {completion.finish_reason!r}); not stored, a re-run asks again "
                    "(allow_empty=True stores it)", backend=self.backend.name, attempts=completion.attempts))
                self.on_done()
                continue
            row = self.store.put(key, self.backend_name, self.identity, request, completion)  # committed first
            self.called += 1
            self.generated_tokens += completion.completion_tokens
            fut.set_result((row, False))
            self.on_done()
        if empty:
            self.store.release(empty)
            for key in empty:
                self.inflight.pop(key, None)


def _retrieved(task: asyncio.Task[None]) -> None:
    """Marks a task's exception as seen (it propagated out of the event loop: Ctrl-C)."""
    if not task.cancelled():
        task.exception()



def run_coroutine(factory: Any) -> None:
    """Run ``factory()`` to completion, also when called from a running event loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(factory())
        return
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="thoughtsource-generate") as pool:
        pool.submit(lambda: asyncio.run(factory())).result()

