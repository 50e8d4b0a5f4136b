"""One tokenization of a plain-text prompt, shared by generation and STaR training.

A decoder-only model is asked with the tokenizer's own special tokens in front of the prompt: BOS for the
Llama family, nothing for GPT-2, Qwen or SmolLM2 — as ``model.generate`` after ``tokenizer(text)``, vLLM and
OpenAI-compatible servers do.  Training must see the prompt exactly as generation feeds it, or the model learns
to continue a prompt it is never asked with; both call :func:`prompt_token_ids`.  A tokenizer that also
appends EOS (some do for every text) gets no EOS after the prompt: the completion follows it.
"""

from __future__ import annotations

from typing import Any


def prompt_token_ids(tokenizer: Any, text: str) -> tuple[list[int], int]:
    """``(ids, n_leading_special)``: the prompt's token ids as generation feeds them, and how many of the first
    ids are special tokens (BOS) that a left cut of an over-long prompt must keep."""
    with_special = list(tokenizer(text)["input_ids"])
    plain = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    if not plain:
        return with_special, len(with_special)
    n = len(plain)
    for start in range(len(with_special) - n + 1):
        if with_special[start:start + n] == plain:
            return with_special[:start + n], start
    return with_special, 0  # a tokenizer that merges specials into the text: take what it gives
