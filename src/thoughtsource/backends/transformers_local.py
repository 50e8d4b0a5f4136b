"""Local generation with transformers: batched, deterministic, the embedded SmolLM2 by default.

``TransformersBackend(model="embedded", batch_size=8, device=None)`` loads a model by name or path
(``"embedded"`` is SmolLM2-135M-Instruct converted from the bundled GGUF, no download);
``TransformersBackend.from_loaded(model, tokenizer)`` wraps a model already in memory (STaR generates
with the model it is fine-tuning).

How it generates:

* **Request batching.** ``complete()`` puts its requests (sorted by length) on a queue; one worker
  per event loop takes up to ``batch_size`` of them, also from concurrent callers (the
  ``serve-model`` server), and runs one batched generate in a thread so the loop stays free.
* **mode="generate"** (the CPU default): left-padded ``model.generate``.  Every row keeps its own
  decoding: greedy rows take the argmax; sampled rows draw with their own ``torch.Generator`` seeded
  from ``(seed, sample_index)``, inside a logits processor, so a sample is the same whatever else
  shares its batch.  Rows stop at their own ``max_tokens`` and stop strings.
* **mode="continuous"** (the CUDA default): transformers' continuous batching
  (``model.generate_batch``, paged attention); requests with equal temperature/top_p go in one call,
  then rows are cut at their own ``max_tokens`` and stop strings.  Sampling is seeded per call, so
  a sample is reproducible for the same set of requests only.
* **mode="static"**: like "generate" with a static KV cache (``cache_implementation="static"``),
  the shape torch.compile likes on a GPU.
* **mode="prefix"** (the CPU default): :mod:`.prefix_decode`: rows sharing a few-shot prefix run it
  once and reuse its KV cache; finished rows leave the batch at once; stop strings are checked on
  each row's last tokens.  Greedy results equal "generate"'s; sampled rows use the same per-row
  generators.

**Streaming** (``serve-model``'s ``stream: true``): ``complete(requests, sinks=...)`` hands each generated token of a
row to that row's sink as soon as it is chosen (in the generating thread, end tokens excluded); a sink that returns
False stops its row at once (the client left), and ``counters.cancelled`` counts it.  Modes generate/static hand
the tokens over from their stopping criterion, prefix from its own loop; in continuous mode the streamed rows decode with the
prefix decoder (continuous batching hands its tokens back only at its end), the others as before.

``cache_identity()`` names the model and a fingerprint of its weights: a hash of the config and
safetensors files for a model on disk, a hash of sampled parameter values for one in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import interrupt
from ..embedded import check_model_source, embedded_is_converted, is_embedded, load_model, resolve_model
from ..errors import BackendError
from ..interrupt import Interrupted
from ..io import atomic_write
from ..paths import cache_dir
from ..reasoning import split_reasoning
from . import graph_decode, prefix_decode
from .base import BackendSettings, Completion, Request, TokenSink, sampling_extras
from .counters import Counters, loop_state, request_seed, take_waiting
from .cpu_threads import MeasuredThreads, thread_cap
from .joinable_batch import JoinableBatch
from .prompt_tokens import prompt_token_ids

log = logging.getLogger(__name__)

#: the log-probabilities of recent scoring passes kept for the next requests (owned models only)
SCORE_CACHE_BYTES = 256 * 2**20

Mode = Literal["auto", "generate", "continuous", "static", "prefix", "graph"]
_Queued = tuple[Request, "asyncio.Future[Completion]", TokenSink | None]


class TransformersOptions(BaseModel):
    """Options of the ``transformers`` backend (``get_backend("transformers", **options)``)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="embedded", description="'embedded', a local model folder or a cached hub id.")
    batch_size: int = Field(default=8, ge=1, description="Rows per generate call (mode generate/static).")
    device: str | None = Field(default=None, description="cuda, cuda:1, cpu, ...; default: cuda when available.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto", description="auto: bfloat16 on CUDA, float32 on CPU."
    )
    mode: Mode = Field(
        default="auto",
        description="auto: continuous on CUDA, prefix otherwise; graph: a static KV cache, the decoding step a CUDA graph "
        "on CUDA (backends/graph_decode.py).",
    )
    skip_special_tokens: bool = Field(default=True, description="Drop special tokens from the decoded text.")
    think_tags: tuple[str, str] | None = Field(
        default=None,
        description="Start and end tag of a reasoning model's inline thinking (e.g. ['<think>', '</think>']): the text "
        "inside becomes the CoT, the text after the end tag the answer; None: no reasoning split.",
    )
    batch_wait_s: float = Field(default=0.005, ge=0, description="How long a batch waits for concurrent requests.")
    fingerprint: str | None = Field(default=None, description="Use this weights fingerprint instead of computing one.")
    threads: int | Literal["auto"] | None = Field(
        default="auto",
        description="torch CPU threads while generating on the CPU (torch.set_num_threads, process-wide). 'auto': the "
        "count whose forward pass measured fastest here, from 1 to the cores or $OMP_NUM_THREADS, measured again when "
        "the load moves (backends/cpu_threads.py); None: torch's default (OMP_NUM_THREADS, else every core).",
    )

    @field_validator("threads")
    @classmethod
    def _positive(cls, v: int | str | None) -> int | str | None:
        if isinstance(v, int) and v < 1:
            raise ValueError("threads must be >= 1, 'auto' or None")
        return v


@dataclass
class _Row:
    request: Request
    text: str  # the prompt text fed to the model (chat template applied)
    ids: list[int]


class _LoopState:
    def __init__(self, backend: TransformersBackend) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[_Queued] = asyncio.Queue()
        self.worker = self.loop.create_task(backend._worker(self.queue))


