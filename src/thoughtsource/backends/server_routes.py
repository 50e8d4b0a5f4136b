"""``serve-model``'s routes: thin handlers over the served backend (:class:`Served`, on ``app.state.served``).

Each handler parses its body (:mod:`.openai_api`), asks the backend, and answers in OpenAI's shape.  What a backend
can do beyond completing is asked of its declared capabilities (:mod:`.base`): a backend that does not
:class:`~.base.Tokenizes` has no ``/tokenize`` (404), one that does not :class:`~.base.ScoresTokens` refuses
``logprobs`` (400), and one that :class:`~.base.Streams` sends a stream's tokens as they are chosen.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.metadata
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi import Request as HttpRequest
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException
from starlette.responses import StreamingResponse

from ..errors import BackendError
from ..interrupt import Interrupted
from .base import Backend, Batches, Completion, Request, ScoresTokens, Streams, Tokenizes, TokenScores, TokenSink, sampling_extras
from .openai_api import (
    ApiError,
    ChatBody,
    CommonBody,
    CompletionBody,
    DetokenizeBody,
    TextStream,
    TokenizeBody,
    chat_messages,
    check_ids,
    error_type,
    prompts_of,
    sse,
    usage,
)
from .score_batch import ScoreBatcher
from .server_guard import Metrics

log = logging.getLogger(__name__)

#: the routes /metrics counts apart (any other path counts as "other")
METRIC_PATHS = ["/v1/chat/completions", "/v1/completions", "/v1/models", "/tokenize", "/detokenize", "/tokenizer_info",
                "/health", "/version", "/metrics"]

#: each choice's extras (logprobs, prompt_logprobs) once its completion is generated
ExtrasOf = Callable[[list[Completion]], Awaitable[list[dict[str, Any]]]]


@dataclass
class Served:
    """The served model: the backend, its name, and what the server keeps beside it (``app.state.served``)."""

    backend: Backend
    name: str
    default_max_tokens: int = 256
    metrics: Metrics = field(default_factory=lambda: Metrics(METRIC_PATHS))
    started: int = field(default_factory=lambda: int(time.time()))
    batcher: ScoreBatcher | None = None
    fingerprint: str | None = None
    fingerprinted: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.backend, Batches):  # concurrent requests' scoring shares forward passes
            self.batcher = ScoreBatcher(self.backend.token_logprobs_batch, on_pass=self.metrics.scored)


async def _served(request: HttpRequest) -> Served:
    served: Served = request.app.state.served
    return served


State = Annotated[Served, Depends(_served)]
router = APIRouter()


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """The score batcher and the backend close when the server stops."""
    yield
    served: Served = app.state.served
    if served.batcher is not None:
        await served.batcher.close()
    await served.backend.aclose()


# --------------------------------------------------------------------------- errors
def error(status: int, message: str, param: str | None = None, code: str | None = None) -> JSONResponse:
    body = {"message": message, "type": error_type(status), "param": param, "code": code}
    return JSONResponse({"error": body}, status_code=status)


async def api_error(_: HttpRequest, e: Exception) -> JSONResponse:
    assert isinstance(e, ApiError)
    return error(e.status, e.message, e.param, e.code)


async def invalid(_: HttpRequest, e: Exception) -> JSONResponse:
    assert isinstance(e, RequestValidationError)
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


async def http_error(request: HttpRequest, e: Exception) -> JSONResponse:
    assert isinstance(e, HTTPException)
    message = f"no route {request.method} {request.url.path}" if e.status_code in (404, 405) else str(e.detail)
    return error(e.status_code, message)


async def crashed(_: HttpRequest, e: Exception) -> JSONResponse:
    log.exception("request failed")
    return error(500, f"internal error: {type(e).__name__}: {e}")


#: what each error the app raises is answered with
EXCEPTION_HANDLERS: dict[type[Exception], Callable[[HttpRequest, Exception], Awaitable[JSONResponse]]] = {
    ApiError: api_error, RequestValidationError: invalid, HTTPException: http_error, Exception: crashed,
}


# --------------------------------------------------------------------------- capabilities and checks
def scorer(s: Served, param: str) -> ScoresTokens:
    """The backend as a scorer; a 400 naming ``param`` when it cannot score tokens."""
    if not isinstance(s.backend, ScoresTokens):
        raise ApiError(400, f"{param}: this backend ({s.backend.name}) cannot score tokens", param, "unsupported_parameter")
    return s.backend


def tokenizer(s: Served) -> Tokenizes:
    """The backend as a tokenizer; a 404 when it has none to serve."""
    if not isinstance(s.backend, Tokenizes):
        raise ApiError(404, f"this backend ({s.backend.name}) has no tokenizer to serve")
    return s.backend


def vocab(s: Served) -> int | None:
    return s.backend.vocab_size() if isinstance(s.backend, Tokenizes) else None


def live(s: Served, echo_only: bool, scored: bool) -> bool:
    """Whether a stream's tokens go out as they decode (see :mod:`.server`): not when each chunk carries its tokens'
    logprobs (scored once the row is generated)."""
    return isinstance(s.backend, Streams) and bool(s.backend.streams_tokens) and not echo_only and not scored


def check(s: Served, body: CommonBody) -> None:
    """The model is the served one, every field is supported, and prompt_logprobs can be given."""
    if body.model != s.name:
        raise ApiError(404, f"The model '{body.model}' does not exist; this server serves '{s.name}'.",
                       "model", "model_not_found")
    if (name := body.unsupported()) is not None:
        raise ApiError(400, f"{name}: not supported by this server (thoughtsource serve-model)", name, "unsupported_parameter")
    if body.prompt_logprobs is not None:
        scorer(s, "prompt_logprobs")
        if body.stream:  # as vLLM: they would come before the first token, in no chunk's field
            raise ApiError(400, "prompt_logprobs: not available with stream=true", "prompt_logprobs", "invalid_value")


def check_context(s: Served, requests: list[Request], param: str) -> None:
    """A prompt and max_tokens longer than the model's context: a 400 as vLLM and OpenAI give, not a failed generate."""
    b = s.backend
    if not isinstance(b, Tokenizes) or not (ctx := b.max_context()):
        return
    for r in {id(r.prompt_ids or r.prompt or r.messages): r for r in requests}.values():
        n = b.prompt_tokens(r)
        if n + r.max_tokens > ctx:
            raise ApiError(400, f"This model's maximum context length is {ctx} tokens. However, you requested "
                           f"{n + r.max_tokens} tokens ({n} in the {param}, {r.max_tokens} in the completion). Please "
                           f"reduce the length of the {param} or completion.", param, "context_length_exceeded")


