"""serve-model's door: the API key and the metrics, one ASGI layer around the app.

:class:`Guard` answers 401 (OpenAI's error object) to a request without the server's key (``Authorization: Bearer KEY``;
``/health`` stays open, for probes), and times every request to the end of its body (a stream included) for
:class:`Metrics`, which ``/metrics`` renders in Prometheus' text format (version 0.0.4): requests by path and status, a
latency histogram by path, the model's prompt and generated tokens, and the rows handed to the model and not yet finished
(its queue).  Written by hand: the format is a few lines of text, and the package needs no client library for it.
"""

from __future__ import annotations

import hmac
import json
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

#: latency buckets (seconds): a token takes tens of milliseconds on a CPU, a long answer minutes
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
OPEN_PATHS = frozenset({"/health"})


class Metrics:
    """Counts of one server, safe from any thread; ``paths`` are the routes kept apart (others count as ``other``)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = frozenset(paths)
        self.prompt_tokens = self.generation_tokens = 0
        self.lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.buckets: dict[str, list[int]] = defaultdict(lambda: [0] * len(BUCKETS))
        self.sums: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self.rows = 0  # handed to the model, not finished
        self.scored_rows = self.score_passes = 0  # token lists scored (logprobs, echo) and the forward passes doing it

    def path(self, raw: str) -> str:
        return raw if raw in self.paths else "other"

    def observe(self, path: str, status: int, seconds: float) -> None:
        with self.lock:
            self.requests[path, status] += 1
            self.sums[path] += seconds
            self.counts[path] += 1
            for k, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    self.buckets[path][k] += 1

    def queued(self, rows: int) -> None:
        with self.lock:
            self.rows += rows

    def generated(self, prompt_tokens: int, generation_tokens: int) -> None:
        with self.lock:
            self.prompt_tokens += prompt_tokens
            self.generation_tokens += generation_tokens

    def scored(self, rows: int) -> None:
        """One forward pass scored ``rows`` token lists."""
        with self.lock:
            self.scored_rows += rows
            self.score_passes += 1

    def render(self) -> str:
        lines: list[str] = []

        def metric(name: str, kind: str, help_text: str) -> None:
            lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"])

        with self.lock:
            metric("thoughtsource_requests_total", "counter", "HTTP requests answered, by path and status.")
            for (path, status), n in sorted(self.requests.items()):
                lines.append(f'thoughtsource_requests_total{{path="{path}",status="{status}"}} {n}')
            metric("thoughtsource_request_duration_seconds", "histogram",
                   "Time from a request's arrival to the end of its answer (a stream's last event), by path.")
            for path in sorted(self.counts):
                for bound, n in zip(BUCKETS, self.buckets[path], strict=True):
                    lines.append(f'thoughtsource_request_duration_seconds_bucket{{path="{path}",le="{bound}"}} {n}')
                lines.append(f'thoughtsource_request_duration_seconds_bucket{{path="{path}",le="+Inf"}} {self.counts[path]}')
                lines.append(f'thoughtsource_request_duration_seconds_sum{{path="{path}"}} {self.sums[path]:.6f}')
                lines.append(f'thoughtsource_request_duration_seconds_count{{path="{path}"}} {self.counts[path]}')
            metric("thoughtsource_queue_length", "gauge", "Rows (a prompt's n samples each) handed to the model, not finished.")
            lines.append(f"thoughtsource_queue_length {self.rows}")
            metric("thoughtsource_prompt_tokens_total", "counter", "Prompt tokens of the rows the model finished.")
            lines.append(f"thoughtsource_prompt_tokens_total {self.prompt_tokens}")
            metric("thoughtsource_generation_tokens_total", "counter", "Tokens the model generated for the answers.")
            lines.append(f"thoughtsource_generation_tokens_total {self.generation_tokens}")
            metric("thoughtsource_scored_rows_total", "counter", "Token lists scored for logprobs, echo and prompt_logprobs.")
            lines.append(f"thoughtsource_scored_rows_total {self.scored_rows}")
            metric("thoughtsource_score_forward_passes_total", "counter",
                   "Forward passes that scored them (rows of concurrent requests share one).")
            lines.append(f"thoughtsource_score_forward_passes_total {self.score_passes}")
        return "\n".join(lines) + "\n"


def _bearer(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            text = value.decode("latin-1")
            return text[7:].strip() if text[:7].lower() == "bearer " else None
    return None


class Guard:
    """The ASGI layer: the key check (when ``api_key`` is set) and the timing of each request for ``metrics``."""

    def __init__(self, app: Any, metrics: Metrics, api_key: str | None = None) -> None:
        self.app, self.metrics, self.api_key = app, metrics, api_key

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0, path, status = time.monotonic(), self.metrics.path(scope["path"]), 500

        async def sending(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if self.api_key is not None and scope["path"] not in OPEN_PATHS and not self._authorized(scope):
                await self._refuse(sending)
            else:
                await self.app(scope, receive, sending)
        finally:
            self.metrics.observe(path, status, time.monotonic() - t0)

    def _authorized(self, scope: dict[str, Any]) -> bool:
        given = _bearer(scope)
        assert self.api_key is not None
        return given is not None and hmac.compare_digest(given.encode(), self.api_key.encode())

    async def _refuse(self, send: Any) -> None:
        body = json.dumps({"error": {"message": "Incorrect or missing API key: send 'Authorization: Bearer <key>' with "
                                     "the key this server was started with (--api-key)",
                                     "type": "authentication_error", "param": None, "code": "invalid_api_key"}}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})
