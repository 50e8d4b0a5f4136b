"""A fault-injecting OpenAI-compatible server for tests and benchmarks.

It speaks HTTP/1.1 (parsed by ``h11``) on an asyncio server in a background thread, so it can do
what an ASGI app cannot: close a connection without any response.  It answers
``/v1/chat/completions`` and ``/v1/completions`` deterministically (a canned chain of thought whose
content and final answer derive from the prompt, and from the seed when sampling) and can inject:

* ``latency_s`` (+ uniform ``latency_jitter_s``) before every answer, and ``slow_s`` more for the
  first ``first_slow`` attempts of each request (to provoke client timeouts);
* 429 with ``Retry-After: retry_after_s``, 500, or a dropped connection, either for the first
  ``first_429`` / ``first_500`` / ``first_drop`` attempts of each distinct request body (its *key*),
  or at ``rate_429`` / ``rate_500`` / ``rate_drop`` (decided by a hash of seed, key and attempt, so a
  run is reproducible);
* any :data:`OUTCOMES` as a script: ``faults=["503", "malformed", "empty"]`` are the outcomes of
  attempts 1, 2, 3 of each key (after the ``first_*`` faults), and ``then`` the outcome of every
  later attempt (``"ok"`` unless told otherwise, e.g. ``then="empty"`` for a server that never
  answers).  Outcomes: ``ok``; an HTTP status code (``"503"``; 429 and 503 carry Retry-After);
  ``drop`` (close without a response); ``reset`` (TCP RST); ``malformed`` (200, not JSON);
  ``truncated`` (200, the JSON cut short and the connection closed); ``empty`` (content ``""``);
  ``null`` (content ``null``); ``nochoices`` (``"choices": []``); ``hang`` (answers after
  ``slow_s``, for client timeouts).  ``match`` limits all faults to requests whose prompt contains
  it (e.g. the answer-extraction phrase, to fail stage 2 only).
* ``reasoning``: answer as a reasoning model, the thinking in the message field ``reasoning_content`` or
  ``reasoning`` (with ``usage.completion_tokens_details.reasoning_tokens``), or inline in ``<think>`` tags;
  ``max_tokens`` cuts thinking and answer together, so a small one cuts the model off mid-thought.

From a shell (``--help`` lists every flag; it prints its base URL and serves until Ctrl-C)::

    python -m thoughtsource.testing.fault_server --port 8000 --latency 0.2 --faults 429,malformed --then ok

Every request is recorded (path, body, key, attempt number, outcome, time) for duplicate checks::

    with run_fault_server(latency_s=0.2, first_429=1) as server:
        backend = OpenAIBackend(model="echo", base_url=server.base_url)
        ...
        assert all(r.outcome == "ok" for r in server.requests if r.attempt == 1)
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import h11
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

log = logging.getLogger(__name__)


class FaultConfig(BaseModel):
    """What the fault server injects (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    latency_s: float = Field(default=0.0, ge=0)
    latency_jitter_s: float = Field(default=0.0, ge=0)
    first_slow: int = Field(default=0, ge=0, description="The first k attempts of each key take slow_s longer (timeouts).")
    slow_s: float = Field(default=5.0, ge=0)
    first_429: int = Field(default=0, ge=0, description="The first k attempts of each key get 429.")
    first_500: int = Field(default=0, ge=0, description="The next k attempts of each key get 500.")
    first_drop: int = Field(default=0, ge=0, description="The next k attempts of each key are dropped.")
    rate_429: float = Field(default=0.0, ge=0, le=1)
    rate_500: float = Field(default=0.0, ge=0, le=1)
    rate_drop: float = Field(default=0.0, ge=0, le=1)
    retry_after_s: float | None = Field(default=1.0, ge=0, description="Retry-After of a 429 or 503; None sends none.")
    faults: list[str] = Field(default_factory=list, description="Outcomes of the next attempts of each key (see OUTCOMES).")
    then: str = Field(default="ok", description="Outcome of every attempt after the scripted ones.")
    match: str = Field(default="", description="Inject faults only into requests whose prompt contains this text.")
    seed: int = 0
    model: str = "fault-echo"
    reasoning: Literal["off", "reasoning_content", "reasoning", "tags", "tags-started"] = Field(
        default="off",
        description="Answer as a reasoning model: the canned chain of thought in the message field reasoning_content or "
        "reasoning, or inline in <think>…</think> (tags-started: without the opening tag, as after R1's template), and a "
        "short final content. max_tokens counts thinking and answer together (cut mid-thought: no content, finish length).",
    )
    contradict: bool = Field(default=False, description="Reasoning mode: the content states another answer than the thinking.")
    boxed: bool = Field(default=False, description="Reasoning mode: the content states its answer as a math model does, "
                        "'The final answer is $\\boxed{N}$.'")

    @field_validator("faults", "then")
    @classmethod
    def _known(cls, v: Any) -> Any:
        for outcome in [v] if isinstance(v, str) else v:
            if outcome not in OUTCOMES and not (outcome.isdigit() and len(outcome) == 3):
                raise ValueError(f"unknown outcome {outcome!r}; use an HTTP status or one of {', '.join(OUTCOMES)}")
        return v


#: What an attempt can get besides an HTTP status code (see the module docstring).
OUTCOMES = ("ok", "drop", "reset", "malformed", "truncated", "empty", "null", "nochoices", "hang")


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    body: dict[str, Any]
    key: str
    attempt: int  # 1 for the first time this key was seen
    outcome: str  # ok | an HTTP status | drop | reset | malformed | truncated | empty | null | nochoices | hang
    headers: dict[str, str] = field(default_factory=dict, compare=False)
    time: float = field(default_factory=time.monotonic)


def request_key(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def prompt_text(body: dict[str, Any]) -> str:
    if "messages" in body:
        return "\n".join(str(m.get("content", "")) for m in body["messages"])
    prompt = body.get("prompt", "")
    return prompt if isinstance(prompt, str) else "\n".join(map(str, prompt))


_CHOICES = re.compile(r"among ([A-Z]) through ([A-Z])")


def canned_answer(body: dict[str, Any]) -> str:
    """The deterministic text answered for a request body.

    A prompt whose last line asks for the answer (ends with 'is', 'is:' or 'answer:') gets a short
    answer; any other prompt gets a short chain of thought ending in that answer.  Sampled requests
    (temperature > 0) vary with their seed.
    """
    text = prompt_text(body)
    salt = f"#seed={body.get('seed')}" if float(body.get("temperature") or 0) > 0 else ""
    digest = hashlib.sha256((text + salt).encode()).hexdigest()
    m = _CHOICES.search(text)
    if m:
        letters = [chr(c) for c in range(ord(m.group(1)), ord(m.group(2)) + 1)]
        answer = letters[int(digest[:8], 16) % len(letters)]
    else:
        answer = str(int(digest[:8], 16) % 100)
    last = text.rstrip().splitlines()[-1].strip().lower() if text.strip() else ""
    if last.endswith(("is", "is:", "answer:")):
        return f" {answer}."
    return (
        f" First, restate the question in short: case {digest[:8]}. "
        f"Next, combine the facts it gives one at a time. "
        f"Finally, check the result against the question. So the answer is {answer}."
    )


def _apply_limits(text: str, body: dict[str, Any]) -> tuple[str, str]:
    stops = body.get("stop") or []
    if isinstance(stops, str):
        stops = [stops]
    for s in stops:
        if s and s in text:
            return text[: text.index(s)], "stop"
    words = text.split(" ")
    max_tokens = int(body.get("max_tokens") or 1_000_000)
    if len(words) > max_tokens:
        return " ".join(words[:max_tokens]), "length"
    return text, "stop"


_CHOICE_LINE = re.compile(r"^\(?([A-Z])\) ", re.M)


def _reasoning_reply(cot: str, body: dict[str, Any], style: str, contradict: bool,
                     boxed: bool = False) -> tuple[str | None, str, str]:
    """(thinking for a reasoning field or None, text, finish_reason) of a reasoning model answering ``cot``.

    The thinking is the canned chain of thought; the content restates its answer (another one with
    ``contradict``).  ``max_tokens`` (in words) covers thinking, tags and content together.
    """
    answer = cot.rstrip(".").rsplit(" ", 1)[-1]
    letters = _CHOICE_LINE.findall(prompt_text(body))
    if answer.isdigit() and letters:  # a multiple-choice question: a reasoning model answers with a letter
        answer = letters[int(answer) % len(letters)]
        cot = cot.rstrip(".").rsplit(" ", 1)[0] + f" {answer}."
    if contradict:
        answer = "B" if answer == "A" else "A" if len(answer) == 1 and answer.isalpha() else str(int(answer) + 1)
    thought = cot.strip()
    final = f"The final answer is $\\boxed{{{answer}}}$." if boxed else f"The answer is {answer}."
    inline = style.startswith("tags")
    opening = "" if style == "tags-started" else "<think> "
    words = (f"{opening}{thought} </think> {final}" if inline else f"{thought} {final}").split(" ")
    max_tokens = int(body.get("max_tokens") or 1_000_000)
    cut = len(words) > max_tokens
    words = words[:max_tokens]
    finish = "length" if cut else "stop"
    if inline:
        return None, " ".join(words), finish
    n_thought = len(thought.split(" "))
    return " ".join(words[:n_thought]), " ".join(words[n_thought:]), finish


class FaultServer:
    """The server; use :func:`run_fault_server` or ``start()`` / ``close()``."""

    def __init__(self, config: FaultConfig, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config = config
        self.host = host
        self.port = port
        self._requests: list[RecordedRequest] = []
        self._attempts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- public -----------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def answered_keys(self) -> Counter[str]:
        """How many times each key got a 200 (more than once means a duplicate completion)."""
        return Counter(r.key for r in self.requests if r.outcome == "ok")

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._attempts.clear()

    def start(self) -> FaultServer:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-server", daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, self.host, self.port), self._loop
        ).result(timeout=10)
        self.port = self._server.sockets[0].getsockname()[1]
        log.debug("fault server on %s (%s)", self.base_url, self.config)
        return self

    def close(self) -> None:
        if self._loop is None:
            return
        loop = self._loop

        async def stop() -> None:
            assert self._server is not None
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(timeout=10)
        loop.close()
        self._loop = None

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- HTTP -------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request: h11.Request | None = None
                body = bytearray()
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        conn.receive_data(await reader.read(65536))
                    elif isinstance(event, h11.Request):
                        request = event
                    elif isinstance(event, h11.Data):
                        body += event.data
                    elif isinstance(event, h11.EndOfMessage):
                        break
                    else:  # ConnectionClosed or PAUSED
                        return
                assert request is not None
                seen = {k.decode().lower(): v.decode() for k, v in request.headers}
                reply = await self._respond(request.method.decode(), request.target.decode(), bytes(body), seen)
                if reply is None:  # dropped: close without a response
                    return
                if isinstance(reply, str):  # "reset": RST instead of FIN: SO_LINGER with a zero timeout, then close
                    sock = writer.get_extra_info("socket")
                    if sock is not None:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                status, headers, payload = reply
                cut = payload.startswith(_TRUNCATE)
                if cut:
                    payload = payload[len(_TRUNCATE):]
                headers = [*headers, ("content-type", "application/json"), ("content-length", str(len(payload)))]
                writer.write(conn.send(h11.Response(status_code=status, headers=headers)))
                if cut:  # promise the whole body, send half of it, close
                    writer.write(payload[: len(payload) // 2])
                    await writer.drain()
                    return
                writer.write(conn.send(h11.Data(data=payload)))
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (h11.ProtocolError, ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._tasks.discard(task)
            writer.close()

    def _record(self, path: str, body: dict[str, Any], key: str, attempt: int, outcome: str, headers: dict[str, str]) -> None:
        with self._lock:
            self._requests.append(RecordedRequest(path, body, key, attempt, outcome, headers))

    def _fault(self, key: str, attempt: int) -> str:
        c = self.config
        if attempt <= c.first_429:
            return "429"
        if attempt <= c.first_429 + c.first_500:
            return "500"
        if attempt <= c.first_429 + c.first_500 + c.first_drop:
            return "drop"
        scripted = attempt - (c.first_429 + c.first_500 + c.first_drop)
        if scripted <= len(c.faults):
            return c.faults[scripted - 1]
        u = int(hashlib.sha256(f"{c.seed}:{key}:{attempt}".encode()).hexdigest()[:12], 16) / 16**12
        if u < c.rate_429:
            return "429"
        if u < c.rate_429 + c.rate_500:
            return "500"
        if u < c.rate_429 + c.rate_500 + c.rate_drop:
            return "drop"
        return c.then

    async def _respond(
        self, method: str, target: str, raw: bytes, headers: dict[str, str]
    ) -> tuple[int, list[tuple[str, str]], bytes] | Literal["reset"] | None:
        path = target.split("?", 1)[0].rstrip("/")
        c = self.config
        if method == "GET" and path == "/v1/models":
            return 200, [], json.dumps({"object": "list", "data": [{"id": c.model, "object": "model"}]}).encode()
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/completions"):
            self._record(path, {}, "", 0, "404", headers)
            return 404, [], b'{"error": {"message": "not found"}}'
        try:
            body = json.loads(raw)
            assert isinstance(body, dict)
        except (ValueError, AssertionError):
            self._record(path, {}, "", 0, "400", headers)
            return 400, [], b'{"error": {"message": "body is not a JSON object"}}'
        key = request_key({"path": path, **body})
        with self._lock:
            self._attempts[key] += 1
            attempt = self._attempts[key]
        outcome = self._fault(key, attempt) if c.match in prompt_text(body) else "ok"
        self._record(path, body, key, attempt, outcome, headers)  # on arrival: a client killed meanwhile still sent it
        delay = c.latency_s + (c.slow_s if attempt <= c.first_slow or outcome == "hang" else 0.0)
        if c.latency_jitter_s:
            delay += random.Random(f"{key}:{attempt}").uniform(0, c.latency_jitter_s)
        if delay:
            await asyncio.sleep(delay)
        if outcome in ("drop", "reset"):
            return None if outcome == "drop" else "reset"
        if outcome.isdigit():
            status = int(outcome)
            retry = [("retry-after", f"{c.retry_after_s:g}")] if c.retry_after_s is not None and status in (429, 503) else []
            kind = "rate_limit" if status == 429 else "server_error" if status >= 500 else "invalid_request"
            message = {429: "rate limited", 500: "internal error"}.get(status, f"HTTP {status}")
            return status, retry, json.dumps({"error": {"message": f"{message} (injected)", "type": kind}}).encode()
        if outcome == "malformed":
            return 200, [], b"<html><body>502 Bad Gateway (injected, not JSON)</body></html>"
        chat = path.endswith("chat/completions")
        thinking: str | None = None
        if c.reasoning != "off":
            thinking, text, finish = _reasoning_reply(canned_answer(body), body, c.reasoning, c.contradict, c.boxed)
        else:
            text, finish = _apply_limits(canned_answer(body), body)
        usage: dict[str, Any] = {"prompt_tokens": len(prompt_text(body).split()), "completion_tokens": len(text.split())}
        content: str | None = {"empty": "", "null": None}.get(outcome, text)
        if content != text:
            usage["completion_tokens"] = 0
        if thinking is not None:
            usage["completion_tokens"] += len(thinking.split())
            usage["completion_tokens_details"] = {"reasoning_tokens": len(thinking.split())}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["message"] = {"role": "assistant", "content": content}
            if thinking is not None and c.reasoning in ("reasoning_content", "reasoning"):
                choice["message"][c.reasoning] = thinking
        else:
            choice["text"] = content
        payload = {
            "id": f"fault-{key[:12]}-{attempt}",
            "object": "chat.completion" if chat else "text_completion",
            "model": body.get("model", c.model),
            "choices": [] if outcome == "nochoices" else [choice],
            "usage": usage,
        }
        raw_reply = json.dumps(payload).encode()
        return 200, [], _TRUNCATE + raw_reply if outcome == "truncated" else raw_reply


_TRUNCATE = b"\0truncate\0"  # internal marker: send half of the body that follows, then close


@contextlib.contextmanager
def run_fault_server(host: str = "127.0.0.1", port: int = 0, **faults: Any) -> Iterator[FaultServer]:
    """Start a :class:`FaultServer` with ``FaultConfig(**faults)``; stopped on exit."""
    server = FaultServer(FaultConfig(**faults), host=host, port=port).start()
    try:
        yield server
    finally:
        server.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m thoughtsource.testing.fault_server``: serve until Ctrl-C (or until stdin closes, with --until-stdin-closes)."""
    import argparse
    import signal
    import sys

    ap = argparse.ArgumentParser(
        prog="python -m thoughtsource.testing.fault_server",
        description="A fault-injecting OpenAI-compatible server (chat and completions) for tests and benchmarks.",
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    ap.add_argument("--jitter", type=float, default=0.0, help="extra uniform random latency, seconds")
    ap.add_argument("--faults", default="", help=f"comma-separated outcomes of attempts 1, 2, ... of each request: "
                    f"an HTTP status (429, 500, 503, ...) or one of {', '.join(OUTCOMES)}")
    ap.add_argument("--then", default="ok", help="outcome of every later attempt (default: ok)")
    ap.add_argument("--match", default="", help="inject faults only into requests whose prompt contains this text")
    for name in ("429", "500", "drop"):
        ap.add_argument(f"--rate-{name}", type=float, default=0.0, help=f"fraction of attempts that get {name} (seeded)")
    ap.add_argument("--retry-after", type=float, default=1.0, help="Retry-After seconds of 429/503 (negative: none)")
    ap.add_argument("--slow", type=float, default=5.0, help="extra seconds of a 'hang' (to provoke client timeouts)")
    ap.add_argument("--first-slow", type=int, default=0, help="the first k attempts of each request hang")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="fault-echo")
    ap.add_argument("--reasoning", default="off", choices=["off", "reasoning_content", "reasoning", "tags", "tags-started"],
                    help="answer as a reasoning model (the thinking in this message field, or inline in <think> tags)")
    ap.add_argument("--until-stdin-closes", action="store_true", help="stop when stdin closes (for a parent process)")
    args = ap.parse_args(argv)
    try:
        config = FaultConfig(
            latency_s=args.latency, latency_jitter_s=args.jitter, faults=[f for f in args.faults.split(",") if f], then=args.then, match=args.match,
            rate_429=args.rate_429, rate_500=args.rate_500, rate_drop=args.rate_drop,
            retry_after_s=None if args.retry_after < 0 else args.retry_after, slow_s=args.slow, first_slow=args.first_slow,
            seed=args.seed, model=args.model, reasoning=args.reasoning,
        )
    except ValidationError as e:
        ap.error("; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors()))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server = FaultServer(config, host=args.host, port=args.port).start()
    print(server.base_url, flush=True)
    if args.until_stdin_closes:
        def read_then_stop() -> None:
            sys.stdin.read()
            stop.set()

        threading.Thread(target=read_then_stop, daemon=True).start()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.close()
        counts = Counter(r.outcome for r in server.requests)
        print(f"served {sum(counts.values())} requests: {dict(counts)}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