# --------------------------------------------------------------------------- generating
async def run(s: Served, requests: list[Request], echo_only: bool, sinks: list[TokenSink] | None = None) -> list[Completion]:
    """The completions of ``requests``: the prompt alone for ``echo_only`` (max_tokens 0), a greedy token from a scoring
    pass where the backend :class:`~.base.Batches`, else generated (``sinks`` receiving the tokens as they come)."""
    b, metrics = s.backend, s.metrics
    if echo_only and isinstance(b, Tokenizes):  # max_tokens 0 (lm-eval's log-likelihoods): the prompt only, nothing decoded
        prompts = await asyncio.to_thread(lambda: [b.prompt_ids(r) for r in requests])
        metrics.generated(sum(len(ids) for ids in prompts), 0)
        return [Completion(text="", prompt_tokens=len(ids), completion_tokens=0, finish_reason="length",
                           raw={"prompt_ids": ids, "token_ids": [], "stop_reason": None}) for ids in prompts]
    if isinstance(b, Batches) and not sinks and all(
            r.max_tokens == 1 and r.temperature == 0 and not sampling_extras(r) for r in requests):
        out = await asyncio.to_thread(b.next_token_completions, requests)  # one greedy token: from a scoring pass (lm-eval's)
        metrics.generated(sum(c.prompt_tokens for c in out), sum(c.completion_tokens for c in out))
        return out
    out = await _generate(s, requests, sinks)
    if echo_only:  # max_tokens 0: the one token generated is not part of the answer
        out = [dataclasses.replace(c, text="", completion_tokens=0, finish_reason="length",
                                   raw={**c.raw, "token_ids": []}) for c in out]
    return out


async def _generate(s: Served, requests: list[Request], sinks: list[TokenSink] | None) -> list[Completion]:
    """The backend's completions of ``requests``, its failures as API errors, counted in the metrics."""
    metrics = s.metrics
    metrics.queued(len(requests))
    try:
        if sinks and isinstance(s.backend, Streams):
            out = await s.backend.complete(requests, sinks=sinks)
        else:
            out = await s.backend.complete(requests)
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
    return out


