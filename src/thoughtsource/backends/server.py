"""An OpenAI-compatible HTTP server in front of any backend (by default the local transformers one).

``thoughtsource serve-model --model embedded --port 8001`` serves ``/v1/models``, ``/v1/models/{id}``,
``/v1/chat/completions`` and ``/v1/completions``, so that any OpenAI client (the ``openai`` package,
lm-eval's ``local-completions``/``local-chat-completions``, ...) can be pointed at it.  Each HTTP request
becomes backend :class:`Request` s; the transformers backend gathers the requests of concurrent callers into
one batched generate call, so throughput grows with the number of clients.

What it speaks, as OpenAI's API reference documents it:

* ``n``, ``seed``, ``stop``, ``temperature``, ``top_p``, ``max_tokens``/``max_completion_tokens``; ``null`` for any of
  them is its default;
* vLLM's ``top_k``, ``min_p``, ``repetition_penalty``, ``min_tokens``, ``ignore_eos`` (per row, transformers' logits
  processors in the backend's sampler), ``prompt_logprobs``, and chat's ``add_generation_prompt`` /
  ``continue_final_message`` (a final assistant message is continued only with the latter);
* completions: a prompt as text, a list of texts, token ids or a list of token-id lists; ``echo`` and
  ``logprobs`` (the prompt tokens' log-probabilities with ``echo``, what lm-eval's loglikelihood reads;
  ``max_tokens: 0`` with ``echo`` scores the prompt only);
* chat: ``logprobs`` / ``top_logprobs`` of the generated tokens;
* ``stream: true``: server-sent events, sent while the model decodes: a chunk per token as it is chosen (text held
  back only inside an unfinished character or where it may begin a stop string), the last chunk of each choice with
  its ``finish_reason`` (with ``logprobs`` asked, each chunk carries its tokens' logprobs, and the chunks leave once the row is scored), a usage chunk with ``stream_options.include_usage``, then
  ``data: [DONE]``.  A client that disconnects stops its rows' generation at the next token.  A backend that cannot
  hand over tokens as they come (or a reasoning split with think tags) streams its chunks once the completion is
  generated;
* ``/tokenize``, ``/detokenize``, ``/tokenizer_info`` as vLLM serves them: lm-eval's ``local-completions`` tokenizes
  with the served model's tokenizer without being told where it is;
* errors in OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``: 400 for a malformed request (a
  token id outside the model's vocabulary included), a
  parameter this server does not support (``tools``, ``response_format``, ``best_of``, ``suffix``, ...: refused,
  never silently ignored) or a prompt and ``max_tokens`` beyond the model's context, 404 for an unknown model or
  route, 429 when the backend is rate limited, 500 when generation fails; 503 for a request stopped by the shutdown
  limit.  Text with a lone surrogate escape, an empty prompt, an empty stop string, image or audio parts and any
  undeclared field that is not bookkeeping (``user``, ``metadata``, ...) are 400s naming the field;
* ``--api-key``: every route but ``/health`` needs ``Authorization: Bearer KEY`` (401 otherwise); ``/version``;
  ``/metrics`` in Prometheus' text format (:mod:`.server_guard`).

For tests and notebooks, :func:`run_model_server` starts the server in a background thread on a
free port and yields a handle with ``base_url``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..errors import BackendError, ThoughtSourceError
from ..interrupt import Interrupted, ctrl_c_stops, request_stop
from ..listen import MODEL_SERVER_PORT, bind
from .base import Backend, Completion, Request, sampling_extras
from .score_batch import ScoreBatcher
from .server_guard import Guard, Metrics

log = logging.getLogger(__name__)


class _StreamingBackend(Backend, Protocol):
    """A backend whose ``streams_tokens`` is true (:class:`~.transformers_local.TransformersBackend`): it takes
    per-request token sinks and decodes generated ids."""

    async def complete(self, requests: list[Request], sinks: Any = None) -> list[Completion]: ...

    def decode_generated(self, ids: list[int]) -> str: ...

#: parameters OpenAI clients may send that this server does not implement: refused (400) unless they carry the
#: value that means "not used"
UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "functions": (None, []),
    "function_call": (None, "none"),
    "response_format": (None, {"type": "text"}),
    "best_of": (None, 1),
    "suffix": (None, ""),
    "logit_bias": (None, {}),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "audio": (None,),
    "modalities": (None, ["text"]),
    "prediction": (None,),
}


class ApiError(Exception):
    """An error answered in OpenAI's shape."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def lone_surrogate(value: Any, path: str = "") -> str | None:
    """The path (``messages.0.content``) of the first text in ``value`` (keys included) with a lone UTF-16 surrogate, which
    JSON's ``\\ud800`` escapes can carry but no Unicode text holds (a tokenizer, or encoding the answer, fails on it)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path or "body"
        return None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        where = f"{path}.{key}" if path else str(key)
        if isinstance(key, str) and lone_surrogate(key) is not None:
            return path or "body"
        if (found := lone_surrogate(item, where)) is not None:
            return found
    return None


class _Body(BaseModel):
    """A request body: text that is not Unicode is refused before anything reads it; ``null`` is a field's default (as
    vLLM takes it: clients send unset options as null)."""

    @model_validator(mode="before")
    @classmethod
    def _unicode_and_nulls(cls, data: Any) -> Any:
        if (where := lone_surrogate(data)) is not None:  # ApiError is no ValueError: pydantic lets it through to its handler
            param = where.split(".")[0] if where != "body" else None
            raise ApiError(400, f"{where}: a lone surrogate (such as \\ud800) is not valid Unicode text", param, "invalid_value")
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (v is None and k in cls.model_fields)}
        return data


#: fields OpenAI clients send that change no completion (bookkeeping): accepted and ignored; any other field that is not
#: declared is refused (400 naming it), unless it carries its UNSUPPORTED value that means "not used"
BOOKKEEPING = frozenset({"user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier"})
#: below this a temperature is greedy decoding, as vLLM takes it (dividing by it would overflow the logits)
MIN_TEMPERATURE = 1e-5


class _Common(_Body):
    # undeclared fields are kept, to refuse them by name (unsupported())
    model_config = ConfigDict(extra="allow")

    model: str
    max_tokens: int | None = Field(default=None, ge=0)
    max_completion_tokens: int | None = Field(default=None, ge=0)
    temperature: float = Field(default=1.0, ge=0, le=2)  # the OpenAI default
    top_p: float = Field(default=1.0, gt=0, le=1)
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    n: int = Field(default=1, ge=1, le=128)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    # vLLM's sampling parameters (its defaults mean "not used")
    top_k: int = Field(default=0, ge=-1, description="-1 or 0: every token")
    min_p: float = Field(default=0.0, ge=0, le=1)
    repetition_penalty: float = Field(default=1.0, gt=0, le=10)
    min_tokens: int = Field(default=0, ge=0)
    ignore_eos: bool = False
    prompt_logprobs: int | None = Field(default=None, ge=0, le=20)

    def max_new(self, default_max_tokens: int) -> int:
        for value in (self.max_completion_tokens, self.max_tokens):
            if value is not None:
                return value
        return default_max_tokens

    def base_request(self, default_max_tokens: int) -> dict[str, Any]:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        if "" in stop:  # vLLM refuses it; taken as a stop string, every text would end before its first character
            raise ApiError(400, "stop: must not contain an empty string", "stop", "invalid_value")
        max_new = self.max_new(default_max_tokens)
        if self.min_tokens > max_new:
            raise ApiError(400, f"min_tokens: {self.min_tokens} is more than max_tokens ({max_new})", "min_tokens", "invalid_value")
        return {
            "max_tokens": max(1, max_new),  # 0 (echo only) generates one token, dropped
            "temperature": self.temperature if self.temperature >= MIN_TEMPERATURE else 0.0,
            "top_p": self.top_p,
            "stop": tuple(stop),
            "seed": self.seed,
            "top_k": max(0, self.top_k),
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
            "min_tokens": self.min_tokens,
            "ignore_eos": self.ignore_eos,
        }

    def unsupported(self) -> str | None:
        for name, value in (self.model_extra or {}).items():
            if name not in BOOKKEEPING and value not in UNSUPPORTED.get(name, ()):
                return name
        return None


class ChatBody(_Common):
    messages: list[dict[str, Any]] = Field(min_length=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    add_generation_prompt: bool = True  # vLLM's chat-template switches, with its defaults
    continue_final_message: bool = False


class CompletionBody(_Common):
    prompt: str | list[Any]  # a text, texts, token ids or token-id lists: checked by _prompts, with one clear message
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=20)


class TokenizeBody(_Body):
    prompt: str
    add_special_tokens: bool = True


class DetokenizeBody(_Body):
    tokens: list[int]


def _error_type(status: int) -> str:
    return {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error",
            429: "rate_limit_error"}.get(status, "server_error" if status >= 500 else "invalid_request_error")


def _text_content(content: Any, where: str) -> str:
    """OpenAI message content: a string, a list of parts or null; only text parts are read (others: a 400, never
    dropped silently)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list):
        raise ApiError(400, f"{where}.content: must be a string or a list of content parts", "messages", "invalid_value")
    texts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text":
            what = f"{json.dumps(kind)} parts are" if isinstance(kind, str) else "a part without a type is"
            raise ApiError(400, f"{where}.content[{j}]: {what} not supported; this server's models read text parts only",
                           "messages", "unsupported_content")
        if not isinstance(part.get("text"), str):
            raise ApiError(400, f"{where}.content[{j}].text: must be a string", "messages", "invalid_value")
        texts.append(part["text"])
    return "".join(texts)


