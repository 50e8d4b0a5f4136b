"""The backend contract: a tiny async protocol every model backend satisfies, and the capabilities a backend may add.

A backend turns a batch of :class:`Request` into :class:`Completion` (same order).  Retries, rate
limits, batching and padding stay inside the backend; caching, fan-out and progress belong to
``store.py`` / ``generate.py``.

:class:`Backend` is all that ``generate`` and STaR need.  ``serve-model`` does more with a backend that has more, and
asks for each capability by its protocol (``isinstance(backend, Tokenizes)``), never by probing for a method:

* :class:`Tokenizes`: the model's tokenizer (``/tokenize``, token-id prompts, the context-length check);
* :class:`ScoresTokens`: log-probabilities of given tokens (``logprobs``, ``echo``, ``prompt_logprobs``);
* :class:`Batches`: scoring passes over many token lists at once (concurrent requests' scoring in one forward pass);
* :class:`Streams`: tokens handed over as they are chosen (``stream: true`` while decoding);
* :class:`Loads`: a model loaded on demand, loaded up front by a server before it says it is ready;
* :class:`Releases`: a model that holds its device until released (STaR frees the GPU before training).

Each is ``runtime_checkable``: a backend has a capability by having its methods, nothing to inherit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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



class BackendSettings(Protocol):
    """What a generate config says of its backend (:class:`~thoughtsource.generation.config.GenerateConfig` says it):
    each backend class takes the part it needs (``options_from``), and the config's ``backend_options`` go on top."""

    @property
    def model(self) -> str: ...

    @property
    def base_urls(self) -> list[str]: ...

    @property
    def concurrency(self) -> int: ...

    @property
    def allow_empty(self) -> bool: ...


class BackendClass(Protocol):
    """A registered backend class: built from options, and able to say which options a generate config gives it."""

    def options_from(self, settings: BackendSettings) -> dict[str, Any]:
        """The options ``settings`` give this backend (``backend_options`` are added on top by the caller)."""
        ...

    def __call__(self, **options: Any) -> Backend: ...

#: a streamed row's receiver of each token id as it is chosen; returns False to stop the row (its client left)
TokenSink = Callable[[int], bool]
#: per token of a list: its log-probability given the tokens before it (None for the first) and the most likely
#: tokens at that place as (id, log-probability)
TokenScores = list[tuple[float | None, list[tuple[int, float]]]]


@runtime_checkable
class Tokenizes(Protocol):
    """The model's tokenizer: text to ids and back, the vocabulary, the context, and what a request's prompt becomes."""

    def tokenize(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The token ids of ``text``."""
        ...

    def tokenizer_info(self) -> dict[str, Any]:
        """The special tokens, chat template and context length (vLLM's ``/tokenizer_info``)."""
        ...

    def decode_text(self, ids: list[int]) -> str:
        """The text of ``ids`` (special tokens included)."""
        ...

    def vocab_size(self) -> int:
        """How many token ids the model reads: the valid ids are 0 to vocab_size - 1."""
        ...

    def max_context(self) -> int | None:
        """The model's context length in tokens; None when unknown."""
        ...

    def prompt_ids(self, request: Request) -> list[int]:
        """The token ids the model is fed for ``request``'s prompt (a chat template applied)."""
        ...

    def prompt_tokens(self, request: Request) -> int:
        """How many tokens the model is fed for ``request``'s prompt."""
        ...


@runtime_checkable
class ScoresTokens(Tokenizes, Protocol):
    """Log-probabilities of given tokens under the model (it tokenizes too: scores are of its tokens)."""

    def token_logprobs(self, ids: list[int], top: int = 0) -> TokenScores:
        """Per token of ``ids``: its log-probability given those before it, and the ``top`` most likely tokens."""
        ...

    def decode_tokens(self, ids: list[int]) -> list[str]:
        """Each token's own text (special tokens included), as logprobs name them."""
        ...


@runtime_checkable
class Batches(Protocol):
    """Scoring passes over many rows at once: the token lists of concurrent requests in one forward pass."""

    def token_logprobs_batch(self, batch: list[list[int]], top: int = 0) -> list[TokenScores]:
        """``token_logprobs`` of every token list in ``batch``, from one forward pass."""
        ...

    def next_token_completions(self, requests: list[Request]) -> list[Completion]:
        """Greedy one-token completions (temperature 0, max_tokens 1) from one scoring pass."""
        ...


@runtime_checkable
class Streams(Protocol):
    """Hands each generated token over as it is chosen.  ``streams_tokens`` says whether it does so now (a backend may
    stream only in some settings); when false, a stream's chunks go out once the completion is generated."""

    @property
    def streams_tokens(self) -> bool:
        """Whether ``complete(..., sinks=...)`` hands request i's tokens to ``sinks[i]`` as they are chosen."""
        ...

    @property
    def mode(self) -> str:
        """How it decodes; in mode ``graph`` the tokens are handed over only once a batch has ended."""
        ...

    async def complete(self, requests: list[Request], sinks: Sequence[TokenSink | None] | None = None) -> list[Completion]:
        """:meth:`Backend.complete`, with ``sinks[i]``, when given, receiving request i's tokens as they come."""
        ...

    def decode_generated(self, ids: list[int]) -> str:
        """The text of generated ``ids`` as a completion's text is decoded (a streamed row's text so far)."""
        ...


@runtime_checkable
class Loads(Protocol):
    """Loads its model on first use; ``load()`` loads it now (a server loads before it says it is ready)."""

    def load(self) -> Any:
        """Load the model now (nothing when it is loaded)."""
        ...


@runtime_checkable
class Releases(Protocol):
    """Holds its device until released (``aclose`` leaves it loaded); ``release()`` frees it (before STaR trains)."""

    def release(self) -> None:
        """Free the model and its device memory; the backend is not used again."""
        ...
