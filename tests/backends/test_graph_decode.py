"""``mode="graph"``: the static-KV-cache decoder (backends/graph_decode.py) on the embedded SmolLM2, fp32 on the CPU.

On the CPU the decoder runs its step eagerly (no CUDA graph); the step is the same code the graph captures on CUDA.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from thoughtsource.backends import Request
from thoughtsource.backends.graph_decode import SYNC_EVERY
from thoughtsource.backends.transformers_local import TransformersBackend, TransformersOptions

pytestmark = pytest.mark.slow


def _prompts(gsm8k_questions: list[str], cot_request) -> list[Request]:
    """8 real prompts of different lengths: STaR's few-shot arithmetic (1-3 digits, stop strings) and zero-shot GSM8K
    CoTs in chat form.  At most 40 tokens a row (not the task's 44-88): the 1-digit rows still end on their stop string
    (35 tokens), the others are cut; the two decoders are compared on every token they choose."""
    from thoughtsource.star.tasks.arithmetic import ArithmeticTask

    task = ArithmeticTask(1, 3, n_train=9, n_test_per_digit=0)
    problems = task.load("train", 0)
    ex = task.exemplars(2)
    few_shot = [Request(prompt=task.prompt(p, ex), max_tokens=min(task.max_new_tokens(p), 40), stop=task.stop)
                for p in problems[::2]]
    zero_shot = [cot_request(q, max_tokens=40) for q in gsm8k_questions]
    return [*few_shot, *zero_shot]


def test_graph_mode_gives_the_prefix_decoders_greedy_outputs(embedded_model: tuple, gsm8k_questions, cot_request):
    """Same prompts, same greedy texts, token counts and finish reasons as the CPU default (prefix decoding); batches
    of 3 so the rows are chunked, padded to other widths and the buffers reused."""
    requests = _prompts(gsm8k_questions, cot_request)
    assert len(requests) == 8 and len({len(r.prompt or str(r.messages)) for r in requests}) >= 5
    graph = TransformersBackend.from_loaded(*embedded_model, mode="graph", batch_size=3)
    prefix = TransformersBackend.from_loaded(*embedded_model, mode="prefix", batch_size=3)
    a = graph.complete_sync(requests)
    b = prefix.complete_sync(requests)
    assert [c.text for c in a] == [c.text for c in b]
    assert [c.completion_tokens for c in a] == [c.completion_tokens for c in b]
    assert [c.finish_reason for c in a] == [c.finish_reason for c in b]
    assert a[0].raw["mode"] == "graph" and {c.finish_reason for c in a} == {"stop", "length"}
    assert all(c.text for c in a[:5])


def test_a_finished_batch_ends_at_the_next_host_sync(embedded_model: tuple):
    """"Say OK." ends with EOS after a few tokens: with max_tokens 200 the decoder stops at the first look at the
    device's done flags, after SYNC_EVERY steps, not 200."""
    model = embedded_model[0]
    calls: list[int] = []
    # threads pinned: threads="auto" times forward passes of its own first, which this hook would count too
    hook = model.register_forward_hook(lambda module, args, output: calls.append(1))
    try:
        say_ok = Request(messages=({"role": "user", "content": "Say OK."},), max_tokens=200)
        done = TransformersBackend.from_loaded(*embedded_model, mode="graph", threads=1).complete_sync([say_ok])[0]
    finally:
        hook.remove()
    assert done.finish_reason == "stop" and done.completion_tokens < SYNC_EVERY
    assert len(calls) == SYNC_EVERY  # the prefill and SYNC_EVERY - 1 decoding steps


def test_sampling_is_seeded_on_the_device_and_leaves_greedy_rows_alone(embedded_model: tuple, gsm8k_questions,
                                                                      cot_request):
    greedy = cot_request(gsm8k_questions[0], max_tokens=24)
    sampled = replace(greedy, temperature=1.0, top_p=0.95, seed=7)
    backend = TransformersBackend.from_loaded(*embedded_model, mode="graph", batch_size=4)
    first = backend.complete_sync([greedy, sampled, replace(sampled, sample_index=1)])
    again = backend.complete_sync([greedy, sampled, replace(sampled, sample_index=1)])
    other_seed = backend.complete_sync([greedy, replace(sampled, seed=8), replace(sampled, seed=8, sample_index=1)])
    alone = backend.complete_sync([greedy])[0]
    assert [c.text for c in first] == [c.text for c in again]  # the same batch with the same seed: the same draws
    assert first[0].text == again[0].text == other_seed[0].text == alone.text  # the greedy row is not sampled
    assert first[1].text != first[2].text  # two rows of one batch draw differently
    assert [c.text for c in first[1:]] != [c.text for c in other_seed[1:]]


def test_graph_is_a_validated_mode():
    assert TransformersOptions(mode="graph").mode == "graph"
    with pytest.raises(ValueError, match="mode"):
        TransformersOptions(mode="cudagraph")


def test_closing_the_backend_frees_the_decoders_buffers(embedded_model: tuple):
    import asyncio

    backend = TransformersBackend.from_loaded(*embedded_model, mode="graph")
    backend.complete_sync([Request(prompt="1 + 1 =", max_tokens=2)])
    assert backend._graph_decoder is not None and backend._graph_decoder.slots
    asyncio.run(backend.aclose())
    assert backend._graph_decoder is None
