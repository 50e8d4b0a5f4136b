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

The handlers are :mod:`.server_routes` (what a backend can do beyond completing is asked of its declared capabilities,
:mod:`.base`), the request bodies and their checks :mod:`.openai_api`; this module makes the app and runs it.
For tests and notebooks, :func:`run_model_server` starts the server in a background thread on a
free port and yields a handle with ``base_url``.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ThoughtSourceError
from ..interrupt import ctrl_c_stops, request_stop
from ..listen import MODEL_SERVER_PORT, bind
from .base import Backend, Loads
from .server_guard import Guard
from .transformers_local import TransformersBackend

log = logging.getLogger(__name__)


def create_app(backend: Backend, served_model_name: str, default_max_tokens: int = 256, api_key: str | None = None) -> Any:
    """The FastAPI app serving ``backend`` under the model name ``served_model_name`` (:mod:`.server_routes`); with
    ``api_key``, every route but ``/health`` needs it (``Authorization: Bearer KEY``)."""
    from fastapi import FastAPI  # the serve extra: imported when a server is made, so this module imports without it

    from . import server_routes  # its routes import fastapi

    app = FastAPI(title="thoughtsource model server", version="1", lifespan=server_routes.lifespan)
    served = server_routes.Served(backend, served_model_name, default_max_tokens)
    app.state.served = served
    app.state.backend = backend
    app.add_middleware(Guard, metrics=served.metrics, api_key=api_key)
    for kind, handler in server_routes.EXCEPTION_HANDLERS.items():
        app.add_exception_handler(kind, handler)
    app.include_router(server_routes.router)
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
    return TransformersBackend(model=model, **options)


def load_backend(backend: Backend) -> None:
    """Load the backend's model now if it loads lazily (:class:`~.base.Loads`), so that a server is ready when it says so."""
    if isinstance(backend, Loads):
        backend.load()


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
