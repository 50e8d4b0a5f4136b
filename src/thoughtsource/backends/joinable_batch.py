"""Continuous batching that a request joins at the next decoding step (the transformers backend's mode "continuous").

A batch generated to its end before the next one starts makes a 4-token request that arrives 1 s after a 300-token one
wait for all 300 tokens (10.27 s against 0.27 s alone, issue 45).  :class:`JoinableBatch` keeps transformers'
``ContinuousBatchingManager`` (paged attention, one scheduling loop in its own thread) running while the backend
serves: :meth:`JoinableBatch.submit` adds a request to the running loop, which prefills it and decodes it with the
rows already running from the next step on; a row leaves the batch as soon as it ends.

Every request is added with ``streaming=True``, so each step's tokens reach this module at once.  A reader thread a
manager hands them to the row's sink (a streamed response; a sink that returns False cancels the row: the client
left), checks the row's stop strings (a row that printed one is cancelled instead of decoding to ``max_tokens``) and
settles the row's future with its tokens when it ends.  A Ctrl-C or serve-model's shutdown limit
(:func:`thoughtsource.interrupt.requested`) cancels every row, whose future then raises
:class:`~thoughtsource.interrupt.Interrupted`.

A manager decodes with one ``GenerationConfig``: requests with another (temperature, top_p) go to another manager
(at most :data:`MAX_MANAGERS`; the least recently used one is stopped for a new one).  Greedy rows give the tokens
``model.generate`` gives (tests/backends/test_joinable_batch.py); a sampled row is drawn from the manager's generator,
so it depends on what else shares its batch, as in every continuous-batching server (the transformers backend sends a
sampled request that carries a seed to its prefix decoder instead, where it draws from its own generator).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import interrupt
from ..interrupt import Interrupted
from .base import TokenSink

log = logging.getLogger(__name__)

#: managers (one per sampling configuration) kept running at once
MAX_MANAGERS = 4
#: the KV cache of a manager on the CPU, in bytes (on CUDA transformers sizes it from free GPU memory)
CPU_CACHE_BYTES = 512 * 2**20
#: tokens one CPU forward step takes at most (a long prompt is prefilled in parts of this size)
CPU_BATCH_TOKENS = 512
PAGE_TOKENS = 256


@dataclass
class _Row:
    future: concurrent.futures.Future[list[int]]
    sink: TokenSink | None
    stopped: Callable[[list[int]], bool] | None
    ends: frozenset[int]
    tokens: list[int] = field(default_factory=list)


class _Manager:
    """One running ``ContinuousBatchingManager`` and the thread that reads its results."""

    def __init__(self, model: Any, config: Any, cb_config: Any, key: tuple[float, float]) -> None:
        self.key = key
        self.manager = model.init_continuous_batching(generation_config=config, continuous_batching_config=cb_config)
        self.manager.start()
        self.rows: dict[str, _Row] = {}
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.reader = threading.Thread(target=self._read, name=f"joinable-batch-{key}", daemon=True)
        self.reader.start()

    def add(self, request_id: str, ids: list[int], max_new_tokens: int, row: _Row) -> None:
        with self.lock:
            self.rows[request_id] = row
        added = self.manager.add_request(list(ids), request_id=request_id, max_new_tokens=max_new_tokens,
                                         streaming=True, eos_token_id=sorted(row.ends))
        if added is None:  # the manager refused it (stopping)
            self._settle(request_id, error=RuntimeError("continuous batching is stopping; the request was not added"))

    def _settle(self, request_id: str, tokens: list[int] | None = None, error: BaseException | None = None) -> None:
        with self.lock:
            row = self.rows.pop(request_id, None)
        if row is None or row.future.done():
            return
        if error is not None:
            row.future.set_exception(error)
        else:
            row.future.set_result(list(tokens if tokens is not None else row.tokens))

    def _cancel(self, request_id: str, tokens: list[int]) -> None:
        self.manager.cancel_request(request_id)
        self._settle(request_id, tokens)

    def _read(self) -> None:
        while not self.closed.is_set():
            if interrupt.requested():
                self.fail_all(Interrupted())
            if not self.manager.is_running():
                self.fail_all(RuntimeError("continuous batching stopped (its generation thread ended)"))
                if not self.rows:
                    self.closed.wait(0.05)
                continue
            out = self.manager.get_result(timeout=0.05)
            if out is None:
                continue
            with self.lock:
                row = self.rows.get(out.request_id)
            if row is None:  # cancelled or settled already
                continue
            if out.error:
                self._settle(out.request_id, error=RuntimeError(f"continuous batching: {out.error}"))
                continue
            if self._advance(out.request_id, row, list(out.generated_tokens)):
                continue
            if out.is_finished():
                self._settle(out.request_id, row.tokens)

    def _advance(self, request_id: str, row: _Row, generated: list[int]) -> bool:
        """Take the row's new tokens; True when the row was cut (its sink said stop, or a stop string came)."""
        new = generated[len(row.tokens):]
        if not new:
            return False
        for token in new:
            row.tokens.append(token)
            if row.sink is not None and token not in row.ends and row.sink(token) is False:
                self._cancel(request_id, row.tokens)
                return True
        if row.stopped is not None and row.stopped(row.tokens):
            self._cancel(request_id, row.tokens)
            return True
        return False

    def fail_all(self, error: BaseException) -> None:
        with self.lock:
            ids = list(self.rows)
        for request_id in ids:
            self.manager.cancel_request(request_id)
            self._settle(request_id, error=error)

    @property
    def busy(self) -> bool:
        with self.lock:
            return bool(self.rows)

    def close(self) -> None:
        self.fail_all(RuntimeError("continuous batching was closed"))
        self.closed.set()
        self.manager.stop(block=True, timeout=30)
        self.reader.join(timeout=5)