def _messages(body: ChatBody) -> tuple[dict[str, str], ...]:
    """The chat's messages as role and text; a message this server cannot read (tool calls, non-text parts, no role) is
    a 400 naming it, and a final message to continue must be the assistant's."""
    out = []
    for i, m in enumerate(body.messages):
        where = f"messages[{i}]"
        role = m.get("role")
        if not isinstance(role, str) or not role:
            raise ApiError(400, f"{where}.role: must be a non-empty string", "messages", "invalid_value")
        for name in ("tool_calls", "function_call", "audio"):
            if m.get(name):
                raise ApiError(400, f"{where}.{name}: not supported by this server", "messages", "unsupported_parameter")
        out.append({"role": role, "content": _text_content(m.get("content"), where)})
    if body.continue_final_message and body.add_generation_prompt:
        raise ApiError(400, "continue_final_message: cannot be true with add_generation_prompt (set it to false)",
                       "continue_final_message", "invalid_value")
    if body.continue_final_message and out[-1]["role"] != "assistant":
        raise ApiError(400, f"continue_final_message: the final message is the {out[-1]['role']}'s, not the assistant's",
                       "continue_final_message", "invalid_value")
    return tuple(out)


def _usage(completions: list[Completion], n: int) -> dict[str, int]:
    """Usage of one response; the n samples of a prompt count its prompt tokens once."""
    prompt = sum(c.prompt_tokens for c in completions[::n])
    done = sum(c.completion_tokens for c in completions)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def _is_id(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_ids(ids: list[Any], where: str, param: str, vocab: int | None) -> tuple[int, ...]:
    """``ids`` as token ids of the model: integers from 0 to vocab - 1 (a 400 naming the first that is not)."""
    for j, t in enumerate(ids):
        if not _is_id(t):
            raise ApiError(400, f"{where}[{j}]: {json.dumps(t)} is not a token id (an integer)", param, "invalid_value")
        if t < 0 or (vocab is not None and t >= vocab):
            size = f"this model's vocabulary has {vocab} tokens (ids 0 to {vocab - 1})" if vocab else "token ids are >= 0"
            raise ApiError(400, f"{where}[{j}]: token id {t} is out of vocabulary; {size}", param, "invalid_value")
    return tuple(ids)


def _prompts(body: CompletionBody, vocab: int | None) -> list[str | tuple[int, ...]]:
    """The prompts of a completions request: texts, or token-id tuples (each id in the model's vocabulary)."""
    p = body.prompt
    if not p:  # an empty text has no token to start from
        raise ApiError(400, "prompt: must not be empty", "prompt", "invalid_value")
    if isinstance(p, str):
        return [p]
    if all(isinstance(x, str) for x in p):
        if (k := p.index("") if "" in p else None) is not None:
            raise ApiError(400, f"prompt[{k}]: must not be empty", "prompt", "invalid_value")
        return list(p)
    if all(_is_id(x) for x in p):
        return [_check_ids(p, "prompt", "prompt", vocab)]
    if all(isinstance(x, list) for x in p):
        if any(not x for x in p):
            raise ApiError(400, "prompt: a token-id prompt must not be empty", "prompt", "invalid_value")
        return [_check_ids(x, f"prompt[{k}]", "prompt", vocab) for k, x in enumerate(p)]
    raise ApiError(400, "prompt: must be a string, a list of strings, a list of token ids or a list of token-id lists",
                   "prompt", "invalid_value")


class _TextStream:
    """A streamed row's text, piece by piece as its tokens come: never past a stop string, never inside an unfinished
    character, and without the last characters that may be the start of a stop string (sent once they are not)."""

    def __init__(self, decode: Any, stop: tuple[str, ...]) -> None:
        self.decode, self.stop = decode, stop
        self.hold = max((len(s) for s in stop if s), default=1) - 1
        self.ids: list[int] = []
        self.sent = ""
        self.stopped = False

    def add(self, token: int) -> str:
        """The text that ``token`` makes safe to send ("" for none)."""
        if self.stopped:
            return ""
        self.ids.append(token)
        text = self.decode(self.ids)
        if text.endswith("\ufffd"):  # inside a multi-byte character
            return ""
        hits = [text.index(s) for s in self.stop if s and s in text]
        if hits:
            self.stopped, end = True, min(hits)
        else:
            end = len(text) - self.hold
        if end <= len(self.sent) or not text.startswith(self.sent):
            return ""
        piece, self.sent = text[len(self.sent):end], text[:end]
        return piece

    def rest(self, final: str) -> str:
        """What the completion's final text adds to what was sent."""
        if not final.startswith(self.sent):  # cannot happen with the backends' decoding; the sent text stands
            log.warning("streamed text %r is not a prefix of the completion %r", self.sent, final)
            return ""
        return final[len(self.sent):]


def _sse(obj: Any) -> str:
    return f"data: {json.dumps(obj)}\n\n"


def _closing_stream() -> Any:
    from starlette.responses import StreamingResponse

    class ClosingStream(StreamingResponse):
        """A StreamingResponse that closes its generator however the response ends (a client that disconnects
        included), so the generator's ``finally`` runs at once, not when the garbage collector gets to it."""

        async def stream_response(self, send: Any) -> None:
            try:
                await super().stream_response(send)
            finally:
                await self.body_iterator.aclose()  # type: ignore[attr-defined]

    return ClosingStream


def create_app(backend: Backend, served_model_name: str, default_max_tokens: int = 256, api_key: str | None = None) -> Any:
    """The FastAPI app serving ``backend`` under the model name ``served_model_name``; with ``api_key``, every route but
    ``/health`` needs it (``Authorization: Bearer KEY``)."""
    from fastapi import FastAPI
    from fastapi import Request as HttpRequest
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
    from starlette.exceptions import HTTPException

    _ClosingStream = _closing_stream()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if batcher is not None:
            await batcher.close()
        await backend.aclose()

    app = FastAPI(title="thoughtsource model server", version="1", lifespan=lifespan)
    app.state.backend = backend
    app.state.started = int(time.time())
    metrics = Metrics(["/v1/chat/completions", "/v1/completions", "/v1/models", "/tokenize", "/detokenize",
                       "/tokenizer_info", "/health", "/version", "/metrics"])
    app.add_middleware(Guard, metrics=metrics, api_key=api_key)

    def error(status: int, message: str, param: str | None = None, code: str | None = None) -> JSONResponse:
        body = {"message": message, "type": _error_type(status), "param": param, "code": code}
        return JSONResponse({"error": body}, status_code=status)

    @app.exception_handler(ApiError)
    async def api_error(_: HttpRequest, e: ApiError) -> JSONResponse:
        return error(e.status, e.message, e.param, e.code)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: HttpRequest, e: RequestValidationError) -> JSONResponse:
        problems, param = [], None
        for err in e.errors():
            loc = [str(x) for x in err.get("loc", ()) if x != "body"]
            if err.get("type") == "json_invalid":
                problems.append(f"the request body is not valid JSON ({err.get('msg', '')})")
                continue
            where = ".".join(loc) or "body"
            param = param or (loc[0] if loc else None)
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        message = "; ".join(dict.fromkeys(problems)) or "invalid request"
        return error(400, message, param, "invalid_value" if param else None)

    @app.exception_handler(HTTPException)
    async def http_error(request: HttpRequest, e: HTTPException) -> JSONResponse:
        message = f"no route {request.method} {request.url.path}" if e.status_code in (404, 405) else str(e.detail)
        return error(e.status_code, message)

    @app.exception_handler(Exception)
    async def crashed(_: HttpRequest, e: Exception) -> JSONResponse:
        log.exception("request failed")
        return error(500, f"internal error: {type(e).__name__}: {e}")

    def check(body: _Common) -> None:
        if body.model != served_model_name:
            raise ApiError(404, f"The model '{body.model}' does not exist; this server serves '{served_model_name}'.",
                           "model", "model_not_found")
        if (name := body.unsupported()) is not None:
            raise ApiError(400, f"{name}: not supported by this server (thoughtsource serve-model)", name, "unsupported_parameter")
        if body.prompt_logprobs is not None:
            scorer("prompt_logprobs")
            if body.stream:  # as vLLM: they would come before the first token, in no chunk's field
                raise ApiError(400, "prompt_logprobs: not available with stream=true", "prompt_logprobs", "invalid_value")

    def scorer(param: str) -> Any:
        if not callable(getattr(backend, "token_logprobs", None)):
            raise ApiError(400, f"{param}: this backend ({backend.name}) cannot score tokens", param, "unsupported_parameter")
        return backend

    def tokenizer_backend() -> Any:
        if not callable(getattr(backend, "tokenize", None)):
            raise ApiError(404, f"this backend ({backend.name}) has no tokenizer to serve")
        return backend

    def check_context(requests: list[Request], param: str) -> None:
        """A prompt and max_tokens longer than the model's context: a 400 as vLLM and OpenAI give, not a failed generate."""
        count, limit = getattr(backend, "prompt_tokens", None), getattr(backend, "max_context", None)
        if not callable(count) or not callable(limit) or not (ctx := limit()):
            return
        for r in {id(r.prompt_ids or r.prompt or r.messages): r for r in requests}.values():
            n = count(r)
            if n + r.max_tokens > ctx:
                raise ApiError(400, f"This model's maximum context length is {ctx} tokens. However, you requested "
                               f"{n + r.max_tokens} tokens ({n} in the {param}, {r.max_tokens} in the completion). Please "
                               f"reduce the length of the {param} or completion.", param, "context_length_exceeded")

    async def run(requests: list[Request], echo_only: bool, sinks: list[Any] | None = None) -> list[Completion]:
        ids_of = getattr(backend, "prompt_ids", None)
        if echo_only and callable(ids_of):  # max_tokens 0 (lm-eval's log-likelihoods): the prompt only, nothing decoded
            prompts = await asyncio.to_thread(lambda: [ids_of(r) for r in requests])
            metrics.generated(sum(len(ids) for ids in prompts), 0)
            return [Completion(text="", prompt_tokens=len(ids), completion_tokens=0, finish_reason="length",
                               raw={"prompt_ids": ids, "token_ids": [], "stop_reason": None}) for ids in prompts]
        next_token = getattr(backend, "next_token_completions", None)
        if callable(next_token) and not sinks and all(
                r.max_tokens == 1 and r.temperature == 0 and not sampling_extras(r) for r in requests):
            out = await asyncio.to_thread(next_token, requests)  # one greedy token: from a scoring pass (lm-eval's)
            metrics.generated(sum(c.prompt_tokens for c in out), sum(c.completion_tokens for c in out))
            return out
        metrics.queued(len(requests))
        try:
            out = await (cast(_StreamingBackend, backend).complete(requests, sinks=sinks) if sinks else backend.complete(requests))
        except BackendError as e:
            log.warning("generation failed: %s", e)
            status = e.status if e.status in (400, 429) else 500
            raise ApiError(status, str(e)) from None
        except Interrupted:  # the server's shutdown limit passed (serve's shutdown_timeout): a clean error, not a cut
            raise ApiError(503, "the server is shutting down: this request was stopped before it finished", None,
                           "server_shutting_down") from None
        finally:
            metrics.queued(-len(requests))
        metrics.generated(sum(c.prompt_tokens for c in out), sum(c.completion_tokens for c in out))
        if echo_only:  # max_tokens 0: the one token generated is not part of the answer
            out = [dataclasses.replace(c, text="", completion_tokens=0, finish_reason="length",
                                       raw={**c.raw, "token_ids": []}) for c in out]
        return out

    async def run_watched(requests: list[Request], echo_only: bool, http: HttpRequest) -> list[Completion]:
        """run() for a non-streamed answer: a client that leaves (a timeout) stops its rows at their next token (not in
        the graph mode, which hands its tokens back only at the end)."""
        if not live(echo_only, False) or getattr(backend, "mode", "") == "graph" \
                or all(r.max_tokens <= 1 for r in requests):  # one token: nothing to stop early
            return await run(requests, echo_only)
        left = threading.Event()

        async def watch() -> None:
            while not await http.is_disconnected():
                await asyncio.sleep(0.25)
            left.set()

        watcher = asyncio.ensure_future(watch())
        try:
            return await run(requests, echo_only, [lambda _token: not left.is_set() for _ in requests])
        finally:
            watcher.cancel()

    batch_scorer = getattr(backend, "token_logprobs_batch", None)
    batcher = ScoreBatcher(batch_scorer, on_pass=metrics.scored) if callable(batch_scorer) else None

    async def score(ids: list[int], top: int, param: str) -> Any:
        """Per token of ``ids``: (logprob, top ids); scored with whatever else waits (:mod:`.score_batch`)."""
        b = scorer(param)
        if batcher is not None:
            return await batcher.score(ids, top)
        return await asyncio.to_thread(b.token_logprobs, ids, top)

    async def scored(c: Completion, top: int, echo: bool) -> tuple[list[str], list[Any], dict[int, str]]:
        """(token names, [(logprob, [(id, logprob)])], names of the top ids) of the completion's tokens, the prompt's
        first with echo."""
        b = scorer("logprobs")
        prompt_ids, gen = list(c.raw["prompt_ids"]), list(c.raw["token_ids"])
        values = await score(prompt_ids + gen, top, "logprobs")
        first = 0 if echo else len(prompt_ids)
        values = values[first:]
        alt_ids = sorted({i for _, alts in values for i, _ in alts})
        return b.decode_tokens((prompt_ids + gen)[first:]), values, dict(zip(alt_ids, b.decode_tokens(alt_ids), strict=True))

    async def completion_logprobs(c: Completion, top: int, echo: bool) -> dict[str, Any]:
        names, values, by_id = await scored(c, top, echo)
        offsets, at = [], 0
        for name in names:
            offsets.append(at)
            at += len(name)
        return {
            "tokens": names,
            "token_logprobs": [lp for lp, _ in values],
            "top_logprobs": [None if lp is None else {by_id[i]: v for i, v in alts} for lp, alts in values],
            "text_offset": offsets,
        }

    async def chat_logprobs(c: Completion, top: int) -> dict[str, Any]:
        names, values, by_id = await scored(c, top, False)
        names, values = names[: c.completion_tokens], values[: c.completion_tokens]  # OpenAI's chat omits the end token

        def entry(name: str, lp: float) -> dict[str, Any]:
            return {"token": name, "logprob": lp, "bytes": list(name.encode())}

        return {"content": [{**entry(name, lp), "top_logprobs": [entry(by_id[i], v) for i, v in alts]}
                            for name, (lp, alts) in zip(names, values, strict=True)]}

    def pieces(c: Completion) -> list[tuple[str, int]]:
        """The completion's text in one piece per token (the stream's chunks), each with how many of its tokens it
        covers (tokens after the text, an end token, go with the last piece); one piece without token ids."""
        gen = list(c.raw.get("token_ids") or [])
        decode = getattr(backend, "decode_text", None)
        if not gen or not callable(decode) or not c.text:
            return [(c.text, len(gen))] if c.text or gen else []
        out: list[tuple[str, int]] = []
        sent, used = 0, 0
        for k in range(1, len(gen) + 1):
            upto = min(len(decode(gen[:k])), len(c.text))
            if upto > sent and not decode(gen[:k]).endswith("\ufffd"):  # not inside a multi-byte character
                out.append((c.text[sent:upto], k - used))
                sent, used = upto, k
        if sent < len(c.text) or used < len(gen):
            if sent < len(c.text) or not out:
                out.append((c.text[sent:], len(gen) - used))
            else:
                out[-1] = (out[-1][0], out[-1][1] + len(gen) - used)
        return out

    async def prompt_logprobs(c: Completion, top: int) -> list[dict[str, Any] | None]:
        """vLLM's ``prompt_logprobs``: per prompt token (None for the first), its id's log-probability and the ``top``
        most likely ids at that place, each with its text."""
        b = scorer("prompt_logprobs")
        ids = list(c.raw["prompt_ids"])
        values = await score(ids, top, "prompt_logprobs")
        known = sorted(set(ids) | {i for _, alts in values for i, _ in alts})
        names = dict(zip(known, b.decode_tokens(known), strict=True))
        out: list[dict[str, Any] | None] = [None]
        for token, (lp, alts) in zip(ids[1:], values[1:], strict=True):
            entry = {str(i): {"logprob": v, "rank": rank, "decoded_token": names[i]} for rank, (i, v) in enumerate(alts, 1)}
            entry.setdefault(str(token), {"logprob": lp, "rank": None, "decoded_token": names[token]})
            out.append(entry)
        return out

    def vocab() -> int | None:
        size = getattr(backend, "vocab_size", None)
        return size() if callable(size) else None

    def live(echo_only: bool, scored: bool) -> bool:
        """Whether a stream's tokens go out as they decode (see the module docstring): not when each chunk carries its
        tokens' logprobs (scored once the row is generated)."""
        return bool(getattr(backend, "streams_tokens", False)) and not echo_only and not scored

    def window(kind: str, logprobs: dict[str, Any], lo: int, hi: int) -> dict[str, Any]:
        """The logprobs of tokens lo to hi - 1 of a choice (a streamed chunk's)."""
        if kind == "chat":
            return {"content": logprobs["content"][lo:hi]}
        return {key: values[lo:hi] for key, values in logprobs.items()}

    def stream(kind: str, rid: str, requests: list[Request], body: _Common, echo_only: bool,
               extras_of: Any, echoes: list[str], scored: bool) -> StreamingResponse:
        """The SSE response of ``requests`` (one choice each); generation starts when the response does, and ends when
        the client leaves.  ``extras_of(out)`` gives each choice's logprobs once generated, sent with the chunks of
        their tokens when ``scored``; ``echoes`` its echoed prompt (completions)."""
        created = int(time.time())
        usage = bool((body.stream_options or {}).get("include_usage"))
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"

        def chunk(choices: list[dict[str, Any]]) -> str:
            return _sse({"id": rid, "object": obj, "created": created, "model": served_model_name, "choices": choices,
                         **({"usage": None} if usage else {})})

        def piece(i: int, text: str, logprobs: dict[str, Any] | None = None) -> str:
            if kind == "chat":
                return chunk([{"index": i, "delta": {"content": text}, "logprobs": logprobs, "finish_reason": None}])
            return chunk([{"index": i, "text": text, "logprobs": logprobs, "finish_reason": None}])

        def last(i: int, c: Completion, extra: dict[str, Any]) -> str:
            body_key: dict[str, Any] = {"delta": {}} if kind == "chat" else {"text": ""}
            return chunk([{"index": i, **body_key, **extra, "finish_reason": c.finish_reason or "stop"}])

        async def events() -> AsyncIterator[str]:
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[tuple[int, str] | None] = asyncio.Queue()
            left = threading.Event()  # the client disconnected: every row of this response stops
            texts = [_TextStream(cast(_StreamingBackend, backend).decode_generated, r.stop) for r in requests] if live(echo_only, scored) else []

            def sink(i: int) -> Any:
                def on_token(token: int) -> bool:  # in the generating thread
                    if left.is_set():
                        return False
                    if text := texts[i].add(token):
                        loop.call_soon_threadsafe(queue.put_nowait, (i, text))
                    return True
                return on_token

            task = asyncio.ensure_future(run(requests, echo_only, [sink(i) for i in range(len(texts))]))
            task.add_done_callback(lambda _: queue.put_nowait(None))
            try:
                for i, echo in enumerate(echoes if kind != "chat" else [""] * len(requests)):
                    if kind == "chat":
                        yield chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                      "finish_reason": None}])
                    elif echo and not scored:
                        yield piece(i, echo)
                while (item := await queue.get()) is not None:
                    yield piece(*item)
                try:
                    out = task.result()
                except Exception as e:  # the response has begun: the error is the stream's last event, as vLLM sends it
                    if not isinstance(e, ApiError):
                        log.exception("streamed request failed")
                        e = ApiError(500, f"internal error: {type(e).__name__}: {e}")
                    yield _sse({"error": {"message": e.message, "type": _error_type(e.status), "param": e.param,
                                          "code": e.code}})
                    yield "data: [DONE]\n\n"
                    return
                extras = await extras_of(out)
                for i, c in enumerate(out):
                    if scored:  # each chunk with its tokens' logprobs (the echoed prompt's first)
                        lp, at = extras[i]["logprobs"], 0
                        if kind != "chat" and echoes[i]:
                            at = len(c.raw["prompt_ids"])
                            yield piece(i, echoes[i], window(kind, lp, 0, at))
                        for text, count in pieces(c):
                            yield piece(i, text, window(kind, lp, at, at + count))
                            at += count
                        yield last(i, c, {"logprobs": None})
                        continue
                    for text in [texts[i].rest(c.text)] if texts else [p for p, _ in pieces(c)]:
                        if text:
                            yield piece(i, text)
                    yield last(i, c, extras[i])
                if usage:
                    yield _sse({"id": rid, "object": obj, "created": created, "model": served_model_name,
                                "choices": [], "usage": _usage(out, body.n)})
                yield "data: [DONE]\n\n"
            finally:
                if not task.done():  # the client left: its rows stop at their next token, its queued rows are dropped
                    left.set()
                    task.cancel()

        return _ClosingStream(events(), media_type="text/event-stream")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/version")
    async def version() -> dict[str, str]:
        import importlib.metadata

        return {"version": importlib.metadata.version("thoughtsource")}

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def fingerprint() -> str | None:
        """The served weights' fingerprint (a hash of the model folder's files), so a client can check what it talks to."""
        if not hasattr(app.state, "fingerprint"):
            try:
                identity = await asyncio.to_thread(backend.cache_identity)
                app.state.fingerprint = identity.get("weights")
            except Exception as e:  # a model that cannot be fingerprinted is still served
                log.warning("no weights fingerprint: %s", e)
                app.state.fingerprint = None
        return app.state.fingerprint

    async def model_entry() -> dict[str, Any]:
        entry = {"id": served_model_name, "object": "model", "created": app.state.started, "owned_by": "thoughtsource"}
        if (fp := await fingerprint()) is not None:
            entry["fingerprint"] = fp
        return entry

    # vLLM's tokenizer endpoints, at the server's root: lm-eval's local-completions finds them and tokenizes with the
    # served model's own tokenizer (no tokenizer path or hub id needed on the client)
    @app.get("/tokenizer_info")
    async def tokenizer_info() -> dict[str, Any]:
        return tokenizer_backend().tokenizer_info()

    @app.post("/tokenize")
    async def tokenize(body: TokenizeBody) -> dict[str, Any]:
        b = tokenizer_backend()
        tokens = b.tokenize(body.prompt, body.add_special_tokens)
        return {"tokens": tokens, "count": len(tokens), "max_model_len": b.max_context()}

    @app.post("/detokenize")
    async def detokenize(body: DetokenizeBody) -> dict[str, str]:
        b = tokenizer_backend()
        return {"prompt": b.decode_text(list(_check_ids(body.tokens, "tokens", "tokens", vocab())))}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [await model_entry()]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> dict[str, Any]:
        if model_id != served_model_name:
            raise ApiError(404, f"The model '{model_id}' does not exist; this server serves '{served_model_name}'.",
                           "model", "model_not_found")
        return await model_entry()

    def response(kind: str, rid: str, out: list[Completion], n: int, choices: list[dict[str, Any]]) -> dict[str, Any]:
        """A non-streamed response of the OpenAI API: ``choices`` (each choice's content and extras) in its envelope."""
        return {
            "id": rid,
            "object": kind,
            "created": int(time.time()),
            "model": served_model_name,
            "choices": [{"index": i, **choice, "finish_reason": c.finish_reason or "stop",
                         "stop_reason": (c.raw or {}).get("stop_reason")}  # vLLM's field: the stop string that fired
                        for i, (choice, c) in enumerate(zip(choices, out, strict=True))],
            "usage": _usage(out, n),
        }

    def post(path: str) -> Any:
        """``app.post(path)`` for a handler that also takes the HTTP request (``http``): its annotation is the class
        itself, as FastAPI cannot resolve the name of a class imported inside this function."""
        def register(handler: Any) -> Any:
            handler.__annotations__["http"] = HttpRequest
            return app.post(path, response_model=None)(handler)
        return register

    @post("/v1/chat/completions")
    async def chat(body: ChatBody, http: HttpRequest) -> Any:
        check(body)
        if body.top_logprobs and not body.logprobs:
            raise ApiError(400, "top_logprobs: needs logprobs=true", "top_logprobs")
        if body.logprobs:
            scorer("logprobs")
        messages = _messages(body)
        base = body.base_request(default_max_tokens)
        requests = [Request(messages=messages, sample_index=i, add_generation_prompt=body.add_generation_prompt,
                            continue_final_message=body.continue_final_message, **base) for i in range(body.n)]
        check_context(requests, "messages")
        echo_only = body.max_new(default_max_tokens) == 0

        async def extras_of(out: list[Completion]) -> list[dict[str, Any]]:
            if not body.logprobs:
                return [{"logprobs": None} for _ in out]
            return [{"logprobs": lp} for lp in await asyncio.gather(*(chat_logprobs(c, body.top_logprobs or 0) for c in out))]

        rid = f"chatcmpl-{uuid.uuid4().hex}"
        if body.stream:
            return stream("chat", rid, requests, body, echo_only, extras_of, [], body.logprobs)
        out = await run_watched(requests, echo_only, http)
        extras = await extras_of(out)
        answer = response("chat.completion", rid, out, body.n,
                          [{"message": {"role": "assistant", "content": c.text}, **extras[i]} for i, c in enumerate(out)])
        if body.prompt_logprobs is not None:  # vLLM's place for them in a chat answer: beside the choices
            answer["prompt_logprobs"] = await prompt_logprobs(out[0], body.prompt_logprobs)
        return answer

    @post("/v1/completions")
    async def completions(body: CompletionBody, http: HttpRequest) -> Any:
        check(body)
        prompts = _prompts(body, vocab())
        if body.logprobs is not None:
            scorer("logprobs")
        if body.echo and any(not isinstance(p, str) for p in prompts):
            scorer("echo")
        base = body.base_request(default_max_tokens)
        requests = [
            Request(prompt=p, sample_index=i, **base) if isinstance(p, str) else Request(prompt_ids=p, sample_index=i, **base)
            for p in prompts
            for i in range(body.n)
        ]
        check_context(requests, "prompt")
        echo_only = body.max_new(default_max_tokens) == 0
        echoes = [(r.prompt if r.prompt_ids is None else scorer("echo").decode_text(list(r.prompt_ids))) if body.echo else ""
                  for r in requests]

        async def extras_of(out: list[Completion]) -> list[dict[str, Any]]:
            top = body.logprobs
            logprobs = await asyncio.gather(*(completion_logprobs(c, top, body.echo) for c in out)) if top is not None \
                else [None] * len(out)  # the choices scored together (score_batch.py)
            extras: list[dict[str, Any]] = [{"logprobs": lp} for lp in logprobs]
            if body.prompt_logprobs is not None:  # vLLM's place for them in a completion: each choice
                for extra, lps in zip(extras, await asyncio.gather(*(prompt_logprobs(c, body.prompt_logprobs)
                                                                      for c in out)), strict=True):
                    extra["prompt_logprobs"] = lps
            return extras

        rid = f"cmpl-{uuid.uuid4().hex}"
        if body.stream:
            return stream("text", rid, requests, body, echo_only, extras_of, echoes, body.logprobs is not None)
        out = await run_watched(requests, echo_only, http)
        extras = await extras_of(out)
        for extra, echo in zip(extras, echoes, strict=True):
            if body.echo:
                extra["echo"] = echo
        return response("text_completion", rid, out, body.n,
                        [{"text": extras[i].pop("echo", "") + c.text, **extras[i]} for i, c in enumerate(out)])

    return app


