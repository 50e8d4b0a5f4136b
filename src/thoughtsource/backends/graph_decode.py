"""Batched decoding with a static KV cache; on CUDA one decoding step is captured once as a CUDA graph and replayed.

The ``transformers`` backend's ``mode="graph"`` (STaR: ``generation.decoder: graph``).  Per batch of rows:

* the rows are left-padded to one width ``W`` (rounded up to :data:`ROUND` tokens, so batches of other prompts reuse
  the same buffers and graph), and the whole batch is prefilled once into a :class:`transformers.StaticCache` of
  ``W + max_new`` positions, with an explicit 4-D attention mask (causal, pads masked) and position ids that skip the
  pads, so every row sees exactly its own tokens at their own positions;
* each decoding step is a fixed-shape forward of one token per row: the token, its position id, its cache position and
  the mask live in preallocated device tensors that the step itself updates in place (nothing of the step touches the
  host);
* the stop checks stay on the device: EOS ids and each row's own ``max_new`` set a ``done`` flag, a finished row keeps
  decoding pads (fixed shapes) that are dropped afterwards; the host looks at ``done`` only every ``sync_every`` steps,
  and then also checks stop strings on the rows' last tokens;
* greedy rows take the argmax; sampled rows (temperature, top_p) draw on the device from one ``torch.Generator``
  seeded per batch, so their draws are not those of the per-row generators of the other modes.

On CUDA, for greedy batches, the step is captured as a ``torch.cuda.CUDAGraph`` after warm-up steps on a side stream
(the rules: no host syncs or ``.item()`` inside the step, static shapes and addresses, the cache position a device
tensor updated in place); sampled batches and the CPU run the same step eagerly.  Greedy outputs are the prefix
decoder's in float32 on the CPU (``tests/backends/test_graph_decode.py``).
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .prefix_decode import Row as PrefixRow

#: prompt widths and max_new are rounded up to a multiple of this, so buffers and graphs are reused across batches
ROUND = 32
#: decoding steps between two looks of the host at the device's ``done`` flags (and the stop strings)
SYNC_EVERY = 16
#: tokens decoded to check for stop strings (each stop string must fit; they are a few tokens long)
STOP_WINDOW = 8 + SYNC_EVERY
#: buffers (and graphs) kept per decoder, one per (batch, width, length, sampled)
MAX_SLOTS = 4


@dataclass
class Row(PrefixRow):
    """A prefix decoder's row (prompt ids, max new tokens, stop strings) with its sampling settings."""

    temperature: float = 0.0
    top_p: float = 1.0