class TransformersBackend:
    """The ``transformers`` backend: see the module docstring."""

    name = "transformers"

    def __init__(self, model: Any = "embedded", tokenizer: Any = None, *, name: str | None = None, **options: Any) -> None:
        if not isinstance(model, str):  # an already-loaded model; ``name`` is what cache identities call it
            if tokenizer is None:
                raise TypeError("TransformersBackend: a loaded model needs its tokenizer")
            name = name or getattr(model.config, "name_or_path", "") or type(model).__name__
            self.options = TransformersOptions(model=name, **options)
            self._model, self._tokenizer = model, tokenizer
            self._prepare_tokenizer()
            self.device = str(next(model.parameters()).device)
            self._owns_model = False
        else:
            self.options = TransformersOptions(model=model, **options)
            check_model_source(model)  # a missing folder is an error now, not a traceback at the first request
            self._model = self._tokenizer = None
            self.device = self.options.device or _default_device()
            self._owns_model = True
        self.counters = Counters()
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._lock = threading.Lock()  # one generate at a time on this model
        self._fingerprint = self.options.fingerprint
        self._graph_decoder: Any = None  # mode graph: its buffers and CUDA graphs, kept between calls
        self._joinable: JoinableBatch | None = None  # mode continuous: the running batch requests join
        self._joinable_lock = threading.Lock()
        self._threads: MeasuredThreads | None = None  # threads='auto': the measured choice
        self._score_cache: OrderedDict[tuple[int, ...], Any] = OrderedDict()  # token_logprobs_batch's last passes

    @classmethod
    def options_from(cls, settings: BackendSettings) -> dict[str, Any]:
        """A generate config gives the model ('embedded', a folder or a cached hub id)."""
        return {"model": settings.model}

    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any, name: str | None = None, **options: Any) -> TransformersBackend:
        """Wrap a (model, tokenizer) already in memory; it stays the caller's (``aclose`` keeps it)."""
        return cls(model, tokenizer, name=name, **options)

    def __repr__(self) -> str:
        return f"TransformersBackend(model={self.options.model!r}, device={self.device!r}, mode={self.mode!r})"

    @property
    def mode(self) -> str:
        if self.options.mode != "auto":
            return self.options.mode
        return "continuous" if self.device.startswith("cuda") else "prefix"

    # -- loading ----------------------------------------------------------------------------

    def load(self) -> tuple[Any, Any]:
        """(model, tokenizer), loading them on first use."""
        if self._model is not None:  # loaded: no lock (a generate holds it; the server's tokenizer calls must not wait)
            return self._model, self._tokenizer
        with self._lock:
            if self._model is None:
                import torch

                dtype = self.options.dtype
                if dtype == "auto":
                    dtype = "bfloat16" if self.device.startswith("cuda") else "float32"
                t0 = time.monotonic()
                model, tok = load_model(self.options.model, dtype=getattr(torch, dtype))
                model.to(self.device).eval()
                self._model, self._tokenizer = model, tok
                self._prepare_tokenizer()
                log.info("loaded %s on %s (%s) in %.1fs", self.options.model, self.device, dtype, time.monotonic() - t0)
        return self._model, self._tokenizer

    def _prepare_tokenizer(self) -> None:
        tok = self._tokenizer
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token

    # -- the protocol -----------------------------------------------------------------------

    def cache_identity(self) -> dict[str, Any]:
        fingerprint = self._fingerprint
        if fingerprint is None:
            fingerprint = self._compute_fingerprint()
            if self._owns_model:  # files on disk do not change under us; a caller's model may be trained in place
                self._fingerprint = fingerprint
        identity: dict[str, Any] = {"backend": self.name, "model": self.options.model, "weights": fingerprint}
        if self.options.think_tags is not None:  # the stored text is split: another key than the plain text
            identity["think_tags"] = list(self.options.think_tags)
        return identity

    def cache_identity_without_loading(self) -> dict[str, Any] | None:
        """``cache_identity()`` when it needs no model loaded (the fingerprint is known, or hashes a folder on disk; the
        embedded model only once converted), else None: a dry run counts calls without loading a model."""
        if self._fingerprint is None and self._owns_model:
            if is_embedded(self.options.model) and not embedded_is_converted():
                return None
            if not Path(resolve_model(self.options.model)).is_dir():  # a hub id: only the loaded weights tell
                return None
        return self.cache_identity()

    @property
    def streams_tokens(self) -> bool:
        """Whether ``complete(..., sinks=...)`` streams a row's text as it decodes (not with think tags: the text sent
        is split only once the row has ended)."""
        return self.options.think_tags is None

    async def complete(self, requests: list[Request], sinks: Sequence[TokenSink | None] | None = None) -> list[Completion]:
        """Complete every request (same order); ``sinks[i]``, when given, receives request i's tokens as they come."""
        if not requests:
            return []
        state = self._loop_state()
        futures: list[asyncio.Future[Completion]] = [state.loop.create_future() for _ in requests]
        # longest first, so rows of similar length share a batch and padding stays small
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i].prompt or str(requests[i].messages)))
        for i in order:
            state.queue.put_nowait((requests[i], futures[i], sinks[i] if sinks else None))
        try:
            return list(await asyncio.gather(*futures))
        except Interrupted:  # Ctrl-C: the requests that finished go to the caller (to be stored), the rest are not results
            done = {i: f.result() for i, f in enumerate(futures) if f.done() and not f.cancelled() and f.exception() is None}
            raise Interrupted(done) from None

    def complete_sync(self, requests: list[Request]) -> list[Completion]:
        """``complete`` for code without an event loop (STaR's training loop)."""
        return asyncio.run(self.complete(requests))

    async def aclose(self) -> None:
        state = self._states.pop(asyncio.get_running_loop(), None)
        if state is not None:
            state.worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await state.worker
        with self._lock:
            self._graph_decoder = None  # its static caches and CUDA graphs hold GPU memory and the model
            self._score_cache.clear()
        with self._joinable_lock:
            joinable, self._joinable = self._joinable, None
        if joinable is not None:
            await asyncio.to_thread(joinable.close)
        if self._owns_model:  # a model passed in stays with its owner
            with self._lock:
                self._model = self._tokenizer = None
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.empty_cache()

    # -- batching ---------------------------------------------------------------------------

    def _loop_state(self) -> _LoopState:
        """The queue and worker of the running event loop (a backend may serve several loops)."""
        return loop_state(self._states, lambda: _LoopState(self))

    async def _worker(self, queue: asyncio.Queue[_Queued]) -> None:
        if self.mode == "continuous" and self._owns_model:
            await self._join_worker(queue)
            return
        while True:
            limit = None if self.mode == "continuous" else self.options.batch_size
            batch = await take_waiting(queue, self.options.batch_wait_s, limit)  # concurrent callers join this batch
            batch = [q for q in batch if not q[1].done()]  # a caller that left (a streaming client gone) is not generated
            if self.mode == "continuous":  # streamed rows decode apart (see the module docstring)
                parts = [[q for q in batch if q[2] is None], [q for q in batch if q[2] is not None]]
            else:
                parts = [batch]
            for part in parts:
                if part:
                    await self._generate_part(part)

    async def _join_worker(self, queue: asyncio.Queue[_Queued]) -> None:
        """Mode continuous on a model this backend loaded: each request joins the running batch at its next decoding
        step (:mod:`.joinable_batch`).  Sampled rows with a seed (drawn from their own generator, so the same request
        gives the same sample), rows with vLLM's sampling parameters and rows too long for the cache decode apart:
        those that arrive together in one batch of the prefix decoder, as the other modes batch them."""
        await asyncio.to_thread(self.load)
        tasks: set[asyncio.Task[None]] = set()

        def start(work: Any) -> None:
            task = asyncio.ensure_future(work)
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        while True:
            items = await take_waiting(queue, self.options.batch_wait_s)
            apart: list[_Queued] = []
            for item in items:
                if item[1].done():  # a caller that left (a streaming client gone) is not generated
                    continue
                row, request = self._row(item[0]), item[0]
                seeded = request.temperature > 0 and request.seed is not None  # its own generator: reproducible apart
                if seeded or sampling_extras(request) or not self._joinable_batch().fits(len(row.ids), request.max_tokens):
                    apart.append(item)
                else:
                    start(self._join_one(item, row))
            if apart:
                start(self._generate_part(apart, apart=True))

    async def _join_one(self, item: _Queued, row: _Row) -> None:
        request, fut, sink = item
        model, tok = self._model, self._tokenizer
        cancelled = []

        def watched(token: int) -> bool:
            if sink is not None and sink(token) is False:
                cancelled.append(token)
                return False
            return True

        def stopped(ids: list[int]) -> bool:
            text = tok.decode(ids, skip_special_tokens=self.options.skip_special_tokens)
            return stop_index(text, request.stop) is not None

        t0 = time.monotonic()
        await asyncio.to_thread(self._apply_threads)  # threads='auto' may time the model first
        try:
            ids = await asyncio.wrap_future(self._joinable_batch().submit(
                row.ids, request.max_tokens, temperature=request.temperature, top_p=request.top_p,
                end_ids=_eos_ids(model, tok), sink=watched if sink is not None else None,
                stopped=stopped if request.stop else None))
        except Interrupted:
            if not fut.done():
                fut.set_exception(Interrupted())
            return
        except Exception as e:
            self.counters.errors += 1
            self.counters.failed += 1
            if not fut.done():
                fut.set_exception(BackendError(f"{self.options.model}: generation failed: {type(e).__name__}: {e}",
                                               backend=self.name, attempts=1))
            return
        completion = self._finish(row, ids, time.monotonic() - t0)
        self.counters.cancelled += len(cancelled)
        self._count([completion])
        if not fut.done():
            fut.set_result(completion)

    def _joinable_batch(self) -> JoinableBatch:
        with self._joinable_lock:  # not self._lock: a generate apart holds that one for its whole batch
            if self._joinable is None:
                self._model.eval()
                self._joinable = JoinableBatch(self._model, self._tokenizer, device=self.device)
            return self._joinable

    async def _generate_part(self, batch: list[_Queued], apart: bool = False) -> None:
        """Generate one batch from the queue in a thread and settle its callers' futures."""
        sinks = [sink for _, _, sink in batch]
        try:
            results = await asyncio.to_thread(self.generate, [r for r, _, _ in batch], sinks if any(sinks) else None, apart)
        except Interrupted as stopped:  # Ctrl-C between decoding steps: finished rows are results, the others stop
            for i, (_, fut, _) in enumerate(batch):
                if not fut.done():
                    if i in stopped.completions:
                        fut.set_result(stopped.completions[i])
                    else:
                        fut.set_exception(Interrupted())
            return
        except Exception as e:  # surfaced to every caller of this batch
            self.counters.errors += 1
            self.counters.failed += len(batch)
            log.debug("generation failed", exc_info=True)
            error = BackendError(
                f"{self.options.model}: generation failed: {type(e).__name__}: {e}", backend=self.name, attempts=1
            )
            for _, fut, _ in batch:
                if not fut.done():
                    fut.set_exception(error)
            return
        for (_, fut, _), result in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(result)

    # -- generation (runs in a worker thread) -----------------------------------------------

    def generate(self, requests: list[Request], sinks: Sequence[TokenSink | None] | None = None,
                 apart: bool = False) -> list[Completion]:
        """Generate synchronously, without the queue (``batch_size`` rows per call): one Completion per request, in order.

        ``sinks[i]`` (optional) receives request i's tokens as they are chosen; one returning False stops that row.
        ``apart``: in modes continuous and graph, decode with the prefix decoder (per-row generators) all the same."""
        model, tok = self.load()
        rows = [self._row(r) for r in requests]
        streams = _Sinks(sinks, {*_eos_ids(model, tok), tok.pad_token_id}) if sinks else None
        # continuous batching and the graph decoder hand back whole rows: a streamed request decodes with prefix
        # so do rows with vLLM's sampling parameters (top_k, min_p, ...: applied by _RowSampler, which those modes lack)
        apart = apart or streams is not None or any(sampling_extras(r) for r in requests)
        mode = "prefix" if apart and self.mode in ("continuous", "graph") else self.mode
        t0 = time.monotonic()
        unfinished: set[int] = set()  # rows cut off by Ctrl-C (interrupt.requested) between decoding steps
        with self._lock, interrupt.decoding():
            if interrupt.requested():
                raise Interrupted({})
            self._apply_threads()
            was_training = model.training  # a model handed over mid-training: no dropout while generating
            model.eval()
            try:
                if mode == "continuous":
                    outputs = self._generate_continuous(rows)
                elif mode == "prefix":
                    outputs = self._generate_prefix(rows, unfinished, streams)
                elif mode == "graph":
                    outputs = self._generate_graph(rows, unfinished)
                else:
                    outputs = []
                    for start in range(0, len(rows), self.options.batch_size):
                        chunk = rows[start : start + self.options.batch_size]
                        if interrupt.requested():
                            outputs += [[] for _ in chunk]
                            unfinished.update(range(start, start + len(chunk)))
                            continue
                        outputs += self._generate_padded(chunk, streams, start)
                        if interrupt.requested():
                            unfinished.update(start + i for i in self._cut_off(chunk, outputs[start:]))
            finally:
                model.train(was_training)
        latency = time.monotonic() - t0
        log.debug("generated %d rows (%s) in %.2fs", len(rows), self.mode, latency)
        completions = [self._finish(row, ids, latency) for row, ids in zip(rows, outputs, strict=True)]
        if streams is not None:
            self.counters.cancelled += len(streams.cancelled)
        if unfinished:
            kept = {i: c for i, c in enumerate(completions) if i not in unfinished}
            self._count(list(kept.values()))
            raise Interrupted(kept)
        self._count(completions)
        return completions

    def _count(self, completions: list[Completion]) -> None:
        self.counters.requests += len(completions)
        self.counters.completed += len(completions)
        self.counters.prompt_tokens += sum(c.prompt_tokens for c in completions)
        self.counters.completion_tokens += sum(c.completion_tokens for c in completions)

    def _cut_off(self, rows: list[_Row], outputs: list[list[int]]) -> list[int]:
        """The rows of a padded batch that Ctrl-C stopped before they ended (no EOS or pad, no stop string, short of
        their max_tokens)."""
        tok = self._tokenizer
        ends = {*_eos_ids(self._model, tok), tok.pad_token_id}
        cut = []
        for i, (row, ids) in enumerate(zip(rows, outputs, strict=True)):
            if len(ids) >= row.request.max_tokens or any(t in ends for t in ids):
                continue
            if row.request.stop and stop_index(tok.decode(ids, skip_special_tokens=True), row.request.stop) is not None:
                continue
            cut.append(i)
        return cut

    def _apply_threads(self) -> None:
        """``torch.set_num_threads`` before a CPU generate, per the ``threads`` option ('auto': measured)."""
        if self.options.threads is None or not self.device.startswith("cpu"):
            return
        import torch

        if self.options.threads == "auto":
            if self._threads is None:
                self._threads = MeasuredThreads(self._forward_step, thread_cap())
            n = self._threads.choose()
        else:
            n = int(self.options.threads)
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
            log.debug("torch CPU threads: %d (option %s)", n, self.options.threads)

    @property
    def thread_timings(self) -> dict[int, float]:
        """threads='auto': seconds of one forward pass at each thread count, as last measured ({} before)."""
        return dict(self._threads.timings) if self._threads is not None else {}

    def _forward_step(self) -> None:
        """What threads='auto' times: one forward pass of 4 rows of 16 tokens (a small batch being decoded)."""
        import torch

        model = self._model
        was_training = model.training  # a model handed over mid-training: measured as it generates, in eval mode
        model.eval()
        try:
            with torch.inference_mode():
                model(input_ids=torch.full((4, 16), self._tokenizer.eos_token_id or 0, device=self.device))
        finally:
            model.train(was_training)

    def _row(self, request: Request) -> _Row:
        tok = self._tokenizer
        if request.messages:
            # A final assistant message is the start of the answer: the model continues it (unless the request says
            # otherwise, as serve-model's continue_final_message / add_generation_prompt do, with vLLM's defaults)
            prefill = request.continue_final_message
            if prefill is None:
                prefill = request.messages[-1].get("role") == "assistant"
            opened = (not prefill) if request.add_generation_prompt is None else request.add_generation_prompt and not prefill
            text = tok.apply_chat_template(
                list(request.messages), add_generation_prompt=opened, continue_final_message=prefill, tokenize=False
            )
            ids = tok(text, add_special_tokens=False)["input_ids"]
        elif request.prompt_ids is not None:  # token ids given by the client: fed as they are
            ids = list(request.prompt_ids)
            text = tok.decode(ids, skip_special_tokens=False)
        else:
            text = request.prompt
            ids, _ = prompt_token_ids(tok, text)  # the same ids STaR trains on
        return _Row(request, text, list(ids))

    def _generate_padded(self, rows: list[_Row], streams: _Sinks | None = None, offset: int = 0) -> list[list[int]]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        model, tok = self._model, self._tokenizer
        width = max(len(r.ids) for r in rows)
        input_ids = torch.full((len(rows), width), tok.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):  # left padding
            input_ids[i, width - len(row.ids) :] = torch.tensor(row.ids)
            attention[i, width - len(row.ids) :] = 1
        config = GenerationConfig(  # type: ignore[no-untyped-call]  # transformers' config takes **kwargs
            max_new_tokens=max(r.request.max_tokens for r in rows),
            do_sample=False,  # sampled rows are drawn by _RowSampler and arrive here as one-hot scores
            eos_token_id=_eos_ids(model, tok),
            pad_token_id=tok.pad_token_id,
        )
        if self.mode == "static":
            config.cache_implementation = "static"
        processors = LogitsProcessorList()
        sampler = _RowSampler(rows, self.device, [*_eos_ids(model, tok), tok.pad_token_id])
        if sampler.active:
            processors.append(sampler)
        stopping = StoppingCriteriaList([_RowStop(rows, width, tok, streams, offset), _InterruptStop()])
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention.to(self.device),
                generation_config=config,
                logits_processor=processors,
                stopping_criteria=stopping,
            )
        return [out[i, width:].tolist() for i in range(len(rows))]

    def _generate_prefix(self, rows: list[_Row], unfinished: set[int] | None = None,
                         streams: _Sinks | None = None) -> list[list[int]]:
        sampler = _RowSampler(rows, self.device, [*_eos_ids(self._model, self._tokenizer), self._tokenizer.pad_token_id])
        return prefix_decode.decode(
            self._model,
            self._tokenizer,
            [prefix_decode.Row(r.ids, r.request.max_tokens, r.request.stop) for r in rows],
            batch_size=self.options.batch_size,
            eos_ids=_eos_ids(self._model, self._tokenizer),
            pick=sampler.pick,
            should_stop=interrupt.requested,
            unfinished=unfinished,
            on_token=streams,
        )

    def _generate_graph(self, rows: list[_Row], unfinished: set[int] | None = None) -> list[list[int]]:
        if self._graph_decoder is None or self._graph_decoder.model is not self._model:
            self._graph_decoder = graph_decode.GraphDecoder(self._model, self._tokenizer, _eos_ids(self._model, self._tokenizer))
        first = next((r.request for r in rows if r.request.temperature > 0), None)
        out: list[list[int]] = self._graph_decoder.decode(
            [graph_decode.Row(r.ids, r.request.max_tokens, r.request.stop, r.request.temperature, r.request.top_p) for r in rows],
            batch_size=self.options.batch_size,
            seed=request_seed(first.seed, first.sample_index) if first is not None else 0,
            should_stop=interrupt.requested,
            unfinished=unfinished,
        )
        return out

    def _generate_continuous(self, rows: list[_Row]) -> list[list[int]]:
        import torch
        from transformers import GenerationConfig

        model, tok = self._model, self._tokenizer
        outputs: list[list[int]] = [[] for _ in rows]
        groups: dict[tuple[float, float], list[int]] = {}
        for i, row in enumerate(rows):
            groups.setdefault((row.request.temperature, row.request.top_p), []).append(i)
        for (temperature, top_p), members in groups.items():
            sampled = temperature > 0
            config = GenerationConfig(  # type: ignore[no-untyped-call]  # transformers' config takes **kwargs
                max_new_tokens=max(rows[i].request.max_tokens for i in members),
                do_sample=sampled,
                temperature=temperature if sampled else None,
                top_p=top_p if sampled else None,
                eos_token_id=_eos_ids(model, tok),
                pad_token_id=tok.pad_token_id,
            )
            if sampled:
                first = rows[members[0]].request
                torch.manual_seed(request_seed(first.seed, first.sample_index))
            # not under inference_mode: generate_batch's own thread updates its static tensors in place
            results = model.generate_batch(inputs=[rows[i].ids for i in members], generation_config=config, progress_bar=False)
            ordered = list(results.values())  # generate_batch returns them in input order
            if len(ordered) != len(members) or any(r.error for r in ordered):
                errors = [r.error for r in ordered if r.error]
                raise RuntimeError(f"continuous batching returned {len(ordered)}/{len(members)} results {errors[:1]}")
            for i, result in zip(members, ordered, strict=True):
                outputs[i] = list(result.generated_tokens)
        return outputs

    def _finish(self, row: _Row, ids: list[int], latency: float) -> Completion:
        tok = self._tokenizer
        request = row.request
        ids = ids[: request.max_tokens]
        finish = "length"
        # a row ends at its EOS; padding after a row stopped early (stop string) ends it as well
        ends = {*_eos_ids(self._model, tok), tok.pad_token_id}
        ended: list[int] = []  # the end token, scored by logprobs like any generated token (as vLLM does)
        for j, t in enumerate(ids):
            if t in ends:
                ids, ended, finish = ids[:j], [t], "stop"
                break
        text = tok.decode(ids, skip_special_tokens=self.options.skip_special_tokens)
        matched = stop_match(text, request.stop)
        cut = matched[0] if matched is not None else None
        if cut is not None:
            text, finish = text[:cut], "stop"
            # count only the tokens that produced the kept text
            while ids and len(tok.decode(ids[:-1], skip_special_tokens=self.options.skip_special_tokens)) >= cut:
                ids = ids[:-1]
        reasoning, reasoning_tokens = None, 0
        if self.options.think_tags is not None:
            text, reasoning, reasoning_tokens = self._split_thinking(row, ids, text)
        return Completion(
            text=text,
            prompt_tokens=len(row.ids),
            completion_tokens=len(ids),
            finish_reason=finish,
            latency_s=latency,
            attempts=1,
            # the token ids of prompt and completion: serve-model's logprobs score exactly these
            # stop_reason (vLLM's name): the stop string the text was cut at, None for an end token or the length
            raw={"mode": self.mode, "device": self.device, "prompt_ids": row.ids, "token_ids": ids + ended if cut is None else ids,
                 "stop_reason": matched[1] if matched is not None else None},
            reasoning=reasoning,
            reasoning_tokens=reasoning_tokens,
            reasoning_source="tags" if reasoning is not None else "",
        )

    def _split_thinking(self, row: _Row, ids: list[int], text: str) -> tuple[str, str | None, int]:
        """(answer, reasoning, reasoning tokens): the text inside think tags is the reasoning, counted in generated tokens.

        A prompt that ends inside an open thought (a template that adds the start tag) makes the whole output reasoning
        until the end tag.  The reasoning tokens are the generated tokens up to and including the end tag.
        """
        tags = self.options.think_tags
        assert tags is not None
        started = row.text.rstrip().endswith(tags[0])
        split = split_reasoning(text, tags, started=started)
        if split.reasoning is None:
            return text, None, 0
        if split.truncated:
            return "", split.reasoning, len(ids)
        tok = self._tokenizer
        skip = self.options.skip_special_tokens
        end_at = text.find(tags[1]) + len(tags[1])
        lo, hi = 0, len(ids)  # the fewest tokens whose text reaches past the end tag (decoded length grows with n)
        while lo < hi:
            mid = (lo + hi) // 2
            if len(tok.decode(ids[:mid], skip_special_tokens=skip)) >= end_at:
                hi = mid
            else:
                lo = mid + 1
        return split.answer, split.reasoning, lo

    # -- scoring (serve-model's logprobs and echo) -----------------------------------------------

    def token_logprobs(self, ids: list[int], top: int = 0) -> list[tuple[float | None, list[tuple[int, float]]]]:
        """Per token of ``ids``: its log-probability given the tokens before it (None for the first) and the ``top``
        most likely tokens at that place with theirs, in float32 log-softmax (as lm-eval's ``hf`` model scores)."""
        return self.token_logprobs_batch([ids], top)[0]

    def token_logprobs_batch(self, batch: list[list[int]], top: int = 0) -> list[list[tuple[float | None, list[tuple[int, float]]]]]:
        """:meth:`token_logprobs` of every token list in ``batch`` from one forward pass, the lists padded on the right
        (a causal model's positions start at 0 either way, and no real token attends to the padding).

        A list's scores need the model's output at every token but its last; where those tokens begin another list
        (the choices of one multiple-choice question: the same context, a different last token), the longer one's
        forward pass serves both, as lm-eval's ``hf`` model shares them.  On a model this backend loaded (one that
        no one trains meanwhile: serve-model's), the outputs of the last passes are kept (:data:`SCORE_CACHE_BYTES`),
        so the choices of a question sent one request each are scored by one pass too."""
        import torch

        model, tok = self.load()
        out: list[list[tuple[float | None, list[tuple[int, float]]]]] = [[] for _ in batch]
        rows = [i for i, ids in enumerate(batch) if ids]
        if not rows:
            return out
        with self._lock, torch.inference_mode():
            cached = self._score_cache if self._owns_model else {}
            known = list(cached.items())

            def found(x: tuple[int, ...]) -> Any:
                return next((logp for c, logp in known if c[: len(x)] == x and len(c) >= len(x)), None)

            inputs = sorted({tuple(batch[i][:-1]) for i in rows if found(tuple(batch[i][:-1])) is None}, key=len, reverse=True)
            carriers: list[tuple[int, ...]] = []  # the inputs that begin no longer one: each gets a row of the pass
            for x in inputs:
                if not any(c[: len(x)] == x for c in carriers):
                    carriers.append(x)
            if carriers:
                width = max(1, max(len(c) for c in carriers))
                pad = tok.pad_token_id if tok.pad_token_id is not None else 0
                input_ids = torch.full((len(carriers), width), pad, dtype=torch.long)
                mask = torch.zeros((len(carriers), width), dtype=torch.long)
                for r, c in enumerate(carriers):
                    input_ids[r, : len(c)] = torch.tensor(c, dtype=torch.long)
                    mask[r, : len(c)] = 1
                logits = model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device)).logits
                fresh = [(c, torch.log_softmax(logits[r, : len(c)].float(), dim=-1)) for r, c in enumerate(carriers)]
                known = fresh + known
                if self._owns_model:
                    self._keep_scores(fresh)
            for i in rows:
                ids = batch[i]
                logp = found(tuple(ids[:-1]))[: len(ids) - 1]
                chosen = logp.gather(1, torch.tensor(ids[1:], device=logp.device)[:, None])[:, 0].tolist()
                tops: list[list[tuple[int, float]]] = [[] for _ in chosen]
                if top > 0:
                    values, indices = logp.topk(min(top, logp.shape[-1]), dim=-1)
                    tops = [list(zip(k, v, strict=True)) for k, v in zip(indices.tolist(), values.tolist(), strict=True)]
                out[i] = [(None, []), *zip(chosen, tops, strict=True)]
        return out

    def next_token_completions(self, requests: list[Request]) -> list[Completion]:
        """Greedy one-token completions from a scoring pass: the most likely next token of each prompt (what
        ``generate`` with temperature 0 and max_tokens 1 gives).  lm-eval's log-likelihood requests ask for one token
        with echo and logprobs; scored this way the prompt runs once, the scores of prompt and token come from the same
        pass (kept on a model the backend loaded)."""
        self.load()
        rows = [self._row(r) for r in requests]
        t0 = time.monotonic()
        scores = self.token_logprobs_batch([[*row.ids, 0] for row in rows], top=1)  # the last place: the next token
        latency = time.monotonic() - t0
        completions = [self._finish(row, [s[-1][1][0][0]], latency) for row, s in zip(rows, scores, strict=True)]
        self._count(completions)
        return completions

    def _keep_scores(self, fresh: list[tuple[tuple[int, ...], Any]]) -> None:
        """Keep the newest passes' log-probabilities, the oldest dropped past SCORE_CACHE_BYTES (under self._lock)."""
        for c, logp in fresh:
            self._score_cache[c] = logp
            self._score_cache.move_to_end(c)
        size = sum(v.numel() * v.element_size() for v in self._score_cache.values())
        while self._score_cache and size > SCORE_CACHE_BYTES:
            _, old = self._score_cache.popitem(last=False)
            size -= old.numel() * old.element_size()

    def decode_tokens(self, ids: list[int]) -> list[str]:
        """Each token's own text (special tokens included), as logprobs name them."""
        _, tok = self.load()
        return [tok.decode([i], skip_special_tokens=False) for i in ids]

    def decode_text(self, ids: list[int]) -> str:
        """The text of ``ids`` (an echoed token-id prompt)."""
        _, tok = self.load()
        text: str = tok.decode(ids, skip_special_tokens=False)
        return text

    def decode_generated(self, ids: list[int]) -> str:
        """The text of generated ``ids`` as a completion's text is decoded (a streamed row's text so far)."""
        _, tok = self.load()
        text: str = tok.decode(ids, skip_special_tokens=self.options.skip_special_tokens)
        return text

    def vocab_size(self) -> int:
        """How many token ids the model reads (its input embedding's rows): the valid ids are 0 to vocab_size - 1."""
        model, _ = self.load()
        return int(model.get_input_embeddings().num_embeddings)

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The token ids of ``text`` (serve-model's /tokenize)."""
        _, tok = self.load()
        return list(tok(text, add_special_tokens=add_special_tokens)["input_ids"])

    def tokenizer_info(self) -> dict[str, Any]:
        """The special tokens, chat template and context length (serve-model's /tokenizer_info, as vLLM's)."""
        _, tok = self.load()
        template = tok.chat_template if isinstance(tok.chat_template, str) else None
        return {"tokenizer_class": type(tok).__name__, "eos_token": tok.eos_token, "bos_token": tok.bos_token,
                "pad_token": tok.pad_token, "chat_template": template, "model_max_length": self.max_context()}

    def prompt_tokens(self, request: Request) -> int:
        """How many tokens the model is fed for ``request``'s prompt (chat template applied)."""
        return len(self.prompt_ids(request))

    def prompt_ids(self, request: Request) -> list[int]:
        """The token ids the model is fed for ``request``'s prompt (chat template applied), as generate feeds them."""
        self.load()
        return self._row(request).ids

    def max_context(self) -> int | None:
        """The model's context length (max_position_embeddings), None when its config does not say."""
        model, _ = self.load()
        return getattr(model.config, "max_position_embeddings", None)

    # -- identity ---------------------------------------------------------------------------

    def _compute_fingerprint(self) -> str:
        if not self._owns_model:  # in memory, maybe mid-training: hash the weights themselves
            return _parameter_fingerprint(self._model)
        path = Path(resolve_model(self.options.model))
        if path.is_dir():
            return folder_fingerprint(path)
        return _parameter_fingerprint(self.load()[0])


def _default_device() -> str:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is in the models extra
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def _eos_ids(model: Any, tok: Any) -> list[int]:
    """End-of-sequence ids of the tokenizer and the model's generation config."""
    ids = [tok.eos_token_id] if tok.eos_token_id is not None else []
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for i in configured if isinstance(configured, list) else [configured]:
        if i is not None and i not in ids:
            ids.append(i)
    return ids


def stop_index(text: str, stops: tuple[str, ...]) -> int | None:
    matched = stop_match(text, stops)
    return None if matched is None else matched[0]


def stop_match(text: str, stops: tuple[str, ...]) -> tuple[int, str] | None:
    """(where, which) of the stop string that cuts ``text``: the earliest, the first listed of those at one place."""
    hits = [(text.index(s), i) for i, s in enumerate(stops) if s and s in text]
    if not hits:
        return None
    at, i = min(hits)
    return at, stops[i]


def folder_fingerprint(path: Path, *, memo: bool = True) -> str:
    """sha256 over config.json and every safetensors file (size + content), memoised on disk by mtime (``memo=False``:
    hashed again whatever the memo says, as an audit does: a file rewritten with its old size and mtime keeps its memo)."""
    files = sorted([path / "config.json", *path.glob("*.safetensors")])
    stamp = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.exists()]
    memo_file = cache_dir("fingerprints") / (hashlib.sha256(json.dumps([str(path.resolve()), stamp]).encode()).hexdigest() + ".txt")
    if memo and memo_file.exists():
        return memo_file.read_text().strip()
    h = hashlib.sha256()
    for f in files:
        if not f.exists():
            continue
        h.update(f"{f.name}:{f.stat().st_size}\n".encode())
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    value = "sha256:" + h.hexdigest()
    with atomic_write(memo_file) as fh:
        fh.write(value)
    return value


