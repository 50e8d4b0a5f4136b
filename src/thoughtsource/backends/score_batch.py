"""Scoring requests that arrive together are scored together: one padded forward pass, not one a request.

lm-eval's multiple-choice tasks score every choice of every question with ``echo`` + ``logprobs`` (``max_tokens: 0``);
its ``local-completions`` model sends ``batch_size`` prompts a request and, with ``num_concurrent``, several requests
at once.  serve-model scored each prompt with its own forward pass; :class:`ScoreBatcher` collects what is waiting
(the prompts of one request and of concurrent ones), sorts it by length and scores it in padded batches of at most
``budget`` tokens (the logits of a batch are budget x vocabulary floats: 1,024 tokens of SmolLM2 are 200 MB).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from .counters import take_waiting

log = logging.getLogger(__name__)

#: per token: (its log-probability, or None for the first token; [(id, log-probability)] of the top ids)
Scores = list[tuple[float | None, list[tuple[int, float]]]]
#: padded tokens a forward pass scores at most
BUDGET_TOKENS = 1024

_Item = tuple[list[int], int, "asyncio.Future[Scores]"]


class ScoreBatcher:
    """``await batcher.score(ids, top)`` -> Scores; ``score_batch(list_of_ids, top)`` does the work in a thread, and
    ``on_pass(rows)`` hears of each forward pass (serve-model's /metrics)."""

    def __init__(self, score_batch: Callable[[list[list[int]], int], list[Scores]], budget: int = BUDGET_TOKENS,
                 wait_s: float = 0.002, on_pass: Callable[[int], None] | None = None) -> None:
        self.score_batch, self.budget, self.wait_s, self.on_pass = score_batch, budget, wait_s, on_pass
        self._queue: asyncio.Queue[_Item] | None = None
        self._worker: asyncio.Task[None] | None = None

    async def score(self, ids: list[int], top: int = 0) -> Scores:
        if self._queue is None or self._worker is None or self._worker.done():
            self._queue = asyncio.Queue()
            self._worker = asyncio.ensure_future(self._work(self._queue))
        future: asyncio.Future[Scores] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((list(ids), top, future))
        return await future

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker

    def batches(self, items: list[_Item]) -> list[list[_Item]]:
        """``items`` sorted by length and cut into batches whose padded size stays within the budget (a longer
        prompt alone)."""
        out: list[list[_Item]] = []
        for item in sorted(items, key=lambda it: len(it[0])):
            if out and len(item[0]) * (len(out[-1]) + 1) <= self.budget:
                out[-1].append(item)
            else:
                out.append([item])
        return out

    async def _work(self, queue: asyncio.Queue[_Item]) -> None:
        while True:
            items = [it for it in await take_waiting(queue, self.wait_s) if not it[2].done()]  # sent together
            for batch in self.batches(items):
                top = max(t for _, t, _ in batch)
                try:
                    scores = await asyncio.to_thread(self.score_batch, [ids for ids, _, _ in batch], top)
                except Exception as e:  # every caller of this batch gets it
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(e)
                    continue
                if self.on_pass is not None:
                    self.on_pass(len(batch))
                for (_, t, future), row in zip(batch, scores, strict=True):
                    if not future.done():
                        future.set_result([(lp, alts[:t]) for lp, alts in row])
