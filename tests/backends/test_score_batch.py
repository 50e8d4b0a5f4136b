"""Scoring in batches (issue 45, finding 11): the prompts of one request, and of concurrent requests, are scored in one
padded forward pass (``backends/score_batch.py``), and echo with ``max_tokens: 0`` runs the prompt once (nothing is
decoded).  The values are those of one forward pass a prompt, to float32 noise."""

from __future__ import annotations

import asyncio
import re
import threading

import httpx
import pytest

from thoughtsource.backends.score_batch import ScoreBatcher
from thoughtsource.backends.transformers_local import TransformersBackend

PROMPTS = ["The capital of France is Paris", "Two plus two is", "A", "Question: what do cows drink?\nAnswer: water",
           "Once upon a time there was a dragon who lived in a cave high above the valley"]


def _metric(base_url: str, name: str) -> float:
    text = httpx.get(base_url.removesuffix("/v1") + "/metrics").text
    (value,) = re.findall(rf"^{name} (\S+)$", text, flags=re.M)
    return float(value)


def test_one_requests_prompts_are_scored_in_one_pass_and_nothing_is_decoded(model_server, embedded_model):
    backend = model_server.backend
    single = TransformersBackend.from_loaded(*embedded_model)
    passes, rows = (_metric(model_server.base_url, f"thoughtsource_{m}_total") for m in ("score_forward_passes", "scored_rows"))
    decoded = backend.counters.requests
    r = httpx.post(f"{model_server.base_url}/completions", timeout=120, json={
        "model": model_server.model, "prompt": PROMPTS, "max_tokens": 0, "echo": True, "logprobs": 2, "temperature": 0})
    assert r.status_code == 200, r.text
    choices = sorted(r.json()["choices"], key=lambda c: c["index"])
    assert [c["text"] for c in choices] == PROMPTS
    for prompt, choice in zip(PROMPTS, choices, strict=True):
        want = single.token_logprobs(single.prompt_ids(single_request(prompt)), 2)
        assert choice["logprobs"]["token_logprobs"][0] is None
        assert choice["logprobs"]["token_logprobs"][1:] == pytest.approx([lp for lp, _ in want[1:]], abs=1e-4)
    assert _metric(model_server.base_url, "thoughtsource_score_forward_passes_total") == passes + 1
    assert _metric(model_server.base_url, "thoughtsource_scored_rows_total") == rows + len(PROMPTS)
    assert backend.counters.requests == decoded  # echo only: the prompt was scored, never decoded


def single_request(prompt: str):
    from thoughtsource.backends import Request

    return Request(prompt=prompt, max_tokens=0)


def test_requests_that_wait_together_are_scored_together(embedded_model):
    """While one batch is being scored, everything that arrives waits and goes in the next one: 1 + 1 passes for 8
    requests (gated on an event, not on timing); each row's values are its own forward pass's."""
    backend = TransformersBackend.from_loaded(*embedded_model)
    gate, calls = threading.Event(), []

    def gated(batch: list[list[int]], top: int):
        calls.append(len(batch))
        if len(calls) == 1:
            assert gate.wait(120)
        return backend.token_logprobs_batch(batch, top)

    ids = [backend.prompt_ids(single_request(p)) for p in PROMPTS + PROMPTS[:3]]

    async def main() -> list:
        batcher = ScoreBatcher(gated, wait_s=0)
        first = asyncio.ensure_future(batcher.score(ids[0], 1))
        while not calls:
            await asyncio.sleep(0.01)
        rest = [asyncio.ensure_future(batcher.score(x, 3 if k % 2 else 0)) for k, x in enumerate(ids[1:])]
        await asyncio.sleep(0.05)
        gate.set()
        out = [await first, *[await r for r in rest]]
        await batcher.close()
        return out

    out = asyncio.run(main())
    assert calls == [1, len(ids) - 1]
    for k, (x, got) in enumerate(zip(ids, out, strict=True)):
        top = 1 if k == 0 else (3 if (k - 1) % 2 else 0)
        want = backend.token_logprobs(x, top)
        assert [lp for lp, _ in got] == pytest.approx([lp for lp, _ in want], abs=1e-4)
        assert [[i for i, _ in alts] for _, alts in got] == [[i for i, _ in alts] for _, alts in want]