async def run_watched(s: Served, requests: list[Request], echo_only: bool, http: HttpRequest) -> list[Completion]:
    """run() for a non-streamed answer: a client that leaves (a timeout) stops its rows at their next token (not in
    the graph mode, which hands its tokens back only at the end)."""
    if not live(s, echo_only, False) or (isinstance(s.backend, Streams) and s.backend.mode == "graph") \
            or all(r.max_tokens <= 1 for r in requests):  # one token: nothing to stop early
        return await run(s, requests, echo_only)
    left = threading.Event()

    async def watch() -> None:
        while not await http.is_disconnected():
            await asyncio.sleep(0.25)
        left.set()

    watcher = asyncio.ensure_future(watch())
    try:
        return await run(s, requests, echo_only, [lambda _token: not left.is_set() for _ in requests])
    finally:
        watcher.cancel()


# --------------------------------------------------------------------------- scoring
async def score(s: Served, ids: list[int], top: int, param: str) -> TokenScores:
    """Per token of ``ids``: (logprob, top ids); scored with whatever else waits (:mod:`.score_batch`)."""
    b = scorer(s, param)
    if s.batcher is not None:
        return await s.batcher.score(ids, top)
    return await asyncio.to_thread(b.token_logprobs, ids, top)


async def scored(s: Served, c: Completion, top: int, echo: bool) -> tuple[list[str], TokenScores, dict[int, str]]:
    """(token names, [(logprob, [(id, logprob)])], names of the top ids) of the completion's tokens, the prompt's
    first with echo."""
    b = scorer(s, "logprobs")
    prompt_ids, gen = list(c.raw["prompt_ids"]), list(c.raw["token_ids"])
    values = await score(s, prompt_ids + gen, top, "logprobs")
    first = 0 if echo else len(prompt_ids)
    values = values[first:]
    alt_ids = sorted({i for _, alts in values for i, _ in alts})
    return b.decode_tokens((prompt_ids + gen)[first:]), values, dict(zip(alt_ids, b.decode_tokens(alt_ids), strict=True))


async def completion_logprobs(s: Served, c: Completion, top: int, echo: bool) -> dict[str, Any]:
    names, values, by_id = await scored(s, c, top, echo)
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


async def chat_logprobs(s: Served, c: Completion, top: int) -> dict[str, Any]:
    names, values, by_id = await scored(s, c, top, False)
    names, values = names[: c.completion_tokens], values[: c.completion_tokens]  # OpenAI's chat omits the end token

    def entry(name: str, lp: float | None) -> dict[str, Any]:
        return {"token": name, "logprob": lp, "bytes": list(name.encode())}

    return {"content": [{**entry(name, lp), "top_logprobs": [entry(by_id[i], v) for i, v in alts]}
                        for name, (lp, alts) in zip(names, values, strict=True)]}


async def prompt_logprobs(s: Served, c: Completion, top: int) -> list[dict[str, Any] | None]:
    """vLLM's ``prompt_logprobs``: per prompt token (None for the first), its id's log-probability and the ``top``
    most likely ids at that place, each with its text."""
    b = scorer(s, "prompt_logprobs")
    ids = list(c.raw["prompt_ids"])
    values = await score(s, ids, top, "prompt_logprobs")
    known = sorted(set(ids) | {i for _, alts in values for i, _ in alts})
    names = dict(zip(known, b.decode_tokens(known), strict=True))
    out: list[dict[str, Any] | None] = [None]
    for token, (lp, alts) in zip(ids[1:], values[1:], strict=True):
        entry = {str(i): {"logprob": v, "rank": rank, "decoded_token": names[i]} for rank, (i, v) in enumerate(alts, 1)}
        entry.setdefault(str(token), {"logprob": lp, "rank": None, "decoded_token": names[token]})
        out.append(entry)
    return out


# --------------------------------------------------------------------------- streaming
def pieces(s: Served, c: Completion) -> list[tuple[str, int]]:
    """The completion's text in one piece per token (the stream's chunks), each with how many of its tokens it
    covers (tokens after the text, an end token, go with the last piece); one piece without token ids."""
    gen = list(c.raw.get("token_ids") or [])
    if not gen or not isinstance(s.backend, Tokenizes) or not c.text:
        return [(c.text, len(gen))] if c.text or gen else []
    decode = s.backend.decode_text
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


