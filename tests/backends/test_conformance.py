"""Conformance of every registered backend to the core protocol and to each capability it declares (``backends/base.py``).

Parametrized over ``BACKENDS``: each backend is built offline (``mock``; ``openai`` against a real serve-model on the mock;
``transformers`` on the embedded model; ``vllm`` on a stand-in vllm module).  The core suite runs on every one, and each
capability's suite on every backend whose class declares it (has its members, :func:`declaring`).  A backend registered
without a builder here fails; a capability that no registered backend declares fails too.  Fast tier: seconds, once the
session has loaded the embedded model.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from thoughtsource.backends import BACKENDS, Backend, Completion, Request, backend_class, get_backend
from thoughtsource.backends.base import Batches, Loads, Releases, ScoresTokens, Streams, Tokenizes
from thoughtsource.errors import ConfigError

CAPABILITIES = (Tokenizes, ScoresTokens, Batches, Streams, Loads, Releases)


class _StandInLLM:
    """``vllm.LLM`` without vLLM: echoes each prompt's length."""

    def __init__(self, model: str, seed: int, dtype: str, **options: Any) -> None:
        self.model = model
        self.llm_engine = SimpleNamespace(engine_core=SimpleNamespace(shutdown=lambda: None))

    def generate(self, prompts: list[str], params: list[dict[str, Any]], use_tqdm: bool = True) -> list[SimpleNamespace]:
        return [SimpleNamespace(prompt_token_ids=[0] * len(p.split()), outputs=[
            SimpleNamespace(text=f" echo {len(p)}", token_ids=[1, 2], finish_reason="stop")]) for p in prompts]


@pytest.fixture
def stand_in_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    vllm = ModuleType("vllm")
    vllm.LLM = _StandInLLM  # type: ignore[attr-defined]
    vllm.SamplingParams = dict  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.distributed", None)  # release: no parallel state to destroy


@pytest.fixture(scope="module")
def mock_server() -> Iterator[Any]:
    from thoughtsource.backends.mock import MockBackend
    from thoughtsource.backends.server import run_model_server

    with run_model_server(MockBackend(), served_model_name="mock") as handle:
        yield handle


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> Backend:
    name = request.param
    if name == "mock":
        return get_backend("mock")
    if name == "openai":  # a real HTTP round trip, to serve-model on the mock backend
        server = request.getfixturevalue("mock_server")
        return get_backend("openai", model=server.model, base_url=server.base_url, server_kind="thoughtsource-serve-model")
    if name == "transformers":  # the embedded model, loaded once per session
        from thoughtsource.backends.transformers_local import TransformersBackend

        return TransformersBackend.from_loaded(*request.getfixturevalue("embedded_model"), name="embedded", batch_size=4)
    if name == "vllm":
        request.getfixturevalue("stand_in_vllm")
        return get_backend("vllm", model_path="/models/m", fingerprint="sha256:m", seed=0, dtype="auto", options={})
    pytest.fail(f"backend '{name}' is registered but has no builder in tests/backends/test_conformance.py")


def _requests() -> list[Request]:
    return [Request(prompt="Count: 1, 2, 3,", max_tokens=4), Request(prompt="The capital of France is", max_tokens=3),
            Request(prompt="Count: 1, 2, 3,", max_tokens=4)]


def _members(protocol: type) -> set[str]:
    """The names a protocol declares, its protocol bases' included."""
    return {name for base in protocol.__mro__ if getattr(base, "_is_protocol", False) and base.__module__ != "typing"
            for name in vars(base) if not name.startswith("_")}


def declaring(capability: type) -> list[str]:
    """The registered backends whose class declares ``capability`` (a class declares one by having its members)."""
    return [name for name in sorted(BACKENDS) if all(hasattr(backend_class(name), m) for m in _members(capability))]


# --------------------------------------------------------------------------- the core protocol
def test_the_core_protocol(backend: Backend) -> None:
    """A name (its registry key), a JSON identity that is stable, one completion per request in order, and aclose."""
    assert isinstance(backend, Backend) and backend.name in BACKENDS
    assert type(backend) is backend_class(backend.name)
    ident = backend.cache_identity()
    assert ident["backend"] == backend.name and backend.cache_identity() == ident
    assert json.loads(json.dumps(ident, sort_keys=True)) == ident  # it goes into store keys

    async def run() -> tuple[list[Completion], list[Completion]]:
        try:
            return await backend.complete(_requests()), await backend.complete([])
        finally:
            await backend.aclose()

    out, empty = asyncio.run(run())
    assert empty == [] and len(out) == 3 and all(isinstance(c, Completion) for c in out)
    assert out[0].text == out[2].text  # the same request at temperature 0: the same text
    assert all(c.completion_tokens >= 0 and c.prompt_tokens >= 0 for c in out)


