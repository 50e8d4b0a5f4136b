"""Chains of thought of reasoning models: the thinking apart from the answer.

Reasoning models (DeepSeek-R1 and its distillations, Qwen3, gpt-oss, ...) return their chain of thought
either in a separate field of an OpenAI-compatible response (``reasoning_content``: vLLM's reasoning
parsers, DeepSeek's API; ``reasoning``: OpenRouter, Ollama, newer vLLM) or inline, between think tags
(``<think>…</think>``).  The backends split a completion into the *reasoning* (stored as
``GeneratedCot.cot``) and the *content* (the final answer text, read by answer extraction), count their
tokens apart, and mark a completion cut off mid-thought (``truncated``): it has no answer, which is not a
wrong answer.

:func:`split_reasoning` splits inline tags (an output that starts inside the thought, as R1's chat
template leaves it with ``<think>`` in the prompt, has only the end tag); :func:`strip_think` removes think
blocks from a text before answer extraction (lm-evaluation-harness's ``think_end_token``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CONTENT_EXTRACTION",
    "DEFAULT_THINK_TAGS",
    "ReasoningInfo",
    "ReasoningSplit",
    "reasoning_info",
    "split_reasoning",
    "split_tokens",
    "strip_think",
]

#: The tags of inline reasoning (DeepSeek-R1, Qwen3, QwQ, most open reasoning models).
DEFAULT_THINK_TAGS: tuple[str, str] = ("<think>", "</think>")
#: ``Answer.answer_extraction`` of an answer that is a reasoning model's final content (no extraction prompt ran).
CONTENT_EXTRACTION = "content"

ReasoningSource = Literal["reasoning_content", "reasoning", "tags"]


class ReasoningSplit(BaseModel):
    """One completion split into reasoning and answer (``reasoning`` is None when the model did not reason)."""

    reasoning: str | None = None
    answer: str = ""
    truncated: bool = False  # the thought was never closed: cut off mid-thought, no answer
    source: ReasoningSource | None = None


class ReasoningInfo(BaseModel):
    """What a ThoughtSource file keeps about a reasoning CoT (``GeneratedCot`` key ``reasoning``)."""

    model_config = ConfigDict(extra="allow")

    source: ReasoningSource = Field(description="Where the reasoning came from: a response field or inline think tags.")
    reasoning_tokens: int = Field(
        default=0, ge=0,
        description="Tokens of the reasoning: the server's usage.completion_tokens_details.reasoning_tokens, the tokenizer's "
        "count (transformers), else the completion tokens split by characters.",
    )
    answer_tokens: int = Field(default=0, ge=0, description="Tokens of the final content.")
    truncated: bool = Field(default=False, description="Cut off mid-thought: no answer, never scored as wrong.")
    finish_reason: str = ""


def reasoning_info(cot: Any) -> ReasoningInfo | None:
    """The reasoning record of a ``GeneratedCot`` (or of its dict), None for a CoT of a non-reasoning model."""
    if isinstance(cot, dict):
        raw = cot.get("reasoning")
    else:
        extra = getattr(cot, "__pydantic_extra__", None)
        if isinstance(extra, dict) and "reasoning" not in type(cot).model_fields:
            # an unknown key of the schema's models: read where pydantic keeps it, not through its __getattr__, which
            # raises AttributeError (slow) for every CoT without one (called for every CoT and answer evaluated)
            raw = extra.get("reasoning")
        else:
            raw = getattr(cot, "reasoning", None)
    if not isinstance(raw, dict):
        return None
    return ReasoningInfo.model_validate(raw)


def split_reasoning(text: str, tags: tuple[str, str] = DEFAULT_THINK_TAGS, *, started: bool = False) -> ReasoningSplit:
    """Split inline think tags: the text inside is the reasoning, the text after the end tag the answer.

    ``started``: the prompt already opened the thought (R1's chat template ends with ``<think>``), so the
    output starts inside it.  An end tag without a start tag means the same.  A thought opened and never
    closed is ``truncated`` (reasoning = all of it, answer ""); a text without tags has no reasoning.
    """
    start, end = tags
    s = text.find(start)
    e = text.find(end)
    if s >= 0 and (e < 0 or s < e):
        body_from = s + len(start)
        e = text.find(end, body_from)
        before = text[:s].strip()
    elif e >= 0 or started:
        body_from, before = 0, ""
    else:
        return ReasoningSplit(reasoning=None, answer=text)
    if e < 0:
        return ReasoningSplit(reasoning=text[body_from:].strip(), answer="", truncated=True, source="tags")
    reasoning = text[body_from:e].strip()
    answer = text[e + len(end) :]
    if before:  # text before the thought (rare) stays with the answer
        answer = before + "\n" + answer
    return ReasoningSplit(reasoning=reasoning, answer=answer.strip(), source="tags")


def strip_think(text: str, tags: tuple[str, str] = DEFAULT_THINK_TAGS) -> str:
    """``text`` without its think blocks: what follows the last end tag; "" when a thought is still open.

    A text without any tag comes back unchanged (a non-reasoning model's CoT).
    """
    start, end = tags
    if end in text:
        after = text.rsplit(end, 1)[1]
        return "" if start in after else after.strip()
    if start in text:
        return text.split(start, 1)[0].strip()  # an open thought: only what came before it is an answer
    return text


def split_tokens(total: int, reasoning: str, answer: str) -> tuple[int, int]:
    """Split a token total between reasoning and answer in proportion to their characters (server gave only a total)."""
    chars = len(reasoning) + len(answer)
    if total <= 0 or chars == 0:
        return 0, max(0, total)
    r = round(total * len(reasoning) / chars)
    return r, total - r