def window(kind: str, logprobs: dict[str, Any], lo: int, hi: int) -> dict[str, Any]:
    """The logprobs of tokens lo to hi - 1 of a choice (a streamed chunk's)."""
    if kind == "chat":
        return {"content": logprobs["content"][lo:hi]}
    return {key: values[lo:hi] for key, values in logprobs.items()}


class ClosingStream(StreamingResponse):
    """A StreamingResponse that closes its generator however the response ends (a client that disconnects
    included), so the generator's ``finally`` runs at once, not when the garbage collector gets to it."""

    async def stream_response(self, send: Any) -> None:
        try:
            await super().stream_response(send)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]


@dataclass
class Stream:
    """One streamed response: ``requests`` (one choice each) of ``kind`` (chat or text); ``extras_of(out)`` gives
    each choice's logprobs once generated, sent with the chunks of their tokens when ``scored``; ``echoes`` each
    choice's echoed prompt (completions)."""

    s: Served
    kind: str
    rid: str
    requests: list[Request]
    body: CommonBody
    echo_only: bool
    extras_of: ExtrasOf
    echoes: list[str]
    scored: bool
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def usage(self) -> bool:
        return bool((self.body.stream_options or {}).get("include_usage"))

    def chunk(self, choices: list[dict[str, Any]]) -> str:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return sse({"id": self.rid, "object": obj, "created": self.created, "model": self.s.name, "choices": choices,
                    **({"usage": None} if self.usage else {})})

    def piece(self, i: int, text: str, logprobs: dict[str, Any] | None = None) -> str:
        if self.kind == "chat":
            return self.chunk([{"index": i, "delta": {"content": text}, "logprobs": logprobs, "finish_reason": None}])
        return self.chunk([{"index": i, "text": text, "logprobs": logprobs, "finish_reason": None}])

    def last(self, i: int, c: Completion, extra: dict[str, Any]) -> str:
        body_key: dict[str, Any] = {"delta": {}} if self.kind == "chat" else {"text": ""}
        return self.chunk([{"index": i, **body_key, **extra, "finish_reason": c.finish_reason or "stop"}])

    def opening(self) -> list[str]:
        """What goes out before any token: chat's role chunks, or the echoed prompts of an unscored completion."""
        if self.kind == "chat":
            return [self.chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                 "finish_reason": None}]) for i in range(len(self.requests))]
        return [self.piece(i, echo) for i, echo in enumerate(self.echoes) if echo and not self.scored]

    async def events(self) -> AsyncIterator[str]:
        """The response's server-sent events; generation starts with the first, and stops when the client leaves."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, str] | None] = asyncio.Queue()
        left = threading.Event()  # the client disconnected: every row of this response stops
        b = self.s.backend
        texts = [TextStream(b.decode_generated, r.stop) for r in self.requests] \
            if isinstance(b, Streams) and live(self.s, self.echo_only, self.scored) else []

        def sink(i: int) -> TokenSink:
            def on_token(token: int) -> bool:  # in the generating thread
                if left.is_set():
                    return False
                if text := texts[i].add(token):
                    loop.call_soon_threadsafe(queue.put_nowait, (i, text))
                return True
            return on_token

        task = asyncio.ensure_future(run(self.s, self.requests, self.echo_only, [sink(i) for i in range(len(texts))]))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            for event in self.opening():
                yield event
            while (item := await queue.get()) is not None:
                yield self.piece(*item)
            async for event in self.ending(task, texts):
                yield event
        finally:
            if not task.done():  # the client left: its rows stop at their next token, its queued rows are dropped
                left.set()
                task.cancel()

    async def ending(self, task: asyncio.Future[list[Completion]], texts: list[TextStream]) -> AsyncIterator[str]:
        """The events once generation has ended: the rest of each choice (its scored chunks), usage, ``[DONE]``."""
        try:
            out = task.result()
        except Exception as e:  # the response has begun: the error is the stream's last event, as vLLM sends it
            if not isinstance(e, ApiError):
                log.exception("streamed request failed")
                e = ApiError(500, f"internal error: {type(e).__name__}: {e}")
            yield sse({"error": {"message": e.message, "type": error_type(e.status), "param": e.param, "code": e.code}})
            yield "data: [DONE]\n\n"
            return
        extras = await self.extras_of(out)
        for i, c in enumerate(out):
            for event in self.choice_events(i, c, extras[i], texts):
                yield event
        if self.usage:
            yield sse({"id": self.rid, "object": "chat.completion.chunk" if self.kind == "chat" else "text_completion",
                       "created": self.created, "model": self.s.name, "choices": [], "usage": usage(out, self.body.n)})
        yield "data: [DONE]\n\n"

    def choice_events(self, i: int, c: Completion, extra: dict[str, Any], texts: list[TextStream]) -> list[str]:
        """Choice i's chunks not sent yet: each with its tokens' logprobs when scored, then its last chunk."""
        events = []
        if self.scored:  # each chunk with its tokens' logprobs (the echoed prompt's first)
            lp, at = extra["logprobs"], 0
            if self.kind != "chat" and self.echoes[i]:
                at = len(c.raw["prompt_ids"])
                events.append(self.piece(i, self.echoes[i], window(self.kind, lp, 0, at)))
            for text, count in pieces(self.s, c):
                events.append(self.piece(i, text, window(self.kind, lp, at, at + count)))
                at += count
            events.append(self.last(i, c, {"logprobs": None}))
            return events
        for text in [texts[i].rest(c.text)] if texts else [p for p, _ in pieces(self.s, c)]:
            if text:
                events.append(self.piece(i, text))
        events.append(self.last(i, c, extra))
        return events

    def response(self) -> ClosingStream:
        return ClosingStream(self.events(), media_type="text/event-stream")


# --------------------------------------------------------------------------- operators' routes
@router.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/version")
async def version() -> dict[str, str]:
    return {"version": importlib.metadata.version("thoughtsource")}


@router.get("/metrics", response_class=PlainTextResponse)
async def prometheus(s: State) -> PlainTextResponse:
    return PlainTextResponse(s.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


# --------------------------------------------------------------------------- models
async def fingerprint(s: Served) -> str | None:
    """The served weights' fingerprint (a hash of the model folder's files), so a client can check what it talks to."""
    if not s.fingerprinted:
        try:
            identity = await asyncio.to_thread(s.backend.cache_identity)
            s.fingerprint = identity.get("weights")
        except Exception as e:  # a model that cannot be fingerprinted is still served
            log.warning("no weights fingerprint: %s", e)
            s.fingerprint = None
        s.fingerprinted = True
    return s.fingerprint


async def model_entry(s: Served) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": s.name, "object": "model", "created": s.started, "owned_by": "thoughtsource"}
    if (fp := await fingerprint(s)) is not None:
        entry["fingerprint"] = fp
    return entry


# vLLM's tokenizer endpoints, at the server's root: lm-eval's local-completions finds them and tokenizes with the
# served model's own tokenizer (no tokenizer path or hub id needed on the client)
@router.get("/tokenizer_info")
async def tokenizer_info(s: State) -> dict[str, Any]:
    return tokenizer(s).tokenizer_info()


@router.post("/tokenize")
async def tokenize(body: TokenizeBody, s: State) -> dict[str, Any]:
    b = tokenizer(s)
    tokens = b.tokenize(body.prompt, body.add_special_tokens)
    return {"tokens": tokens, "count": len(tokens), "max_model_len": b.max_context()}


@router.post("/detokenize")
async def detokenize(body: DetokenizeBody, s: State) -> dict[str, str]:
    b = tokenizer(s)
    return {"prompt": b.decode_text(list(check_ids(body.tokens, "tokens", "tokens", vocab(s))))}


@router.get("/v1/models")
async def models(s: State) -> dict[str, Any]:
    return {"object": "list", "data": [await model_entry(s)]}


@router.get("/v1/models/{model_id:path}")
async def model(model_id: str, s: State) -> dict[str, Any]:
    if model_id != s.name:
        raise ApiError(404, f"The model '{model_id}' does not exist; this server serves '{s.name}'.",
                       "model", "model_not_found")
    return await model_entry(s)


# --------------------------------------------------------------------------- completions
def response(s: Served, kind: str, rid: str, out: list[Completion], n: int, choices: list[dict[str, Any]]) -> dict[str, Any]:
    """A non-streamed response of the OpenAI API: ``choices`` (each choice's content and extras) in its envelope."""
    return {
        "id": rid,
        "object": kind,
        "created": int(time.time()),
        "model": s.name,
        "choices": [{"index": i, **choice, "finish_reason": c.finish_reason or "stop",
                     "stop_reason": (c.raw or {}).get("stop_reason")}  # vLLM's field: the stop string that fired
                    for i, (choice, c) in enumerate(zip(choices, out, strict=True))],
        "usage": usage(out, n),
    }


@router.post("/v1/chat/completions", response_model=None)
async def chat(body: ChatBody, http: HttpRequest, s: State) -> Any:
    check(s, body)
    if body.top_logprobs and not body.logprobs:
        raise ApiError(400, "top_logprobs: needs logprobs=true", "top_logprobs")
    if body.logprobs:
        scorer(s, "logprobs")
    messages = chat_messages(body)
    base = body.base_request(s.default_max_tokens)
    requests = [Request(messages=messages, sample_index=i, add_generation_prompt=body.add_generation_prompt,
                        continue_final_message=body.continue_final_message, **base) for i in range(body.n)]
    check_context(s, requests, "messages")
    echo_only = body.max_new(s.default_max_tokens) == 0

    async def extras_of(out: list[Completion]) -> list[dict[str, Any]]:
        if not body.logprobs:
            return [{"logprobs": None} for _ in out]
        return [{"logprobs": lp} for lp in await asyncio.gather(*(chat_logprobs(s, c, body.top_logprobs or 0) for c in out))]

    rid = f"chatcmpl-{uuid.uuid4().hex}"
    if body.stream:
        return Stream(s, "chat", rid, requests, body, echo_only, extras_of, [], body.logprobs).response()
    out = await run_watched(s, requests, echo_only, http)
    extras = await extras_of(out)
    answer = response(s, "chat.completion", rid, out, body.n,
                      [{"message": {"role": "assistant", "content": c.text}, **extras[i]} for i, c in enumerate(out)])
    if body.prompt_logprobs is not None:  # vLLM's place for them in a chat answer: beside the choices
        answer["prompt_logprobs"] = await prompt_logprobs(s, out[0], body.prompt_logprobs)
    return answer


def completion_requests(s: Served, body: CompletionBody) -> list[Request]:
    """A completions body's requests: each prompt's n samples, checked against the model's vocabulary and context."""
    prompts = prompts_of(body, vocab(s))
    if body.logprobs is not None:
        scorer(s, "logprobs")
    if body.echo and any(not isinstance(p, str) for p in prompts):
        scorer(s, "echo")
    base = body.base_request(s.default_max_tokens)
    requests = [
        Request(prompt=p, sample_index=i, **base) if isinstance(p, str) else Request(prompt_ids=p, sample_index=i, **base)
        for p in prompts
        for i in range(body.n)
    ]
    check_context(s, requests, "prompt")
    return requests


@router.post("/v1/completions", response_model=None)
async def completions(body: CompletionBody, http: HttpRequest, s: State) -> Any:
    check(s, body)
    requests = completion_requests(s, body)
    echo_only = body.max_new(s.default_max_tokens) == 0
    echoes = [(r.prompt if r.prompt_ids is None else scorer(s, "echo").decode_text(list(r.prompt_ids))) if body.echo else ""
              for r in requests]

    async def extras_of(out: list[Completion]) -> list[dict[str, Any]]:
        top = body.logprobs
        logprobs = await asyncio.gather(*(completion_logprobs(s, c, top, body.echo) for c in out)) if top is not None \
            else [None] * len(out)  # the choices scored together (score_batch.py)
        extras: list[dict[str, Any]] = [{"logprobs": lp} for lp in logprobs]
        if body.prompt_logprobs is not None:  # vLLM's place for them in a completion: each choice
            for extra, lps in zip(extras, await asyncio.gather(*(prompt_logprobs(s, c, body.prompt_logprobs)
                                                                  for c in out)), strict=True):
                extra["prompt_logprobs"] = lps
        return extras

    rid = f"cmpl-{uuid.uuid4().hex}"
    if body.stream:
        return Stream(s, "text", rid, requests, body, echo_only, extras_of, echoes, body.logprobs is not None).response()
    out = await run_watched(s, requests, echo_only, http)
    extras = await extras_of(out)
    for extra, echo in zip(extras, echoes, strict=True):
        if body.echo:
            extra["echo"] = echo
    return response(s, "text_completion", rid, out, body.n,
                    [{"text": extras[i].pop("echo", "") + c.text, **extras[i]} for i, c in enumerate(out)])

