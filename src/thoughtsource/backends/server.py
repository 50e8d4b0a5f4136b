"""An OpenAI-compatible HTTP server in front of any backend (by default the local transformers one).

``thoughtsource serve-model --model embedded --port 8001`` serves ``/v1/models``,
``/v1/chat/completions`` and ``/v1/completions``.  Each HTTP request becomes backend
:class:`Request` s; the transformers backend gathers the requests of concurrent callers into one
batched generate call, so throughput grows with the number of clients.  Streaming is not
supported (``stream: true`` gets a 400).

For tests and notebooks, :func:`run_model_server` starts the server in a background thread on a
free port and yields a handle with ``base_url``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import BackendError, ThoughtSourceError
from ..listen import MODEL_SERVER_PORT, bind
from .base import Backend, Completion, Request

log = logging.getLogger(__name__)


class _Common(BaseModel):
    # OpenAI clients send many optional fields (user, logit_bias, ...); those we do not use are ignored
    model_config = ConfigDict(extra="ignore")

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0, le=2)  # the OpenAI default
    top_p: float = Field(default=1.0, gt=0, le=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = Field(default=1, ge=1, le=128)
    stream: bool = False

    def base_request(self, default_max_tokens: int) -> dict[str, Any]:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return {
            "max_tokens": self.max_completion_tokens or self.max_tokens or default_max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": tuple(stop),
            "seed": self.seed,
        }


class ChatBody(_Common):
    messages: list[dict[str, Any]] = Field(min_length=1)


class CompletionBody(_Common):
    prompt: str | list[str]


def _text_content(content: Any) -> str:
    """OpenAI message content: a string or a list of parts; only text parts are supported."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else str(content)


def _usage(completions: list[Completion], n: int) -> dict[str, int]:
    """Usage of one response; the n samples of a prompt count its prompt tokens once."""
    prompt = sum(c.prompt_tokens for c in completions[::n])
    done = sum(c.completion_tokens for c in completions)
    return {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}


def create_app(backend: Backend, served_model_name: str, default_max_tokens: int = 256) -> Any:
    """The FastAPI app serving ``backend`` under the model name ``served_model_name``."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await backend.aclose()

    app = FastAPI(title="thoughtsource model server", version="1", lifespan=lifespan)
    app.state.backend = backend
    app.state.started = int(time.time())

    def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
        return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)

    def check(body: _Common) -> JSONResponse | None:
        if body.model != served_model_name:
            return error(404, f"The model '{body.model}' does not exist; this server serves '{served_model_name}'.")
        if body.stream:
            return error(400, "stream=true is not supported by this server")
        return None

    async def run(requests: list[Request]) -> list[Completion] | JSONResponse:
        try:
            return await backend.complete(requests)
        except BackendError as e:
            log.warning("generation failed: %s", e)
            return error(500, str(e), "server_error")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    async def fingerprint() -> str | None:
        """The served weights' fingerprint (a hash of the model folder's files), so a client can check what it talks to."""
        if not hasattr(app.state, "fingerprint"):
            import asyncio

            try:
                identity = await asyncio.to_thread(backend.cache_identity)
                app.state.fingerprint = identity.get("weights")
            except Exception as e:  # a model that cannot be fingerprinted is still served
                log.warning("no weights fingerprint: %s", e)
                app.state.fingerprint = None
        return app.state.fingerprint

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        entry = {"id": served_model_name, "object": "model", "created": app.state.started, "owned_by": "thoughtsource"}
        if (fp := await fingerprint()) is not None:
            entry["fingerprint"] = fp
        return {"object": "list", "data": [entry]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(body: ChatBody) -> dict[str, Any] | JSONResponse:
        if (bad := check(body)) is not None:
            return bad
        messages = tuple({"role": str(m.get("role", "user")), "content": _text_content(m.get("content"))} for m in body.messages)
        base = body.base_request(default_max_tokens)
        out = await run([Request(messages=messages, sample_index=i, **base) for i in range(body.n)])
        if isinstance(out, JSONResponse):
            return out
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served_model_name,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": c.text}, "finish_reason": c.finish_reason or "stop"}
                for i, c in enumerate(out)
            ],
            "usage": _usage(out, body.n),
        }

    @app.post("/v1/completions", response_model=None)
    async def completions(body: CompletionBody) -> dict[str, Any] | JSONResponse:
        if (bad := check(body)) is not None:
            return bad
        prompts = [body.prompt] if isinstance(body.prompt, str) else body.prompt
        base = body.base_request(default_max_tokens)
        out = await run([Request(prompt=p, sample_index=i, **base) for p in prompts for i in range(body.n)])
        if isinstance(out, JSONResponse):
            return out
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": served_model_name,
            "choices": [{"index": i, "text": c.text, "finish_reason": c.finish_reason or "stop"} for i, c in enumerate(out)],
            "usage": _usage(out, body.n),
        }

    return app


@dataclass
class ModelServerHandle:
    """A running server: ``base_url`` (ending in /v1), ``model`` (its served name), ``close()``."""

    base_url: str
    model: str
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
) -> None:
    """Serve in the foreground until interrupted.

    The port is bound first (a port in use is an error before anything loads), then the model is loaded
    (a model that cannot load is an error at start, not a 500 on every request, and the first request does
    not wait for it), and only then is the server reported ready.
    """
    import uvicorn

    sock = bind(host, port)
    try:
        load_backend(backend)
    except BaseException:
        sock.close()
        raise
    log.info("serving %s at http://%s:%d/v1 (model loaded)", served_model_name, host, sock.getsockname()[1])
    app = create_app(backend, served_model_name, default_max_tokens)
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level))
    server.run(sockets=[sock])


@contextlib.contextmanager
def run_model_server(
    backend: Backend | None = None, served_model_name: str = "embedded", host: str = "127.0.0.1", port: int = 0
) -> Iterator[ModelServerHandle]:
    """Serve ``backend`` (default: the embedded model via transformers) in a thread; stopped on exit."""
    import uvicorn

    backend = backend if backend is not None else make_backend()
    sock = bind(host, port)
    try:
        load_backend(backend)
    except BaseException:
        sock.close()
        raise
    server = uvicorn.Server(uvicorn.Config(create_app(backend, served_model_name), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="model-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise ThoughtSourceError(f"the model server did not start on {host}:{port}")
        time.sleep(0.01)
    handle = ModelServerHandle(f"http://{host}:{sock.getsockname()[1]}/v1", served_model_name, server, thread)
    try:
        yield handle
    finally:
        handle.close()
        sock.close()
