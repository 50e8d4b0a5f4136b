"""The backend contract: a tiny async protocol every model backend satisfies.

A backend turns a batch of :class:`Request` into :class:`Completion` (same order).  Retries, rate
limits, batching and padding stay inside the backend; caching, fan-out and progress belong to
``store.py`` / ``generate.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Request:
    """One completion to produce.

    ``prompt`` is plain text (completion style); ``messages`` (chat style, OpenAI format) wins when
    given.  ``sample_index`` distinguishes the n samples of one prompt (self-consistency) and is part
    of the cache key, so sampled completions are cacheable.  ``prompt_ids`` is a prompt given as token ids
    (``serve-model``'s ``prompt: [1, 2, 3]``, lm-eval's default): fed to the model as they are, no tokenizer
    in between (``prompt`` is then empty); the openai backend sends them as they are.

    vLLM's sampling parameters (``top_k``: 0 is off, ``min_p``, ``repetition_penalty``, ``min_tokens``, ``ignore_eos``)
    and its chat-template switches (``add_generation_prompt``, ``continue_final_message``; None: continue a final
    assistant message, else open the assistant's turn) are left at their defaults by the pipeline; :func:`extra_params`
    gives those set otherwise (the store keys them, the openai backend sends them).
    """

    prompt: str = ""
    messages: tuple[dict[str, str], ...] | None = None
    prompt_ids: tuple[int, ...] | None = None
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    sample_index: int = 0
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    ignore_eos: bool = False
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None


#: the request fields of vLLM's API with the value that leaves them unused (the pipeline never sets them)
EXTRA_DEFAULTS: dict[str, Any] = {"top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "min_tokens": 0,
                                  "ignore_eos": False, "add_generation_prompt": None, "continue_final_message": None}


def extra_params(request: Request) -> dict[str, Any]:
    """The vLLM parameters ``request`` sets (those of :data:`EXTRA_DEFAULTS` not at their default), by vLLM's names."""
    return {name: getattr(request, name) for name, unused in EXTRA_DEFAULTS.items() if getattr(request, name) != unused}


#: the parameters of :data:`EXTRA_DEFAULTS` that change how tokens are chosen (the others shape the prompt)
SAMPLING_EXTRAS = ("top_k", "min_p", "repetition_penalty", "min_tokens", "ignore_eos")


def sampling_extras(request: Request) -> dict[str, Any]:
    """The vLLM sampling parameters ``request`` sets: decoding needs a logits processor for each."""
    return {name: value for name, value in extra_params(request).items() if name in SAMPLING_EXTRAS}


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""
    latency_s: float = 0.0
    attempts: int = 1
    raw: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # a reasoning model's thinking (a response field or inline think tags); ``text`` is then its final content
    reasoning: str | None = None
    reasoning_tokens: int = 0  # part of completion_tokens
    reasoning_source: str = ""  # reasoning_content | reasoning | tags

    @property
    def cut_off_in_reasoning(self) -> bool:
        """The model reasoned but gave no answer (it ran out of tokens mid-thought): not a wrong answer."""
        return self.reasoning is not None and not self.text.strip()


@runtime_checkable
class Backend(Protocol):
    name: str

    def cache_identity(self) -> dict[str, Any]:
        """Everything that changes the output besides the request: model id, weights hash, server kind."""
        ...

    async def complete(self, requests: list[Request]) -> list[Completion]:
        """Complete every request (same order).  Raises BackendError once retries run out."""
        ...

    async def aclose(self) -> None:
        """Release connections / memory."""
        ...