def test_options_from_a_generate_config(backend: Backend) -> None:
    """Each registered class says which options a generate config gives it (or refuses generate with a ConfigError)."""
    from thoughtsource.generation.config import GenerateConfig

    cfg = GenerateConfig(backend=backend.name, model="m", base_urls=["http://h:1/v1"])
    try:
        options = backend_class(backend.name).options_from(cfg)
    except ConfigError:
        return
    assert options["model"] == "m"


# --------------------------------------------------------------------------- capabilities
@pytest.mark.parametrize("backend", declaring(Tokenizes), indirect=True)
def test_tokenizes(backend: Backend) -> None:
    assert isinstance(backend, Tokenizes)
    ids = backend.tokenize("Hello world", add_special_tokens=False)
    assert ids and all(isinstance(i, int) and 0 <= i < backend.vocab_size() for i in ids)
    assert backend.decode_text(ids) == "Hello world"
    context = backend.max_context()
    assert context is None or context > len(ids)
    request = Request(prompt="Hello world")
    assert backend.prompt_ids(request)[-len(ids):] == ids and backend.prompt_tokens(request) == len(backend.prompt_ids(request))
    assert {"eos_token", "chat_template", "model_max_length"} <= set(backend.tokenizer_info())


@pytest.mark.parametrize("backend", declaring(ScoresTokens), indirect=True)
def test_scores_tokens(backend: Backend) -> None:
    assert isinstance(backend, ScoresTokens)
    ids = backend.tokenize("Count: 1, 2, 3", add_special_tokens=False)
    scores = backend.token_logprobs(ids, top=2)
    assert len(scores) == len(ids) and scores[0] == (None, [])
    for lp, alts in scores[1:]:
        assert lp is not None and lp <= 0 and len(alts) == 2
        assert alts[0][1] >= alts[1][1] and lp <= alts[0][1] + 1e-4  # the most likely first; none above it
    assert len(backend.decode_tokens(ids)) == len(ids)


@pytest.mark.parametrize("backend", declaring(Batches), indirect=True)
def test_batches(backend: Backend) -> None:
    assert isinstance(backend, Batches) and isinstance(backend, ScoresTokens)
    a, b = backend.tokenize("Count: 1, 2, 3"), backend.tokenize("The capital of France")
    together = backend.token_logprobs_batch([a, b], top=1)
    for alone, batched in zip((backend.token_logprobs(a, 1), backend.token_logprobs(b, 1)), together, strict=True):
        assert [i for _, alts in alone for i, _ in alts] == [i for _, alts in batched for i, _ in alts]
        assert all(x == y or abs(x - y) < 1e-3 for (x, _), (y, _) in zip(alone[1:], batched[1:], strict=True))
    reqs = [Request(prompt="Count: 1, 2, 3,", max_tokens=1), Request(prompt="The capital of France is", max_tokens=1)]
    nexts = backend.next_token_completions(reqs)
    assert [c.completion_tokens for c in nexts] == [1, 1]


    async def generated() -> list[Completion]:
        try:
            return await backend.complete(reqs)
        finally:
            await backend.aclose()

    assert [c.text for c in nexts] == [c.text for c in asyncio.run(generated())]  # greedy, as generate's


@pytest.mark.parametrize("backend", declaring(Streams), indirect=True)
def test_streams(backend: Backend) -> None:
    assert isinstance(backend, Streams)
    assert isinstance(backend.streams_tokens, bool) and isinstance(backend.mode, str)
    if not backend.streams_tokens:
        pytest.skip(f"{backend.name} does not stream tokens in its settings")
    got: list[int] = []

    def sink(token: int) -> bool:
        got.append(token)
        return True

    async def run() -> list[Completion]:
        try:
            return await backend.complete([Request(prompt="Count: 1, 2, 3,", max_tokens=4)], sinks=[sink])
        finally:
            await backend.aclose()

    out = asyncio.run(run())
    assert got and backend.decode_generated(got).startswith(out[0].text)


@pytest.mark.parametrize("backend", declaring(Loads), indirect=True)
def test_loads(backend: Backend) -> None:
    assert isinstance(backend, Loads)
    backend.load()
    backend.load()  # a second load is nothing


@pytest.mark.parametrize("backend", declaring(Releases), indirect=True)
def test_releases(backend: Backend) -> None:
    assert isinstance(backend, Releases)
    backend.release()


@pytest.mark.parametrize("capability", CAPABILITIES, ids=lambda c: c.__name__)
def test_every_capability_is_declared_by_a_registered_backend(capability: type) -> None:
    assert declaring(capability), f"no registered backend declares {capability.__name__}"