@dataclass
class ModelServerHandle:
    """A running server: ``base_url`` (ending in /v1), ``model`` (its served name), ``backend``, ``close()``."""

    base_url: str
    model: str
    backend: Backend
    _server: Any
    _thread: threading.Thread

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)


def make_backend(model: str = "embedded", **options: Any) -> Backend:
    from .transformers_local import TransformersBackend

    return TransformersBackend(model=model, **options)


def load_backend(backend: Backend) -> None:
    """Load the backend's model now if it loads lazily (``load()``), so that a server is ready when it says so."""
    load = getattr(backend, "load", None)
    if callable(load):
        load()


def serve(
    backend: Backend,
    served_model_name: str,
    host: str = "127.0.0.1",
    port: int = MODEL_SERVER_PORT,
    default_max_tokens: int = 256,
    log_level: str = "info",
    api_key: str | None = None,
    shutdown_timeout: float = 30.0,
) -> None:
    """Serve in the foreground until interrupted.

    The port is bound first (a port in use is an error before anything loads), then the model is loaded
    (a model that cannot load is an error at start, not a 500 on every request, and the first request does
    not wait for it), and only then is the server reported ready.  Without ``api_key``, listening beyond the loopback
    interface is warned about: anyone who reaches the port can use the model.  On SIGTERM or Ctrl-C the requests in
    flight have ``shutdown_timeout`` seconds to finish; then their decoding stops and each ends with a clean error (a 503,
    or a stream's error event), and the server exits.
    """
    import uvicorn

    if api_key is not None and not api_key.strip():
        raise ThoughtSourceError("--api-key: the key is empty")
    if api_key is None and not is_loopback(host):
        log.warning("listening on %s without an API key: anyone who can reach this server can use the model "
                    "(--api-key or THOUGHTSOURCE_API_KEY)", host)
    sock = _bound_and_loaded(backend, host, port)
    app = create_app(backend, served_model_name, default_max_tokens, api_key=api_key)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            if not self.should_exit:  # the first signal: the requests in flight get shutdown_timeout seconds
                log.info("shutting down: requests in flight have %g s to finish (--shutdown-timeout)", shutdown_timeout)
                timer = threading.Timer(shutdown_timeout, stop_in_flight)
                timer.daemon = True
                timer.start()
            super().handle_exit(sig, frame)

    def stop_in_flight() -> None:
        log.warning("shutdown: %g s passed; the requests still in flight are stopped", shutdown_timeout)
        request_stop()  # the decoder stops at its next step; run() answers each of its requests with a 503

    # uvicorn's own limit is the backstop: the stopped requests have answered well before it
    server = Server(uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=int(shutdown_timeout) + 30))
    with ctrl_c_stops(server):
        log.info("serving %s at http://%s:%d/v1 (model loaded)", served_model_name, host, sock.getsockname()[1])
        server.run(sockets=[sock])


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is the loopback interface only."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # another name: it may resolve to any interface
        return False


def _bound_and_loaded(backend: Backend, host: str, port: int) -> socket.socket:
    """The listening socket, bound before the model loads (a port in use is an error first); closed again if the model
    cannot load."""
    sock = bind(host, port)
    try:
        load_backend(backend)
    except BaseException:
        sock.close()
        raise
    return sock


@contextlib.contextmanager
def run_model_server(
    backend: Backend | None = None, served_model_name: str = "embedded", host: str = "127.0.0.1", port: int = 0,
    api_key: str | None = None,
) -> Iterator[ModelServerHandle]:
    """Serve ``backend`` (default: the embedded model via transformers) in a thread; stopped on exit."""
    import uvicorn

    backend = backend if backend is not None else make_backend()
    sock = _bound_and_loaded(backend, host, port)
    app = create_app(backend, served_model_name, api_key=api_key)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="model-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise ThoughtSourceError(f"the model server did not start on {host}:{port}")
        time.sleep(0.01)
    handle = ModelServerHandle(f"http://{host}:{sock.getsockname()[1]}/v1", served_model_name, backend, server, thread)
    try:
        yield handle
    finally:
        handle.close()
        sock.close()
