"""The ``openai`` backend against the fault-injecting server and against the real ``serve-model`` server."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from thoughtsource.backends import Request, get_backend
from thoughtsource.backends.openai_compat import OpenAIBackend, OpenAIOptions
from thoughtsource.errors import BackendError
from thoughtsource.testing.fault_server import canned_answer, run_fault_server


def _requests(n: int, chat: bool = False) -> list[Request]:
    out = []
    for i in range(n):
        q = f"Q: Tom has {i} apples and buys {i + 2} more. How many apples does he have?\nA: Let's think step by step."
        out.append(Request(messages=({"role": "user", "content": q},)) if chat else Request(prompt=q, max_tokens=64))
    return out


def _backend(base_url: str | list[str], **kw) -> OpenAIBackend:
    kw.setdefault("backoff_base_s", 0.02)
    return get_backend("openai", model="echo", base_url=base_url, **kw)  # type: ignore[return-value]


def _expected(server, request: Request) -> str:
    ok = [r for r in server.requests if r.outcome == "ok" and r.body.get("prompt", None) == (request.prompt or None)]
    assert ok, "the server never answered this request"
    return canned_answer(ok[0].body)


def test_options_normalise_urls_and_reject_typos():
    o = OpenAIOptions(model="m", base_url="http://a:1, http://b:2/v1/")
    assert o.base_url == ["http://a:1/v1", "http://b:2/v1"]
    with pytest.raises(ValueError, match="concurency"):
        OpenAIOptions(model="m", concurency=4)
    with pytest.raises(ValueError, match="not an http"):
        OpenAIOptions(model="m", base_url="localhost:8000")


def test_latency_is_overlapped_by_concurrency():
    with run_fault_server(latency_s=0.2) as server:
        backend = _backend(server.base_url, concurrency=16)
        reqs = _requests(16)
        t0 = time.monotonic()
        out = asyncio.run(backend.complete(reqs))
        elapsed = time.monotonic() - t0
    assert len(out) == 16
    # overlap, whatever the machine's load: the wall time is well under the requests' summed latencies
    # (one by one they would add up; the throughput itself is measured by benchmarks/bench_generate.py)
    summed = sum(c.latency_s for c in out)
    assert summed >= 16 * 0.2 and elapsed < summed / 4, f"wall {elapsed:.2f}s vs summed latency {summed:.2f}s"
    # one completion per request, in order, with the server's deterministic text and usage
    for req, comp in zip(reqs, out, strict=True):
        assert comp.text == canned_answer({"prompt": req.prompt, "temperature": 0.0})
        assert comp.attempts == 1 and comp.completion_tokens > 0 and comp.finish_reason == "stop"
    assert backend.counters.snapshot() | {"prompt_tokens": 0, "completion_tokens": 0} == {
        "requests": 16,
        "retries": 0,
        "errors": 0,
        "completed": 16,
        "failed": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cancelled": 0,
    }


def test_429_retry_after_is_honoured():
    with run_fault_server(first_429=1, retry_after_s=0.5) as server:
        backend = _backend(server.base_url, concurrency=4)
        out = asyncio.run(backend.complete(_requests(6)))
        records = server.requests
    assert [c.attempts for c in out] == [2] * 6
    assert backend.counters.retries == 6 and backend.counters.errors == 6 and backend.counters.completed == 6
    by_key: dict[str, list] = {}
    for r in records:
        by_key.setdefault(r.key, []).append(r)
    assert len(by_key) == 6
    for attempts in by_key.values():
        assert [a.outcome for a in attempts] == ["429", "ok"]
        assert attempts[1].time - attempts[0].time >= 0.45, "retried before Retry-After elapsed"


def test_500_and_dropped_connections_are_retried_until_answered():
    with run_fault_server(first_500=1, first_drop=1, latency_s=0.01) as server:
        backend = _backend(server.base_url, concurrency=8)
        reqs = _requests(12, chat=True)
        out = asyncio.run(backend.complete(reqs))
        outcomes = sorted(r.outcome for r in server.requests)
        answered = server.answered_keys()
    assert [c.attempts for c in out] == [3] * 12
    assert all(c.text.endswith(".") and "So the answer is" in c.text for c in out)
    assert outcomes == ["500"] * 12 + ["drop"] * 12 + ["ok"] * 12
    assert set(answered.values()) == {1}  # every request answered exactly once
    assert backend.counters.retries == 24 and backend.counters.errors == 24


def test_random_faults_every_request_gets_its_answer():
    with run_fault_server(rate_429=0.15, rate_500=0.15, rate_drop=0.15, retry_after_s=0.05, seed=7) as server:
        backend = _backend(server.base_url, concurrency=16, max_attempts=12)
        reqs = _requests(60)
        out = asyncio.run(backend.complete(reqs))
        records = server.requests
    failures = sum(r.outcome != "ok" for r in records)
    assert failures > 10  # the faults did happen
    assert backend.counters.retries == failures == backend.counters.errors
    assert backend.counters.completed == 60 and sum(c.attempts for c in out) == len(records)
    for req, comp in zip(reqs, out, strict=True):
        assert comp.text == canned_answer({"prompt": req.prompt, "temperature": 0.0})


def test_backend_error_after_max_attempts():
    with run_fault_server(first_500=10) as server:
        backend = _backend(server.base_url, max_attempts=3)
        with pytest.raises(BackendError) as info:
            asyncio.run(backend.complete(_requests(1)))
        assert len(server.requests) == 3
    err = info.value
    assert (err.backend, err.status, err.attempts) == ("openai", 500, 3)
    assert "3 attempts" in str(err) and backend.counters.failed == 1


def test_timeouts_are_retried():
    with run_fault_server(first_slow=1, slow_s=2.0) as server:
        backend = _backend(server.base_url, timeout_s=0.3, concurrency=4)
        out = asyncio.run(backend.complete(_requests(4)))
    assert [c.attempts for c in out] == [2] * 4 and backend.counters.errors == 4
    with run_fault_server(latency_s=2.0) as server:
        backend = _backend(server.base_url, timeout_s=0.2, max_attempts=2)
        with pytest.raises(BackendError, match="timeout") as info:
            asyncio.run(backend.complete(_requests(1)))
    assert (info.value.status, info.value.attempts) == (None, 2)


def test_client_errors_are_not_retried():
    with run_fault_server() as server:
        backend = _backend(server.base_url.replace("/v1", "/nope"), max_attempts=5)
        with pytest.raises(BackendError) as info:
            asyncio.run(backend.complete(_requests(1)))
    assert (info.value.status, info.value.attempts) == (404, 1)


def test_load_is_spread_over_two_servers():
    with run_fault_server(latency_s=0.05) as a, run_fault_server(latency_s=0.05) as b:
        backend = _backend([a.base_url, b.base_url], concurrency=8)
        asyncio.run(backend.complete(_requests(40)))
        na, nb = len(a.requests), len(b.requests)
    assert na + nb == 40
    assert 14 <= na <= 26, (na, nb)
    assert [e.requests for e in backend.endpoints] == [na, nb]


def test_failover_to_the_healthy_server():
    with run_fault_server(rate_drop=1.0) as dead, run_fault_server() as alive:
        backend = _backend([dead.base_url, alive.base_url], concurrency=4, routing="round-robin")
        reqs = _requests(20)
        out = asyncio.run(backend.complete(reqs))
        assert len(alive.answered_keys()) == 20
        assert all(r.outcome == "drop" for r in dead.requests)
    assert len(out) == 20 and backend.counters.failed == 0
    # the dead server gets rested after repeated failures, so it sees far fewer than all attempts
    assert len(dead.requests) < 20


def test_requests_per_minute_limit():
    with run_fault_server() as server:
        backend = _backend(server.base_url, concurrency=32, requests_per_minute=1200)  # 20/s, burst 20
        t0 = time.monotonic()
        asyncio.run(backend.complete(_requests(40)))
        elapsed = time.monotonic() - t0
    assert elapsed >= 0.9, f"40 requests at 20/s (burst 20) took only {elapsed:.2f}s"


def test_tokens_per_minute_limit():
    with run_fault_server() as server:
        # each request is reserved at ~16 + 25 tokens and then charged its real usage (~26 tokens);
        # 6000 tokens/min = 100/s with a one-second burst: 8 requests cannot all start at once
        backend = _backend(server.base_url, concurrency=32, tokens_per_minute=6000)
        reqs = [Request(prompt="x" * 64, max_tokens=25) for _ in range(8)]
        t0 = time.monotonic()
        asyncio.run(backend.complete(reqs))
        elapsed = time.monotonic() - t0
    assert elapsed >= 1.0, f"~250 tokens at 100 tokens/s took only {elapsed:.2f}s"


def test_chat_completions_and_wire_format(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    caplog.set_level(logging.DEBUG)
    with run_fault_server(first_500=1) as server:
        backend = _backend(server.base_url)
        chat = Request(messages=({"role": "user", "content": "Q: 2+2?"},), max_tokens=40, stop=("Finally",))
        sampled = [Request(prompt="Q: 3+4?", temperature=0.8, sample_index=i) for i in range(2)]
        out = asyncio.run(backend.complete([chat, *sampled]))
        records = [r for r in server.requests if r.outcome == "ok"]
    by_path = {r.path for r in records}
    assert by_path == {"/v1/chat/completions", "/v1/completions"}
    chat_rec = next(r for r in records if r.path == "/v1/chat/completions")
    assert chat_rec.body["messages"] == [{"role": "user", "content": "Q: 2+2?"}]
    assert chat_rec.body["stop"] == ["Finally"] and chat_rec.body["max_tokens"] == 40
    assert "Finally" not in out[0].text and out[0].text.startswith(" First, restate")
    # sampled requests carry distinct, reproducible seeds derived from sample_index
    seeds = [r.body["seed"] for r in records if r.path == "/v1/completions"]
    assert len(set(seeds)) == 2 and out[1].text != out[2].text
    assert all(r.headers["authorization"] == "Bearer sk-secret-123" for r in server.requests)
    assert "sk-secret" not in repr(backend) and "sk-secret" not in caplog.text
    assert backend.cache_identity() == {
        "backend": "openai",
        "model": "echo",
        "server_kind": "openai-compatible",
        "extra_body": {},
    }


def test_backend_is_reusable_across_event_loops():
    with run_fault_server() as server:
        backend = _backend(server.base_url)
        first = asyncio.run(backend.complete(_requests(2)))
        second = asyncio.run(backend.complete(_requests(2)))
        asyncio.run(backend.aclose())
    assert [c.text for c in first] == [c.text for c in second]


# -- against the real serve-model server on the embedded model --------------------------------


@pytest.mark.slow
def test_real_server_generates_cots(model_server, embedded_model, gsm8k_questions: list[str], cot_request):
    from thoughtsource.backends.transformers_local import TransformersBackend

    backend = get_backend("openai", model=model_server.model, base_url=model_server.base_url)
    reqs = [cot_request(q, max_tokens=16) for q in gsm8k_questions[:2]] + [Request(prompt="Count: 1, 2, 3,", max_tokens=8)]
    out = asyncio.run(backend.complete(reqs))
    local = TransformersBackend.from_loaded(*embedded_model, name="embedded").complete_sync(reqs)
    # the server answers what the model itself generates, through the HTTP API
    assert [c.text for c in out] == [c.text for c in local]
    assert [(c.prompt_tokens, c.completion_tokens) for c in out] == [(c.prompt_tokens, c.completion_tokens) for c in local]
    assert all(c.text.strip() for c in out) and out[2].text.startswith(" 4, 5")
    assert backend.counters.completed == 3 and backend.counters.errors == 0


@pytest.mark.slow
def test_real_server_api_surface(model_server):
    import httpx

    url = model_server.base_url
    models = httpx.get(f"{url}/models").json()
    assert [m["id"] for m in models["data"]] == ["smollm2"]
    body = {"model": "smollm2", "prompt": "Q: Name a fruit.\nA:", "max_tokens": 6, "temperature": 1.0, "seed": 3, "n": 3}
    first = httpx.post(f"{url}/completions", json=body, timeout=300).json()
    second = httpx.post(f"{url}/completions", json=body, timeout=300).json()
    texts = [c["text"] for c in first["choices"]]
    assert len(texts) == 3 and len(set(texts)) > 1  # n samples differ ...
    assert texts == [c["text"] for c in second["choices"]]  # ... and are reproducible with a seed
    assert first["usage"]["completion_tokens"] > 0 and first["object"] == "text_completion"
    missing = httpx.post(f"{url}/completions", json={**body, "model": "gpt-4"})
    assert missing.status_code == 404 and "smollm2" in missing.json()["error"]["message"]
    empty = httpx.post(f"{url}/chat/completions", json={"model": "smollm2", "messages": [], "max_tokens": 2})
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "messages"  # OpenAI's shape, not FastAPI's 422
    # the openai backend turns a 404 into a BackendError at once (no retries)
    wrong = get_backend("openai", model="gpt-4", base_url=url)
    with pytest.raises(BackendError) as info:
        asyncio.run(wrong.complete([Request(prompt="hi", max_tokens=2)]))
    assert (info.value.status, info.value.attempts) == (404, 1)


@pytest.mark.slow
def test_concurrent_clients_share_batches(model_server, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG, logger="thoughtsource.backends.transformers_local")
    backend = get_backend("openai", model=model_server.model, base_url=model_server.base_url, concurrency=6)
    reqs = [Request(prompt=f"Count: {i}, {i + 1}, {i + 2},", max_tokens=4) for i in range(6)]
    out = asyncio.run(backend.complete(reqs))
    assert all(c.text for c in out)
    batch_sizes = [int(r.getMessage().split()[1]) for r in caplog.records if r.getMessage().startswith("generated ")]
    assert sum(batch_sizes) == 6 and max(batch_sizes) > 1, batch_sizes  # HTTP requests were generated together


def test_connections_are_spread_over_small_pools():
    """concurrency 16 with pool_size 4: four httpx clients of four connections (one client with many costs CPU per request)."""

    async def shapes(**kw) -> list[int]:
        backend = _backend("http://127.0.0.1:9/v1", **kw)
        state = backend._loop_state()
        sizes = [c._transport._pool._max_connections for c in state.clients]
        await backend.aclose()
        return sizes

    assert asyncio.run(shapes(concurrency=16, pool_size=4)) == [4, 4, 4, 4]
    assert asyncio.run(shapes(concurrency=10, pool_size=4)) == [4, 4, 4]
    assert asyncio.run(shapes(concurrency=16, pool_size=0)) == [16]
    with run_fault_server(latency_s=0.1) as server:
        backend = _backend(server.base_url, concurrency=16, pool_size=4)
        out = asyncio.run(backend.complete(_requests(32)))
    assert len(out) == 32 and all(c.attempts == 1 for c in out)
