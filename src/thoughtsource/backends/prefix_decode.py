"""Batched decoding that runs a shared prompt prefix once and reuses its KV cache.

Few-shot prompts (STaR's exemplars, a generation config's instruction + exemplars) repeat the same
long prefix in every request; only the question at the end differs.  ``decode`` groups the rows by
their longest common token prefix, runs each prefix through the model once, copies its KV cache to
every row of a batch and decodes only the suffixes.  The model sees exactly the token ids it would
see without the cache (the prefix is found in token space, not in text), so greedy results are the
same as plain ``model.generate`` up to floating-point summation order.

Other savings over ``model.generate`` on a CPU:

* rows that are finished (EOS, stop string, their own ``max_tokens``) leave the batch at once, so the
  batch never carries dead rows to the longest row's end;
* stop strings are checked on the decoded last few tokens of a row, not on its whole text;
* rows are grouped by prefix and sorted by suffix length, so padding inside a batch stays small (the
  pad tokens sit between the prefix and the suffix, masked, with positions that skip them).

``pick(scores, rows)`` chooses each row's next token (greedy argmax or the backend's seeded
per-row sampler), so sampling stays the backend's concern.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: groups whose shared prefix is shorter than this are decoded without a prefix cache
MIN_PREFIX_TOKENS = 16
#: tokens decoded to check for stop strings (each stop string must fit; they are a few tokens long)
STOP_WINDOW = 8


@dataclass
class Row:
    ids: list[int]
    max_new: int
    stop: tuple[str, ...] = ()


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def group_by_prefix(rows: Sequence[Row], min_prefix: int = MIN_PREFIX_TOKENS) -> list[tuple[int, list[int]]]:
    """``[(prefix_len, row indices)]``: rows sharing a token prefix of at least ``min_prefix`` tokens.

    Rows are sorted by their ids, so rows with a common prefix are neighbours; a group's prefix is
    the common prefix of all its members, always leaving each member at least one token of its own.
    """
    order = sorted(range(len(rows)), key=lambda i: rows[i].ids)
    groups: list[tuple[int, list[int]]] = []
    for i in order:
        if groups:
            plen, members = groups[-1]
            lcp = min(plen, common_prefix_len(rows[members[0]].ids, rows[i].ids), len(rows[i].ids) - 1)
            if lcp >= min_prefix:
                groups[-1] = (lcp, [*members, i])
                continue
        groups.append((len(rows[i].ids) - 1, [i]))
    # a single-row group caches nothing useful: its rows go together into one group without a prefix (0), decoded in
    # batches like any other group (decoded one by one, zero-shot prompts without a long shared start ran at batch 1)
    shared = [(plen, m) for plen, m in groups if len(m) > 1]
    loose = [i for _, m in groups if len(m) == 1 for i in m]
    return [*shared, (0, loose)] if loose else shared


def decode(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Row],
    *,
    batch_size: int,
    eos_ids: Sequence[int],
    pick: Callable[[Any, list[int]], Any],
    min_prefix: int = MIN_PREFIX_TOKENS,
    should_stop: Callable[[], bool] | None = None,
    unfinished: set[int] | None = None,
    on_token: Callable[[int, int], bool] | None = None,
) -> list[list[int]]:
    """Generated token ids per row, ending with the EOS token when the row ended there (so the caller can tell a
    natural end from a cut at ``max_new``); may end inside a stop string, cut later.

    ``should_stop`` (Ctrl-C, :mod:`thoughtsource.interrupt`) is checked between decoding steps: once it is true the
    decoding ends, and the rows that had not ended are added to ``unfinished`` (their ids are not a completion).

    ``on_token(row, token)`` (streaming) is called with each row's token as soon as it is chosen, end tokens excluded;
    False ends the row there (its client left)."""
    import torch

    out: list[list[int]] = [[] for _ in rows]
    device = next(model.parameters()).device
    with torch.inference_mode():
        for plen, members in group_by_prefix(rows, min_prefix):
            prefix_cache = None
            if plen > 0:
                prefix_ids = torch.tensor([rows[members[0]].ids[:plen]], device=device)
                prefix_cache = model(input_ids=prefix_ids, use_cache=True).past_key_values
            members = sorted(members, key=lambda i: len(rows[i].ids))
            for start in range(0, len(members), batch_size):
                batch = members[start : start + batch_size]
                if should_stop is not None and should_stop():
                    if unfinished is not None:
                        unfinished.update(batch)
                    continue
                cut: set[int] = set()
                for i, ids in zip(batch, _decode_batch(model, tokenizer, [rows[i] for i in batch], plen, prefix_cache,
                                                       eos_ids, pick, [*batch], device, should_stop, cut,
                                                       on_token), strict=True):
                    out[i] = ids
                if unfinished is not None:
                    unfinished.update(batch[j] for j in cut)
    return out


def _decode_batch(model: Any, tokenizer: Any, rows: list[Row], plen: int, prefix_cache: Any, eos_ids: Sequence[int],
                  pick: Callable[[Any, list[int]], Any], row_keys: list[int], device: Any,
                  should_stop: Callable[[], bool] | None = None, cut: set[int] | None = None,
                  on_token: Callable[[int, int], bool] | None = None) -> list[list[int]]:
    import torch

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    b = len(rows)
    suffixes = [r.ids[plen:] for r in rows]
    width = max(len(s) for s in suffixes)
    input_ids = torch.full((b, width), pad, dtype=torch.long)
    suffix_mask = torch.zeros((b, width), dtype=torch.long)
    for i, s in enumerate(suffixes):  # left-padded inside the suffix: pads sit right after the prefix
        input_ids[i, width - len(s):] = torch.tensor(s)
        suffix_mask[i, width - len(s):] = 1
    positions = (plen + suffix_mask.cumsum(-1) - 1).clamp(min=plen)
    mask = torch.cat([torch.ones((b, plen), dtype=torch.long), suffix_mask], dim=1)
    cache = None
    if prefix_cache is not None:
        cache = copy.deepcopy(prefix_cache)
        cache.batch_repeat_interleave(b)
    eos = set(eos_ids)
    generated: list[list[int]] = [[] for _ in rows]
    active = list(range(b))  # batch position -> row index
    step_ids, step_mask, step_pos = input_ids.to(device), mask.to(device), positions.to(device)
    while active:
        outputs = model(input_ids=step_ids, attention_mask=step_mask, position_ids=step_pos, past_key_values=cache,
                        use_cache=True, logits_to_keep=1)
        cache, logits = outputs.past_key_values, outputs.logits[:, -1, :]
        next_tokens = pick(logits, [row_keys[i] for i in active]).tolist()
        keep: list[int] = []
        for j, (i, t) in enumerate(zip(active, next_tokens, strict=True)):
            g = generated[i]
            g.append(t)
            if t in eos:  # kept: the caller's finish reason is "stop", not "length"
                continue
            if on_token is not None and not on_token(row_keys[i], t):  # a streamed row whose client left
                continue
            r = rows[i]
            if len(g) >= r.max_new:
                continue
            if r.stop:
                tail = tokenizer.decode(g[-STOP_WINDOW:], skip_special_tokens=True)
                if any(s in tail for s in r.stop):
                    continue
            keep.append(j)
        if not keep:
            break
        if should_stop is not None and should_stop():  # between two decoding steps: the rows still going are cut off
            if cut is not None:
                cut.update(active[j] for j in keep)
            break
        last_pos = step_pos[:, -1:]
        if len(keep) < len(active):
            idx = torch.tensor(keep, device=device)
            cache.batch_select_indices(idx)
            step_mask = step_mask.index_select(0, idx)
            last_pos = last_pos.index_select(0, idx)
        active = [active[j] for j in keep]
        step_ids = torch.tensor([[generated[i][-1]] for i in active], device=device)
        step_mask = torch.cat([step_mask, torch.ones((len(active), 1), dtype=step_mask.dtype, device=device)], dim=1)
        step_pos = last_pos + 1
    return generated
