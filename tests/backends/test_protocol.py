"""Every registered backend that runs a real model answers each prompt in order (parametrized over ``BACKENDS``).

The offline conformance of every registered backend, capabilities included, is tests/backends/test_conformance.py (a
backend registered without a builder there fails); a backend without a factory here is skipped.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from thoughtsource.backends import BACKENDS, Backend, Request, get_backend
from thoughtsource.errors import UnknownNameError

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    name = request.param
    if name == "openai":  # a real server on the embedded model
        server = request.getfixturevalue("model_server")
        return get_backend("openai", model=server.model, base_url=server.base_url, server_kind="thoughtsource-serve-model")
    if name == "transformers":  # loaded by name, as `--backend transformers --model embedded` does
        return get_backend("transformers", model="embedded", batch_size=4)
    if name == "mock":  # a fake whose text does not fit the prompt: its own tests are in tests/backends/test_mock.py
        pytest.skip("the mock backend answers every prompt with the same text (tests/backends/test_mock.py)")
    if name == "vllm":  # STaR's in-process engine, which needs vLLM and a GPU
        pytest.skip("vllm: tests/backends/test_conformance.py runs it on a stand-in vllm module")
    pytest.skip(f"backend '{name}' has no real-model factory here (its conformance: tests/backends/test_conformance.py)")


def _requests() -> list[Request]:
    count = Request(prompt="Count: 1, 2, 3,", max_tokens=8)
    capital = Request(prompt="The capital of France is", max_tokens=8)
    chat = Request(messages=({"role": "user", "content": "What is 2 + 3? Let's think step by step."},), max_tokens=8)
    return [count, capital, chat, count]


def test_satisfies_the_protocol(backend: Backend):
    assert isinstance(backend, Backend)
    assert backend.name in BACKENDS
    ident = backend.cache_identity()
    assert ident["backend"] == backend.name and ident["model"]
    assert json.loads(json.dumps(ident, sort_keys=True)) == ident  # JSON-serializable: it goes into store keys
    assert backend.cache_identity() == ident  # stable
    counters = getattr(backend, "counters", None)
    assert counters is not None and {"requests", "retries", "errors"} <= set(counters.snapshot())


def test_one_completion_per_request_in_order_and_deterministic_at_temperature_0(backend: Backend):
    reqs = _requests()

    async def run() -> tuple:
        first = await backend.complete(reqs)
        empty = await backend.complete([])
        return first, empty

    out, empty = asyncio.run(run())
    assert empty == []
    assert len(out) == len(reqs)
    assert out[0].text == out[3].text  # same request, same text
    assert out[0].text.startswith(" 4, 5") and out[0].text != out[1].text  # in order: each answer fits its prompt
    for c in out:
        assert c.text and 0 < c.completion_tokens <= 8 and c.prompt_tokens > 0
        assert c.finish_reason in ("stop", "length") and c.attempts >= 1
    again = asyncio.run(backend.complete(reqs[1:3]))
    assert [c.text for c in again] == [c.text for c in out[1:3]]
    asyncio.run(backend.aclose())


def test_unknown_backend_name():
    with pytest.raises(UnknownNameError, match="Did you mean: openai"):
        get_backend("opnai")