def _round_up(n: int, k: int = ROUND) -> int:
    return -(-n // k) * k


class _Slot:
    """The static buffers of one batch shape: the KV cache, the step's inputs and outputs, and its CUDA graph."""

    def __init__(self, model: Any, b: int, width: int, length: int, sampled: bool, eos_ids: Sequence[int],
                 device: Any) -> None:
        import torch
        from transformers import StaticCache

        self.b, self.width, self.length, self.any_sampled = b, width, length, sampled
        dtype = next(model.parameters()).dtype
        self.neg = torch.finfo(dtype).min
        self.cache = StaticCache(config=model.config, max_cache_len=length)
        self.ids = torch.zeros((b, 1), dtype=torch.long, device=device)
        self.pos = torch.zeros((b, 1), dtype=torch.long, device=device)
        self.cache_pos = torch.zeros((1,), dtype=torch.long, device=device)
        self.mask = torch.zeros((b, 1, 1, length), dtype=dtype, device=device)
        self.out = torch.zeros((b, length - width), dtype=torch.long, device=device)
        self.step = torch.zeros((1,), dtype=torch.long, device=device)
        self.done = torch.zeros((b,), dtype=torch.bool, device=device)
        self.max_new = torch.zeros((b,), dtype=torch.long, device=device)
        self.temperature = torch.ones((b,), dtype=torch.float32, device=device)
        self.top_p = torch.ones((b,), dtype=torch.float32, device=device)
        self.sampled = torch.zeros((b,), dtype=torch.bool, device=device)
        self.eos = torch.tensor(list(eos_ids) or [-1], dtype=torch.long, device=device)
        self.generator = torch.Generator(device=device)
        self.graph: Any = None


class GraphDecoder:
    """Static-cache decoding of a model, keeping the buffers (and CUDA graphs) of the last :data:`MAX_SLOTS` shapes."""

    def __init__(self, model: Any, tokenizer: Any, eos_ids: Sequence[int], *, use_graph: bool | None = None,
                 sync_every: int = SYNC_EVERY) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.eos_ids = list(eos_ids)
        self.device = next(model.parameters()).device
        self.use_graph = self.device.type == "cuda" if use_graph is None else use_graph
        self.sync_every = sync_every
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.takes_cache_position = "cache_position" in inspect.signature(model.forward).parameters
        self.slots: OrderedDict[tuple[int, int, int, bool], _Slot] = OrderedDict()

    # -- the public entry -------------------------------------------------------------------

    def decode(self, rows: Sequence[Row], *, batch_size: int, seed: int = 0, should_stop: Callable[[], bool] | None = None,
               unfinished: set[int] | None = None) -> list[list[int]]:
        """Generated token ids per row, ending with the EOS token when the row ended there; may run past a stop string
        (the caller cuts the text).  Rows of similar prompt length are batched together.  ``should_stop`` is checked
        between batches and at each host sync; rows it cuts off go to ``unfinished``."""
        import torch

        out: list[list[int]] = [[] for _ in rows]
        order = sorted(range(len(rows)), key=lambda i: len(rows[i].ids))
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                if should_stop is not None and should_stop():
                    if unfinished is not None:
                        unfinished.update(batch)
                    continue
                cut: set[int] = set()
                results = self._decode_batch([rows[i] for i in batch], seed + start, should_stop, cut)
                for i, ids in zip(batch, results, strict=True):
                    out[i] = ids
                if unfinished is not None:
                    unfinished.update(batch[j] for j in cut)
        return out

    # -- one batch ---------------------------------------------------------------------------

    def _slot(self, b: int, width: int, length: int, sampled: bool) -> _Slot:
        key = (b, width, length, sampled)
        slot = self.slots.pop(key, None)
        if slot is None:
            slot = _Slot(self.model, b, width, length, sampled, self.eos_ids, self.device)
            if len(self.slots) >= MAX_SLOTS:
                self.slots.popitem(last=False)
        self.slots[key] = slot
        return slot

    def _decode_batch(self, rows: list[Row], seed: int, should_stop: Callable[[], bool] | None,
                      cut: set[int]) -> list[list[int]]:
        import torch

        b = len(rows)
        longest = max(len(r.ids) for r in rows)
        max_new = max(r.max_new for r in rows)
        width = _round_up(longest)
        length = width + _round_up(max_new)
        sampled = any(r.temperature > 0 for r in rows)
        s = self._slot(b, width, length, sampled)
        dev = self.device

        # per-row settings
        s.max_new.copy_(torch.tensor([r.max_new for r in rows]))
        s.sampled.copy_(torch.tensor([r.temperature > 0 for r in rows]))
        s.temperature.copy_(torch.tensor([r.temperature if r.temperature > 0 else 1.0 for r in rows]))
        s.top_p.copy_(torch.tensor([r.top_p for r in rows]))
        s.generator.manual_seed(seed)

        if self.use_graph and not sampled and s.graph is None:
            self._capture(s)

        # prefill: the whole batch, left-padded, in one forward
        ids = torch.full((b, width), self.pad, dtype=torch.long)
        valid = torch.zeros((b, width), dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, width - len(r.ids):] = torch.tensor(r.ids)
            valid[i, width - len(r.ids):] = True
        ids, valid = ids.to(dev), valid.to(dev)
        positions = (valid.long().cumsum(-1) - 1).clamp(min=0)
        q = torch.arange(width, device=dev)[:, None]
        k = torch.arange(length, device=dev)[None, :]
        # causal, pads masked; a pad query sees itself, so no row of the mask is empty (no NaN in the cache)
        seen = torch.cat([valid, torch.zeros((b, length - width), dtype=torch.bool, device=dev)], 1)
        allowed = (k <= q)[None] & (seen[:, None, :] | (k == q)[None])
        mask4 = torch.zeros((b, 1, width, length), dtype=s.mask.dtype, device=dev)
        mask4.masked_fill_(~allowed[:, None], s.neg)
        s.cache.reset()  # type: ignore[no-untyped-call]  # transformers' StaticCache is untyped
        kwargs: dict[str, Any] = {}
        if self.takes_cache_position:
            kwargs["cache_position"] = torch.arange(width, device=dev)
        logits = self.model(input_ids=ids, attention_mask=mask4, position_ids=positions,
                            past_key_values=s.cache, use_cache=True, logits_to_keep=1, **kwargs).logits[:, -1, :]

        # the step's state: the first token recorded, the next one decoded at cache position `width`
        s.out.fill_(self.pad)
        s.step.zero_()
        s.done.zero_()
        s.mask.fill_(s.neg)
        s.mask[:, 0, 0, :width] = torch.where(valid, 0.0, s.neg).to(s.mask.dtype)
        s.pos.copy_(positions[:, -1:] + 1)
        s.cache_pos.fill_(width)
        s.mask[:, 0, 0, width] = 0.0
        self._advance(s, self._pick(s, logits))

        stop_rows = [i for i, r in enumerate(rows) if r.stop]
        steps = 1
        while steps < max_new:
            if s.graph is not None:
                s.graph.replay()
            else:
                self._step(s)
            steps += 1
            if steps % self.sync_every == 0 and steps < max_new:
                if stop_rows:
                    self._check_stops(s, rows, stop_rows, steps)
                if bool(s.done.all()):
                    break
                if should_stop is not None and should_stop():
                    cut.update(i for i, d in enumerate(s.done.tolist()) if not d)
                    break
        return self._collect(s, rows, steps)

    def _step(self, s: _Slot) -> None:
        """One decoding step, device operations only (this is what the CUDA graph captures)."""
        kwargs: dict[str, Any] = {"cache_position": s.cache_pos} if self.takes_cache_position else {}
        logits = self.model(input_ids=s.ids, attention_mask=s.mask, position_ids=s.pos, past_key_values=s.cache,
                            use_cache=True, **kwargs).logits[:, -1, :]
        self._advance(s, self._pick(s, logits))
        s.cache_pos.add_(1)
        s.pos.add_(1)
        s.mask.index_fill_(3, s.cache_pos, 0.0)  # the next token's own position becomes visible

    def _pick(self, s: _Slot, logits: Any) -> Any:
        import torch

        greedy = logits.argmax(-1)
        if not s.any_sampled:  # a Python flag of the slot: no host sync in the step
            return greedy
        probs = torch.softmax(logits.float() / s.temperature[:, None], dim=-1)
        sorted_probs, idx = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < s.top_p[:, None]
        sorted_probs = sorted_probs * keep
        race = torch.empty_like(sorted_probs).exponential_(generator=s.generator)  # argmax(p / E) draws from p
        drawn = idx.gather(-1, (sorted_probs / race).argmax(-1, keepdim=True)).squeeze(-1)
        return torch.where(s.sampled, drawn, greedy)

    def _advance(self, s: _Slot, token: Any) -> None:
        import torch

        token = torch.where(s.done, torch.full_like(token, self.pad), token)
        s.out.index_copy_(1, s.step, token[:, None])
        s.step.add_(1)
        s.done.logical_or_((token[:, None] == s.eos[None, :]).any(-1) | (s.step >= s.max_new))
        s.ids.copy_(token[:, None])

    def _capture(self, s: _Slot) -> None:
        """Capture one step as a CUDA graph: warm-up steps on a side stream first (lazy cache allocation, cuBLAS
        workspaces), then the capture; the state the warm-up changed is reset after (the cache is zeroed per batch)."""
        import torch

        s.mask.zero_()  # everything visible: the warm-up writes finite values only
        s.ids.fill_(self.pad)
        s.pos.zero_()
        s.cache_pos.fill_(s.width)
        s.step.zero_()
        s.done.zero_()
        s.cache.reset()  # type: ignore[no-untyped-call]  # transformers' StaticCache is untyped
        stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]  # torch's Stream.__new__ is untyped
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                s.step.zero_()
                s.cache_pos.fill_(s.width)
                self._step(s)
        torch.cuda.current_stream().wait_stream(stream)
        s.step.zero_()
        s.cache_pos.fill_(s.width)
        graph = torch.cuda.CUDAGraph()
        # thread_local: CUDA work of other threads (another backend's worker) does not invalidate this capture
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self._step(s)
        torch.cuda.synchronize()
        s.graph = graph

    def _check_stops(self, s: _Slot, rows: list[Row], stop_rows: list[int], steps: int) -> None:
        """Rows whose last tokens hold one of their stop strings are done (one device-to-host copy)."""
        lo = max(0, steps - STOP_WINDOW)
        tails = s.out[:, lo:steps].tolist()
        done = s.done.tolist()
        hits = []
        for i in stop_rows:
            if done[i]:
                continue
            text = self.tokenizer.decode(tails[i], skip_special_tokens=True)
            if any(x in text for x in rows[i].stop):
                hits.append(i)
        if hits:
            import torch

            s.done[torch.tensor(hits, device=self.device)] = True

    def _collect(self, s: _Slot, rows: list[Row], steps: int) -> list[list[int]]:
        eos = set(self.eos_ids)
        tokens = s.out[:, :steps].tolist()
        results = []
        for r, t in zip(rows, tokens, strict=True):
            t = t[: r.max_new]
            for j, x in enumerate(t):
                if x in eos:
                    t = t[: j + 1]
                    break
            results.append(t)
        return results