def _parameter_fingerprint(model: Any) -> str:
    """A hash of the config and up to 4096 evenly spaced values of every parameter (changes with any training step)."""
    import torch

    h = hashlib.sha256(model.config.to_json_string(use_diff=False).encode())
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.detach().reshape(-1)
            step = max(1, flat.numel() // 4096)
            h.update(name.encode())
            h.update(flat[::step].float().cpu().numpy().tobytes())
    return "params-sha256:" + h.hexdigest()


class _RowSampler:
    """Logits processor: each row's next token, by that row's own request.

    Per row, transformers' logits processors in their order: ``repetition_penalty`` (over the prompt and the tokens
    generated so far), the end tokens held back until ``min_tokens`` (all of them with ``ignore_eos``), then for a
    sampled row the temperature, ``top_k``, ``top_p`` and ``min_p``, and the draw with the row's own generator seeded from
    ``(seed, sample_index)``.  A greedy row whose request sets none of these passes through (generate takes its argmax);
    a processed greedy row gets its processed scores; a sampled row's scores become 0 for the drawn token and -inf
    elsewhere, so the argmax is the draw.  The sampler keeps each row's tokens (what it picks is what comes next).
    """

    def __init__(self, rows: list[_Row], device: str, end_ids: list[int]) -> None:
        import torch
        from transformers import (
            MinNewTokensLengthLogitsProcessor,
            MinPLogitsWarper,
            RepetitionPenaltyLogitsProcessor,
            TopKLogitsWarper,
        )

        self.requests = [row.request for row in rows]
        self.generators: list[Any] = []
        self.before: list[list[Any]] = []  # processors of the raw scores (greedy rows too)
        self.after: list[list[Any]] = []  # warpers of a sampled row's scores, after its temperature
        for row in rows:
            r = row.request
            g = None
            if r.temperature > 0:
                g = torch.Generator(device=device)
                g.manual_seed(request_seed(r.seed, r.sample_index))
            self.generators.append(g)
            before: list[Any] = []
            if r.repetition_penalty != 1.0:
                before.append(RepetitionPenaltyLogitsProcessor(r.repetition_penalty))
            held = r.max_tokens if r.ignore_eos else r.min_tokens
            if held > 0:
                before.append(MinNewTokensLengthLogitsProcessor(len(row.ids), held, sorted(set(end_ids)), device=device))
            after: list[Any] = []
            if r.top_k > 0:
                after.append(TopKLogitsWarper(r.top_k))
            if r.min_p > 0:
                after.append(MinPLogitsWarper(r.min_p))
            self.before.append(before)
            self.after.append(after)
        self.history = [list(row.ids) for row in rows] if any(self.before) else []

    @property
    def active(self) -> bool:
        """Whether any row needs this sampler (a sampled row, or a processor)."""
        return any(g is not None for g in self.generators) or any(self.before)

    def pick(self, scores: Any, rows: list[int]) -> Any:
        """Next token of each row of ``scores`` (row j of scores is request ``rows[j]``): argmax or its own draw."""
        return self._draw(scores, rows).argmax(-1)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        return self._draw(scores, list(range(len(self.requests))))

    def _draw(self, scores: Any, rows: list[int]) -> Any:
        import torch

        if not self.active:
            return scores
        out = scores.clone()
        for j, i in enumerate(rows):
            r, g = self.requests[i], self.generators[i]
            row = scores[j : j + 1]
            if self.before[i]:
                ids = torch.tensor([self.history[i]], device=scores.device)
                for processor in self.before[i]:
                    row = processor(ids, row)
                out[j] = row[0]
            if g is None:
                continue
            logits = row.float() / r.temperature
            for warper in self.after[i]:
                logits = warper(None, logits)
            probs = torch.softmax(logits[0], dim=-1)
            if r.top_p < 1.0:
                sorted_probs, idx = torch.sort(probs, descending=True)
                keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < r.top_p
                mask = torch.zeros_like(probs, dtype=torch.bool).scatter(0, idx, keep)
                probs = torch.where(mask, probs, torch.zeros_like(probs))
            token = torch.multinomial(probs, 1, generator=g)
            out[j] = float("-inf")
            out[j, token] = 0.0
        if self.history:
            for i, token in zip(rows, out.argmax(-1).tolist(), strict=True):
                self.history[i].append(token)
        return out


class _InterruptStop:
    """Stopping criterion: every row stops at the next decoding step once Ctrl-C asked (:mod:`thoughtsource.interrupt`)."""

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        return torch.full((input_ids.shape[0],), interrupt.requested(), dtype=torch.bool, device=input_ids.device)


class _Sinks:
    """The streamed rows' sinks of one generate call: ``self(i, token)`` hands row i's token to its sink and says
    whether the row goes on (False once its sink has returned False: the row is in ``cancelled``)."""

    def __init__(self, sinks: Sequence[TokenSink | None], ends: set[int]) -> None:
        self.sinks, self.ends = list(sinks), ends
        self.cancelled: set[int] = set()

    def __call__(self, i: int, token: int) -> bool:
        sink = self.sinks[i]
        if sink is None or i in self.cancelled:
            return i not in self.cancelled
        if sink(token) is False:
            self.cancelled.add(i)
            return False
        return True


class _RowStop:
    """Stopping criterion with a per-row verdict: the row's own max_tokens and stop strings.

    It also streams: called once per decoding step, it hands each streamed row's new token to its sink (rows
    ``offset...`` of the generate call) until the row ends (an end token; pad follows a row that stopped), and stops
    a row at once when its sink says so (a streamer would see the token only after this step's verdict)."""

    def __init__(self, rows: list[_Row], width: int, tok: Any, streams: _Sinks | None = None, offset: int = 0) -> None:
        self.max_new = [r.request.max_tokens for r in rows]
        self.stops = [r.request.stop for r in rows]
        self.width = width
        self.tok = tok
        self.streams, self.offset = streams, offset
        self.ended: set[int] = set()

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        n = input_ids.shape[1] - self.width
        last = input_ids[:, -1].tolist() if self.streams is not None else []
        done = []
        for i, (m, stops) in enumerate(zip(self.max_new, self.stops, strict=True)):
            stop = n >= m
            if self.streams is not None and i not in self.ended:
                if last[i] in self.streams.ends:
                    self.ended.add(i)
                elif not self.streams(self.offset + i, last[i]):
                    self.ended.add(i)
                    stop = True
            if not stop and stops:
                text = self.tok.decode(input_ids[i, self.width :], skip_special_tokens=True)
                stop = stop_index(text, stops) is not None
            done.append(stop)
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)