class JoinableBatch:
    """Requests join one running continuous batch (per sampling configuration) at its next decoding step."""

    def __init__(self, model: Any, tokenizer: Any, *, device: str) -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self._managers: OrderedDict[tuple[float, float], _Manager] = OrderedDict()
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self.capacity = self._capacity_tokens()

    def _capacity_tokens(self) -> int | None:
        """Tokens the CPU cache holds (None on CUDA: transformers sizes it)."""
        if self.device.startswith("cuda"):
            return None
        c = self.model.config
        heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        per_token: int = 2 * c.num_hidden_layers * heads * head_dim * self.model.dtype.itemsize
        return max(4, CPU_CACHE_BYTES // per_token // PAGE_TOKENS) * PAGE_TOKENS

    def fits(self, prompt_tokens: int, max_new_tokens: int) -> bool:
        """Whether a request fits the cache alone (one that does not would wait for ever: it decodes apart)."""
        return self.capacity is None or prompt_tokens + max_new_tokens <= self.capacity

    def _manager(self, temperature: float, top_p: float, end_ids: list[int]) -> _Manager:
        from transformers import GenerationConfig
        from transformers.generation.configuration_utils import ContinuousBatchingConfig

        key = (temperature, top_p)
        with self._lock:
            found = self._managers.get(key)
            if found is not None and found.manager.is_running():
                self._managers.move_to_end(key)
                return found
            if found is not None:
                found.close()
                del self._managers[key]
            while len(self._managers) >= MAX_MANAGERS:  # the least recently used idle one makes room
                idle = next((k for k, m in self._managers.items() if not m.busy), None)
                if idle is None:
                    break
                self._managers.pop(idle).close()
            sampled = temperature > 0
            config = GenerationConfig(  # type: ignore[no-untyped-call]  # transformers' config takes **kwargs
                do_sample=sampled, temperature=temperature if sampled else None, top_p=top_p if sampled and top_p < 1 else None,
                eos_token_id=end_ids, pad_token_id=self.tokenizer.pad_token_id, max_new_tokens=256)
            if self.capacity is None:
                cb = ContinuousBatchingConfig()
            else:
                cb = ContinuousBatchingConfig(page_size=PAGE_TOKENS, num_blocks=self.capacity // PAGE_TOKENS,
                                              max_batch_tokens=CPU_BATCH_TOKENS, use_cuda_graph=False)
            made = self._managers[key] = _Manager(self.model, config, cb, key)
            return made

    def submit(self, ids: list[int], max_new_tokens: int, *, temperature: float, top_p: float, end_ids: list[int],
               sink: TokenSink | None = None,
               stopped: Callable[[list[int]], bool] | None = None) -> concurrent.futures.Future[list[int]]:
        """Add one row to the running batch; the future gives its generated tokens (the end token included, if any)."""
        row = _Row(concurrent.futures.Future(), sink, stopped, frozenset(end_ids))
        manager = self._manager(temperature, top_p, end_ids)
        manager.add(f"row-{next(self._ids)}", ids, max_new_tokens, row)
        return row.future

    def close(self) -> None:
        with self._lock:
            managers, self._managers = list(self._managers.values()), OrderedDict()
        for m in managers:
            m.close()