def test_batches_keep_within_the_token_budget():
    batcher = ScoreBatcher(lambda batch, top: [[] for _ in batch], budget=100)
    loop = asyncio.new_event_loop()
    items = [([0] * n, 0, loop.create_future()) for n in (10, 60, 10, 30, 120, 20)]
    sizes = [[len(ids) for ids, _, _ in b] for b in batcher.batches(items)]
    loop.close()
    assert sizes == [[10, 10, 20], [30], [60], [120]]
    assert all(max(b) * len(b) <= 100 or len(b) == 1 for b in sizes)


def test_the_choices_of_one_question_share_one_row_of_the_forward_pass(embedded_model):
    """Five choices after one context (a different last token each, and a two-token one whose first token is a
    choice): the model runs one row, the longest; every choice's values are its own forward pass's."""
    model, tok = embedded_model
    backend = TransformersBackend.from_loaded(*embedded_model)
    context = tok("Question: what do cows drink?\nAnswer:")["input_ids"]
    choices = [[tok(" water")["input_ids"][0]], [tok(" milk")["input_ids"][0]], [tok(" tea")["input_ids"][0]],
               [tok(" juice")["input_ids"][0]], [tok(" water")["input_ids"][0], tok(".")["input_ids"][0]]]
    batch = [context + c for c in choices]
    shapes: list[tuple] = []
    hook = model.register_forward_hook(lambda _m, args, kwargs, _out: shapes.append(tuple(kwargs["input_ids"].shape)),
                                       with_kwargs=True)
    try:
        got = backend.token_logprobs_batch(batch, 2)
    finally:
        hook.remove()
    assert shapes == [(1, len(context) + 1)]
    for ids, row in zip(batch, got, strict=True):
        want = backend.token_logprobs(ids, 2)
        assert [lp for lp, _ in row] == pytest.approx([lp for lp, _ in want], abs=1e-4)
        assert [[i for i, _ in a] for _, a in row] == [[i for i, _ in a] for _, a in want]


def test_a_served_model_scores_a_questions_choices_sent_one_at_a_time_with_one_pass(embedded_model):
    """serve-model's own model (loaded by the backend, trained by no one) keeps its last passes: lm-eval's
    local-completions sends a question's choices one request each (batch_size 1), and only the first runs the model.
    A model handed in (STaR's, trained between calls) keeps nothing."""
    _, tok = embedded_model
    context = tok("Question: what do cows drink?\nAnswer:")["input_ids"]
    choices = [tok(w)["input_ids"][:1] for w in (" water", " milk", " tea")]
    owned = TransformersBackend("embedded", device="cpu", threads=1)
    model, _ = owned.load()
    passes: list[tuple] = []
    hook = model.register_forward_hook(lambda _m, args, kwargs, _out: passes.append(tuple(kwargs["input_ids"].shape)),
                                       with_kwargs=True)
    try:
        got = [owned.token_logprobs(context + c, 1) for c in choices]
    finally:
        hook.remove()
    assert passes == [(1, len(context))]
    lent = TransformersBackend.from_loaded(*embedded_model)
    for c, row in zip(choices, got, strict=True):
        assert [lp for lp, _ in row] == pytest.approx([lp for lp, _ in lent.token_logprobs(context + c, 1)], abs=1e-4)
    counted: list[int] = []
    hook = embedded_model[0].register_forward_hook(lambda *_: counted.append(1))
    try:
        for c in choices:
            lent.token_logprobs(context + c, 1)
    finally:
        hook.remove()
    assert len(counted) == len(choices)
    asyncio.run(owned.aclose())
