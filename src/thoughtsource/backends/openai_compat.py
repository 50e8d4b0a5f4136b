"""Any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, hosted APIs) over async httpx.

One :class:`OpenAIBackend` talks to one model on one or more servers:

* chat (``/chat/completions``) when a :class:`Request` has ``messages``, else completions
  (``/completions``); ``api="chat"`` wraps plain prompts as one user message for chat-only APIs;
* at most ``concurrency`` requests in flight, optional requests- and tokens-per-minute budgets
  (token buckets refilled continuously);
* retries on 408/409/425/429/5xx, timeouts and dropped connections with exponential backoff and
  full jitter, waiting at least what ``Retry-After`` (or ``retry-after-ms``) says; a server that
  answered 429 with Retry-After gets no request before that time; after ``max_attempts`` a
  :class:`BackendError` (backend, status, attempts);
* an empty or ``null`` completion, a body that is not JSON or has no choices count as failed
  attempts and are retried (``allow_empty=True`` accepts empty completions);
* a list of ``base_url`` s: each attempt goes to the ready server with the fewest requests in
  flight (or round robin); a retry prefers another server, and a server that fails repeatedly is
  rested for a while (failover);
* a 401 or 403 (the key) or 404 (the model, or a URL without the API) is the same for every request: the
  first one raises a *fatal* :class:`BackendError` naming the server, the status and the key's environment
  variable, and no request is sent after it;
* when every server has refused a connection and no request has succeeded yet, the run is over:
  the next failure raises a *fatal* :class:`BackendError` at once (no retries), which stops
  generation with one message instead of every request running all its retries;
* ``counters`` (requests, retries, errors, completed, failed, tokens) for progress bars.

The API key comes from ``api_key`` or the environment variable named by ``api_key_env``; it is
kept as a ``SecretStr`` and never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import os
import random
import ssl
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ..errors import BackendError, ConfigError
from ..listen import MODEL_SERVER_PORT
from ..reasoning import split_reasoning, split_tokens
from .base import BackendSettings, Completion, Request, extra_params
from .counters import Counters, loop_state, request_seed

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class OpenAIOptions(BaseModel):
    """Options of the ``openai`` backend (``get_backend("openai", **options)``)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Model name as the server knows it.")
    base_url: list[str] = Field(
        default_factory=lambda: [f"http://127.0.0.1:{MODEL_SERVER_PORT}/v1"],
        description="One or more server URLs; a URL without a path gets '/v1'. Load is spread over all of them "
        "(default: serve-model's default address).",
    )
    api_key: SecretStr | None = Field(default=None, description="API key; by default read from $api_key_env.")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="Environment variable holding the API key.")
    api: Literal["auto", "chat", "completions"] = Field(
        default="auto", description="auto: chat for requests with messages, completions otherwise."
    )
    server_kind: str = Field(
        default="openai-compatible",
        description="What serves the model (vllm, llama.cpp, ollama, openai, ...); part of the cache identity.",
    )
    concurrency: int = Field(default=16, ge=1, description="Requests in flight at most (over all servers).")
    pool_size: int = Field(
        default=4, ge=0,
        description="Connections per HTTP client; concurrency is spread over several clients of this size (0: one client).",
    )
    requests_per_minute: float | None = Field(default=None, gt=0, description="Request budget per minute.")
    tokens_per_minute: float | None = Field(
        default=None, gt=0, description="Token budget per minute (prompt estimate + max_tokens, corrected by usage)."
    )
    max_attempts: int = Field(default=6, ge=1, description="Attempts per request before a BackendError.")
    allow_empty: bool = Field(default=False, description="Accept empty or null completions (by default they are retried).")
    backoff_base_s: float = Field(default=0.5, ge=0, description="First backoff ceiling; doubles per attempt.")
    backoff_max_s: float = Field(default=30.0, ge=0, description="Largest backoff ceiling.")
    max_retry_after_s: float = Field(default=120.0, ge=0, description="Longest Retry-After honoured.")
    timeout_s: float = Field(default=120.0, gt=0, description="Per-attempt timeout (connect, read, write).")
    routing: Literal["least-inflight", "round-robin"] = "least-inflight"
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra JSON fields sent with every request (e.g. top_k, repetition_penalty)."
    )
    reasoning: Literal["auto", "off"] = Field(
        default="auto",
        description="auto: a reasoning model's thinking (the response field reasoning_content or reasoning, else the text "
        "inside think_tags) becomes the CoT and the final content the answer; off: the text is taken as it comes.",
    )
    think_tags: tuple[str, str] = Field(default=("<think>", "</think>"), description="Start and end tag of inline reasoning.")
    think_started: bool = Field(
        default=False, description="The chat template opens the thought itself (DeepSeek-R1): the output starts inside it.",
    )
    reasoning_effort: str | None = Field(
        default=None, description="Reasoning budget sent as reasoning_effort (low, medium, high; OpenAI, vLLM, gpt-oss).",
    )
    reasoning_max_tokens: int | None = Field(
        default=None, gt=0,
        description="Reasoning token budget sent as thinking_token_budget (vLLM) and reasoning.max_tokens (OpenRouter); "
        "max_tokens stays the limit of reasoning and answer together.",
    )
    prefill_params: bool = Field(
        default=False,
        description="When a chat request ends with an assistant message (the start of the answer, continued by the model), "
        "also send vLLM's continue_final_message=true / add_generation_prompt=false. llama.cpp and serve-model continue a "
        "final assistant message without them; hosted APIs may reject unknown fields.",
    )

    @field_validator("base_url", mode="before")
    @classmethod
    def _split_urls(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [u.strip() for u in v.split(",") if u.strip()]
        return v

    @field_validator("base_url")
    @classmethod
    def _normalise_urls(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("at least one base_url is needed")
        out = []
        for url in v:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError(f"not an http(s) URL: {url!r}")
            url = url.rstrip("/")
            if parts.path in ("", "/"):
                url += "/v1"
            out.append(url)
        return out


@dataclass
class _Endpoint:
    url: str
    inflight: int = 0
    not_before: float = 0.0  # monotonic time before which no request goes here (Retry-After, resting)
    consecutive_failures: int = 0
    requests: int = 0
    errors: int = 0
    refused: bool = False  # the last attempt here could not connect at all


class _TokenBucket:
    """Continuous-refill token bucket holding at most one second of budget; may run into debt."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.stamp = time.monotonic()
        self.lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    async def acquire(self, amount: float) -> None:
        async with self.lock:  # first come, first served
            while True:
                self._refill()
                need = min(amount, self.capacity)
                if self.level >= need:
                    self.level -= amount
                    return
                await asyncio.sleep((need - self.level) / self.rate)

    def adjust(self, delta: float) -> None:
        """Charge ``delta`` more (or less, when negative) than acquired, once the real usage is known."""
        self._refill()
        self.level = min(self.capacity, self.level - delta)


class _LoopState:
    """What binds to one event loop: the HTTP clients, the semaphore and the bucket locks.

    ``concurrency`` connections are spread over ``ceil(concurrency / pool_size)`` httpx clients of at
    most ``pool_size`` connections each; an attempt takes the client with the fewest requests in
    flight.  One client with many connections costs client CPU that grows with the pool (httpcore
    scans its connections for every request; docs/benchmarks.md has the measurements).
    """

    def __init__(self, opts: OpenAIOptions, headers: dict[str, str], ssl_context: ssl.SSLContext) -> None:
        self.loop = asyncio.get_running_loop()
        self.semaphore = asyncio.Semaphore(opts.concurrency)
        size = opts.concurrency if opts.pool_size == 0 else min(opts.pool_size, opts.concurrency)
        count = -(-opts.concurrency // size)
        self.clients = [
            httpx.AsyncClient(
                headers=headers,
                verify=ssl_context,  # one context for all clients: loading the CA bundle costs ~40 ms each
                timeout=httpx.Timeout(opts.timeout_s),
                limits=httpx.Limits(max_connections=size, max_keepalive_connections=size),
            )
            for _ in range(count)
        ]
        self.client_inflight = [0] * count
        self.rpm = _TokenBucket(opts.requests_per_minute) if opts.requests_per_minute else None
        self.tpm = _TokenBucket(opts.tokens_per_minute) if opts.tokens_per_minute else None

    async def post(self, url: str, body: dict[str, Any]) -> httpx.Response:
        """POST on the least busy client."""
        i = min(range(len(self.clients)), key=self.client_inflight.__getitem__)
        self.client_inflight[i] += 1
        try:
            return await self.clients[i].post(url, json=body)
        finally:
            self.client_inflight[i] -= 1

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _AttemptFailed(Exception):
    def __init__(self, status: int | None, detail: str, retry_after: float | None = None, retryable: bool = True,
                 refused: bool = False) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.retry_after = retry_after
        self.retryable = retryable
        self.refused = refused


def _raw_content(choice: Any, path: str) -> Any:
    if not isinstance(choice, dict):
        return None
    if path == "/chat/completions":
        message = choice.get("message")
        return message.get("content") if isinstance(message, dict) else None
    return choice.get("text")


def _choice_text(choice: Any, path: str) -> str:
    """The completion text of one choice ("" for a missing or null content)."""
    content = _raw_content(choice, path)
    return content if isinstance(content, str) else ""


REASONING_FIELDS = ("reasoning_content", "reasoning")


def _choice_reasoning(choice: Any, path: str) -> tuple[str | None, str]:
    """(reasoning text, its field name) from a chat message's reasoning_content or reasoning field; (None, "") if none."""
    if path != "/chat/completions" or not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
        return None, ""
    message = choice["message"]
    for name in REASONING_FIELDS:
        value = message.get(name)
        if isinstance(value, str) and value.strip():
            return value, name
    return None, ""


class OpenAIBackend:
    """The ``openai`` backend: see the module docstring."""

    name = "openai"

    def __init__(self, **options: Any) -> None:
        self.options = OpenAIOptions(**options)
        key = self.options.api_key
        if key is None and os.environ.get(self.options.api_key_env):
            key = SecretStr(os.environ[self.options.api_key_env])
        self._headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
        self.endpoints = [_Endpoint(url) for url in self.options.base_url]
        self.counters = Counters()
        self._rr = 0
        self._states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._ssl_context: ssl.SSLContext | None = None
        self._refused: BackendError | None = None  # the first 401/403/404: fatal, raised for every later request

    @classmethod
    def options_from(cls, settings: BackendSettings) -> dict[str, Any]:
        """A generate config gives the model, its servers (when it names any), the calls in flight and whether empty
        completions are stored."""
        options: dict[str, Any] = {"model": settings.model}
        if settings.base_urls:
            options["base_url"] = settings.base_urls
        options["concurrency"] = settings.concurrency
        options["allow_empty"] = settings.allow_empty
        return options

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAIBackend(model={self.options.model!r}, base_url={self.options.base_url!r})"

    def cache_identity(self) -> dict[str, Any]:
        """Model and server kind (not the URLs: the same model on two servers answers the same)."""
        o = self.options
        identity: dict[str, Any] = {
            "backend": self.name,
            "model": o.model,
            "server_kind": o.server_kind,
            "extra_body": o.extra_body,
        }
        # only what changes the output; left out at their defaults so that stored completions keep their keys
        if o.reasoning_effort is not None:
            identity["reasoning_effort"] = o.reasoning_effort
        if o.reasoning_max_tokens is not None:
            identity["reasoning_max_tokens"] = o.reasoning_max_tokens
        return identity

    # -- the protocol -----------------------------------------------------------------------

    async def complete(self, requests: list[Request]) -> list[Completion]:
        state = self._loop_state()
        results = await asyncio.gather(*(self._complete_one(r, state) for r in requests), return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return list(results)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        """Close the HTTP client of this event loop and of loops that have finished."""
        loop = asyncio.get_running_loop()
        mine = [old for old in self._states if old is loop or old.is_closed()]
        for state in [self._states.pop(old) for old in mine]:
            with contextlib.suppress(RuntimeError):  # a client of a finished event loop: its sockets went with it
                await state.aclose()

    # -- internals --------------------------------------------------------------------------

    def _loop_state(self) -> _LoopState:
        """Client, semaphore and buckets of the running event loop (asyncio objects bind to one loop)."""
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        context = self._ssl_context
        return loop_state(self._states, lambda: _LoopState(self.options, self._headers, context))

    def _route(self, request: Request) -> tuple[str, dict[str, Any]]:
        o = self.options
        body: dict[str, Any] = {"model": o.model, "max_tokens": request.max_tokens, "temperature": request.temperature}
        if request.top_p != 1.0:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop"] = list(request.stop)
        if request.temperature > 0:
            body["seed"] = request_seed(request.seed, request.sample_index)
        elif request.seed is not None:
            body["seed"] = request.seed
        if o.reasoning_effort is not None:
            body["reasoning_effort"] = o.reasoning_effort
        if o.reasoning_max_tokens is not None:
            body["thinking_token_budget"] = o.reasoning_max_tokens
            body["reasoning"] = {"max_tokens": o.reasoning_max_tokens}
        body.update(extra_params(request))  # vLLM's names; a server without them refuses them (never silently ignored)
        body.update(o.extra_body)
        use_chat = o.api == "chat" or (o.api == "auto" and request.messages)
        if use_chat and request.prompt_ids is not None:
            raise ConfigError(f"backend openai: api='chat' cannot send a prompt given as token ids (model {o.model})")
        if use_chat:
            body["messages"] = list(request.messages) if request.messages else [{"role": "user", "content": request.prompt}]
            if o.prefill_params and request.messages and request.messages[-1].get("role") == "assistant":
                body.setdefault("continue_final_message", True)
                body.setdefault("add_generation_prompt", False)
            return "/chat/completions", body
        if request.messages:
            raise ConfigError(f"backend openai: api='completions' cannot send chat messages (model {o.model})")
        body["prompt"] = list(request.prompt_ids) if request.prompt_ids is not None else request.prompt
        return "/completions", body

    async def _pick_endpoint(self, avoid: _Endpoint | None) -> _Endpoint:
        while True:
            now = time.monotonic()
            ready = [e for e in self.endpoints if e.not_before <= now]
            if not ready:
                await asyncio.sleep(min(e.not_before for e in self.endpoints) - now)
                continue
            if avoid is not None and len(ready) > 1:
                ready = [e for e in ready if e is not avoid]
            n = len(self.endpoints)
            order = sorted(ready, key=lambda e: (self.endpoints.index(e) - self._rr) % n)
            if self.options.routing == "least-inflight":
                order.sort(key=lambda e: e.inflight)  # stable: ties keep the round-robin order
            chosen = order[0]
            self._rr = (self.endpoints.index(chosen) + 1) % n
            return chosen

    async def _attempt(self, state: _LoopState, endpoint: _Endpoint, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = await state.post(endpoint.url + path, body)
        except httpx.TimeoutException as e:
            raise _AttemptFailed(None, f"timeout ({type(e).__name__})") from e
        except httpx.ConnectError as e:  # nothing listens there (refused, unknown host)
            raise _AttemptFailed(None, f"cannot connect to {endpoint.url} ({e})", refused=True) from e
        except httpx.TransportError as e:  # reset, closed without a response, truncated body
            raise _AttemptFailed(None, f"connection error ({type(e).__name__}: {e})") from e
        if resp.status_code != 200:
            detail = resp.text[:300].replace("\n", " ")
            retryable = resp.status_code in RETRY_STATUSES or resp.status_code >= 500
            raise _AttemptFailed(
                resp.status_code, f"HTTP {resp.status_code}: {detail}", parse_retry_after(resp.headers), retryable
            )
        try:
            data: dict[str, Any] = resp.json()
            choice = data["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise _AttemptFailed(200, f"malformed response: {resp.text[:200]!r}") from e
        if (not self.options.allow_empty and not _choice_text(choice, path).strip()
                and not (self.options.reasoning == "auto" and _choice_reasoning(choice, path)[0])):  # cut off mid-thought
            raise _AttemptFailed(200, f"empty completion (content {_raw_content(choice, path)!r}, "
                                      f"finish_reason {choice.get('finish_reason')!r}); allow_empty=True accepts it")
        return data

    async def _complete_one(self, request: Request, state: _LoopState) -> Completion:
        o = self.options
        path, body = self._route(request)
        estimate = request.max_tokens + len(str(body.get("messages") or body.get("prompt"))) / 4
        t0 = time.monotonic()
        avoid: _Endpoint | None = None
        failure: _AttemptFailed | None = None
        for attempt in range(1, o.max_attempts + 1):
            if failure is not None:
                ceiling = min(o.backoff_max_s, o.backoff_base_s * 2 ** (attempt - 2))
                delay = random.uniform(0, ceiling)  # full jitter
                if failure.retry_after is not None:
                    delay = max(delay, min(failure.retry_after, o.max_retry_after_s))
                log.debug("retrying %s in %.2fs after %s (attempt %d)", path, delay, failure.detail, attempt)
                await asyncio.sleep(delay)
            async with state.semaphore:
                if self._refused is not None:  # a 401/403/404 came back: no request is sent after it
                    self.counters.failed += 1
                    raise self._refused
                if state.rpm:
                    await state.rpm.acquire(1)
                if state.tpm:
                    await state.tpm.acquire(estimate)
                endpoint = await self._pick_endpoint(avoid)
                endpoint.inflight += 1
                endpoint.requests += 1
                self.counters.requests += 1
                if attempt > 1:
                    self.counters.retries += 1
                try:
                    data = await self._attempt(state, endpoint, path, body)
                except _AttemptFailed as e:
                    failure = e
                    self._record_failure(endpoint, e)
                    avoid = endpoint
                    if e.status in (401, 403, 404):
                        self.counters.failed += 1
                        if self._refused is None:
                            self._refused = self._refusal(endpoint, e, attempt)
                        raise self._refused from None
                    if self._unreachable():
                        self.counters.failed += 1
                        raise BackendError(
                            f"{o.model}: no server accepts connections ({', '.join(x.url for x in self.endpoints)}) and no "
                            f"request has succeeded; is the server running? Last error: {e.detail}",
                            backend=self.name, attempts=attempt, fatal=True,
                        ) from None
                    if not e.retryable:
                        break
                    continue
                finally:
                    endpoint.inflight -= 1
            endpoint.consecutive_failures = 0
            endpoint.refused = False
            return self._completion(request, data, path, state, estimate, t0, attempt)
        self.counters.failed += 1
        assert failure is not None
        raise BackendError(
            f"{o.model}: request failed: {failure.detail}", backend=self.name, status=failure.status, attempts=attempt
        )

    def _refusal(self, endpoint: _Endpoint, e: _AttemptFailed, attempts: int) -> BackendError:
        """The one fatal error of a 401/403 (the key) or 404 (the model or the URL): every other request would get it too."""
        o = self.options
        if e.status == 404:
            why = f"model '{o.model}' not found (or no API at this URL)"
        elif self._headers:
            source = "the api_key option" if o.api_key is not None else f"${o.api_key_env}"
            why = f"the API key from {source} was {'refused' if e.status == 401 else 'not allowed this model'}"
        else:
            why = f"no API key was sent: ${o.api_key_env} is not set"
        return BackendError(f"{endpoint.url} answered HTTP {e.status}: {why} ({e.detail[len(f'HTTP {e.status}: '):][:160]})",
                            backend=self.name, status=e.status, attempts=attempts, fatal=True)

    def _unreachable(self) -> bool:
        """Every server refused its last connection and nothing has been answered yet: no point retrying."""
        return self.counters.completed == 0 and all(e.refused for e in self.endpoints)

    def _record_failure(self, endpoint: _Endpoint, failure: _AttemptFailed) -> None:
        self.counters.errors += 1
        endpoint.refused = failure.refused
        endpoint.errors += 1
        endpoint.consecutive_failures += 1
        now = time.monotonic()
        if failure.status == 429 and failure.retry_after is not None:
            endpoint.not_before = max(endpoint.not_before, now + min(failure.retry_after, self.options.max_retry_after_s))
        elif endpoint.consecutive_failures >= 3 and len(self.endpoints) > 1:
            rest = min(self.options.backoff_max_s, self.options.backoff_base_s * 2 ** (endpoint.consecutive_failures - 3))
            endpoint.not_before = max(endpoint.not_before, now + rest)
            log.debug("resting %s for %.1fs after %d failures", endpoint.url, rest, endpoint.consecutive_failures)

    def _completion(
        self, request: Request, data: dict[str, Any], path: str, state: _LoopState, estimate: float, t0: float, attempts: int
    ) -> Completion:
        choice = data["choices"][0]
        text = _choice_text(choice, path)
        usage = data.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        reasoning, source, reasoning_tokens = self._reasoning(choice, path, text, usage, completion_tokens)
        if reasoning is not None:
            text = reasoning[1]
            reasoning_text: str | None = reasoning[0]
        else:
            reasoning_text = None
        if state.tpm and (prompt_tokens or completion_tokens):
            state.tpm.adjust(prompt_tokens + completion_tokens - estimate)
        self.counters.completed += 1
        self.counters.prompt_tokens += prompt_tokens
        self.counters.completion_tokens += completion_tokens
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            finish_reason=choice.get("finish_reason") or "",
            latency_s=time.monotonic() - t0,
            attempts=attempts,
            raw=data,
            reasoning=reasoning_text,
            reasoning_tokens=reasoning_tokens,
            reasoning_source=source,
        )

    def _reasoning(
        self, choice: dict[str, Any], path: str, text: str, usage: dict[str, Any], completion_tokens: int
    ) -> tuple[tuple[str, str] | None, str, int]:
        """((reasoning, answer) or None, source, reasoning tokens) of one choice (see thoughtsource.reasoning)."""
        o = self.options
        if o.reasoning == "off":
            return None, "", 0
        field_text, field = _choice_reasoning(choice, path)
        if field_text is not None:
            reasoning, answer, source = field_text.strip(), text, field
        else:
            split = split_reasoning(text, o.think_tags, started=o.think_started)
            if split.reasoning is None:
                return None, "", 0
            reasoning, answer, source = split.reasoning, split.answer, "tags"
        details = usage.get("completion_tokens_details") or {}
        reported = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if isinstance(reported, int) and reported >= 0:
            tokens = reported
        else:  # the server gave one total: split it by characters (ReasoningInfo.tokens_estimated)
            tokens = split_tokens(completion_tokens, reasoning, answer)[0]
        return (reasoning, answer), source, tokens
