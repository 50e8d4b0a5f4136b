"""``serve-model``: an OpenAI-compatible server for a local transformers model (the embedded one by default)."""

from __future__ import annotations

from enum import Enum

import typer

from ..errors import require
from ..listen import MODEL_SERVER_PORT


class Mode(str, Enum):
    auto = "auto"
    generate = "generate"
    continuous = "continuous"
    static = "static"
    prefix = "prefix"


def _threads(value: str) -> str:
    if value == "auto" or (value.isdigit() and int(value) >= 1):
        return value
    raise typer.BadParameter(f"{value!r}: a number of threads (1 or more) or auto")


def serve_model(
    model: str = typer.Option("embedded", "--model", help="'embedded' (SmolLM2-135M-Instruct), a model folder or cached hub id."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on."),
    port: int = typer.Option(MODEL_SERVER_PORT, "--port", help="Port (0 picks a free one); the openai backend's default."),
    served_model_name: str | None = typer.Option(None, "--served-model-name", help="Name clients use; default: --model."),
    batch_size: int = typer.Option(8, "--batch-size", help="Rows per batched generate call."),
    device: str | None = typer.Option(None, "--device", help="cuda, cpu, ...; default: cuda when available."),
    mode: Mode = typer.Option(Mode.auto, "--mode", help="auto: continuous (a request joins the running batch at its next "
                              "decoding step); prefix: shared prompt prefixes decoded once, a batch at a time."),
    max_tokens: int = typer.Option(256, "--max-tokens", help="Default max_tokens of requests that give none."),
    threads: str = typer.Option("auto", "--threads", callback=_threads,
                                help="torch CPU threads while generating: a number, or auto (the count whose forward "
                                "pass measures fastest here, measured again when the load moves)."),
    api_key: str | None = typer.Option(None, "--api-key", envvar="THOUGHTSOURCE_API_KEY", show_default=False,
                                       help="Clients must send 'Authorization: Bearer KEY' (a wrong or missing key: 401); "
                                       "without it, listening beyond 127.0.0.1 is warned about."),
    shutdown_timeout: float = typer.Option(30.0, "--shutdown-timeout", min=0,
                                           help="On SIGTERM or Ctrl-C, seconds the requests in flight have to finish; "
                                           "then they end with an error (503) and the server exits."),
) -> None:
    """Serve an OpenAI-compatible API (/v1/models, /v1/chat/completions, /v1/completions); concurrent requests share batches.

    Needs the serve and models extras: pip install '.\\[serve,models]' in a clone of thoughtsource.
    """
    for module in ("fastapi", "uvicorn", "transformers", "torch"):  # the hint names both extras: it needs them all
        require(module, extra="serve,models", purpose="serve-model")
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..backends.server import make_backend, serve

    # a server's requests arrive while others decode: auto is continuous batching on every device
    backend = make_backend(model, batch_size=batch_size, device=device,
                           mode="continuous" if mode is Mode.auto else mode.value,
                           threads=threads if threads == "auto" else int(threads))
    serve(backend, served_model_name or model, host=host, port=port, default_max_tokens=max_tokens, api_key=api_key,
          shutdown_timeout=shutdown_timeout)


def register(app: typer.Typer) -> None:
    app.command("serve-model")(serve_model)
