"""The ``transformers`` backend generating real CoTs with the embedded SmolLM2 (CPU here, GPU when present)."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from thoughtsource.backends import Request
from thoughtsource.backends.transformers_local import TransformersBackend

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def backend(embedded_model: tuple) -> TransformersBackend:
    return TransformersBackend.from_loaded(*embedded_model, name="embedded", batch_size=4)


SAY_OK = Request(messages=({"role": "user", "content": "Say OK."},), max_tokens=64)  # ends with the EOS
COUNT = Request(prompt="Count: 1, 2, 3,", max_tokens=24)  # runs to max_tokens


class _ByMode:
    """One backend per decoding mode (made on first use, kept for the module) and its output for one batch without
    sinks: "Say OK." (an early EOS), the same cut at 2 tokens, a count run to its 24 tokens, two GSM8K CoTs of 8
    tokens and a count that ends on a stop string.  The natural-end, sink and continuous-batching tests read it: each
    of them decoded a batch of its own before (a continuous-batching call alone costs ~15 s of set-up on the CPU)."""

    def __init__(self, embedded_model: tuple, batch: list[Request]) -> None:
        self.embedded_model, self.batch = embedded_model, batch
        self._backends: dict[str, TransformersBackend] = {}
        self._plain: dict[str, list] = {}

    def backend(self, mode: str) -> TransformersBackend:
        if mode not in self._backends:
            self._backends[mode] = TransformersBackend.from_loaded(*self.embedded_model, mode=mode, batch_size=8)
        return self._backends[mode]

    def plain(self, mode: str) -> list:
        if mode not in self._plain:
            self._plain[mode] = self.backend(mode).complete_sync(self.batch)
        return self._plain[mode]


@pytest.fixture(scope="module")
def modes(embedded_model: tuple, cot_request, gsm8k_questions: list[str]) -> _ByMode:
    batch = [SAY_OK, replace(SAY_OK, max_tokens=2), COUNT, *(cot_request(q, max_tokens=8) for q in gsm8k_questions[:2]),
             Request(prompt="Count: 1, 2, 3,", max_tokens=8, stop=(" 6",))]
    return _ByMode(embedded_model, batch)


def test_real_cots_for_gsm8k_questions(backend: TransformersBackend, gsm8k_questions: list[str], cot_request, embedded_model):
    tok = embedded_model[1]
    reqs = [cot_request(q, max_tokens=32) for q in gsm8k_questions]
    out = backend.complete_sync(reqs)
    assert len(out) == 3
    assert len({c.text for c in out}) == 3  # one answer per question, in order
    for q, c in zip(gsm8k_questions, out, strict=True):
        assert c.text.strip(), "empty CoT"
        assert "<|im_end|>" not in c.text and "<|im_start|>" not in c.text
        assert 0 < c.completion_tokens <= 32 and c.finish_reason in ("stop", "length")
        # the prompt is the chat-templated question, counted in real tokens
        assert c.prompt_tokens == len(
            tok(
                tok.apply_chat_template(
                    [{"role": "user", "content": f"{q}\nLet's think step by step."}], add_generation_prompt=True, tokenize=False
                ),
                add_special_tokens=False,
            )["input_ids"]
        )
        # the reported completion tokens are the tokens of the text
        assert abs(len(tok(c.text, add_special_tokens=False)["input_ids"]) - c.completion_tokens) <= 2
    assert backend.counters.completed >= 3 and backend.counters.completion_tokens >= sum(c.completion_tokens for c in out)


def test_left_padded_batch_gives_the_same_greedy_text_as_one_by_one(
    backend: TransformersBackend, gsm8k_questions: list[str], cot_request, caplog: pytest.LogCaptureFixture
):
    reqs = [cot_request(q, max_tokens=16) for q in gsm8k_questions] + [Request(prompt="The capital of France is", max_tokens=16)]
    caplog.set_level(logging.DEBUG, logger="thoughtsource.backends.transformers_local")
    batched = backend.complete_sync(reqs)
    assert "generated 4 rows" in caplog.text  # one batch of four rows of different lengths
    single = [backend.complete_sync([r])[0] for r in reqs]
    assert [c.text for c in batched] == [c.text for c in single]
    assert batched[3].text.strip()


def test_sampling_is_reproducible_per_sample_index(backend: TransformersBackend):
    base = Request(prompt="Q: Name three fruits.\nA:", temperature=1.0, max_tokens=12)
    reqs = [replace(base, sample_index=i) for i in range(3)]
    first = backend.complete_sync(reqs)
    # other batch mates, other order: each sample is still the same
    again = backend.complete_sync([reqs[2], Request(prompt="Unrelated text", max_tokens=4), reqs[0]])
    assert again[0].text == first[2].text and again[2].text == first[0].text
    assert len({c.text for c in first}) == 3, "sample_index must give different samples"
    reseeded = backend.complete_sync([replace(base, seed=12345)])[0]
    assert reseeded.text not in {c.text for c in first}


def test_rows_keep_their_own_max_tokens_and_stop_strings(backend: TransformersBackend):
    reqs = [
        Request(prompt="Count: 1, 2, 3,", max_tokens=30, stop=(" 7",)),
        Request(prompt="Count: 1, 2, 3,", max_tokens=4),
        Request(prompt="The capital of France is", max_tokens=10),
    ]
    out = backend.complete_sync(reqs)
    assert out[0].text.startswith(" 4, 5, 6") and " 7" not in out[0].text and out[0].finish_reason == "stop"
    assert out[0].completion_tokens < 30
    assert out[1].completion_tokens == 4 and out[1].finish_reason == "length"
    assert out[1].text and out[0].text.startswith(out[1].text)  # the same greedy continuation, cut earlier
    assert 0 < out[2].completion_tokens <= 10


def test_cache_identity_fingerprints_the_weights(backend: TransformersBackend, embedded_model: tuple):
    import torch

    named = TransformersBackend("embedded")
    ident = named.cache_identity()
    assert ident["backend"] == "transformers" and ident["model"] == "embedded"
    assert ident["weights"].startswith("sha256:") and named._model is None  # from the files, without loading
    assert TransformersBackend("embedded").cache_identity() == ident

    in_memory = backend.cache_identity()["weights"]
    assert in_memory.startswith("params-sha256:")
    model = embedded_model[0]
    weight = model.model.norm.weight
    with torch.no_grad():
        weight[0] += 1.0  # one training step's worth of change, made in place as a trainer does
        try:
            changed = backend.cache_identity()["weights"]
        finally:
            weight[0] -= 1.0
    assert changed != in_memory
    assert backend.cache_identity()["weights"] == in_memory


def test_continuous_batching_matches_padded_generate(modes: _ByMode):
    """transformers' continuous batching (paged attention) works on CPU too; greedy output is the same (the batch of
    every mode: an early EOS, rows cut at 2 and 24 tokens, two GSM8K CoTs, a stop string)."""
    a = modes.plain("continuous")
    b = modes.plain("generate")
    assert [c.text for c in a] == [c.text for c in b]
    assert a[3].raw["mode"] == "continuous" and a[5].finish_reason == "stop"


@pytest.mark.gpu
@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA GPU")
def test_gpu_modes_agree_and_sample_reproducibly(cot_request, gsm8k_questions: list[str]):
    by_mode = {
        m: TransformersBackend("embedded", device="cuda", dtype="float32", mode=m, batch_size=8)
        for m in ("generate", "static", "continuous")
    }
    reqs = [cot_request(q, max_tokens=48) for q in gsm8k_questions]
    texts = {m: [c.text for c in b.complete_sync(reqs)] for m, b in by_mode.items()}
    assert texts["generate"] == texts["static"] == texts["continuous"]
    assert all(t.strip() for t in texts["generate"])
    sampled = [replace(reqs[0], temperature=0.8, sample_index=i) for i in range(4)]
    gen = by_mode["generate"]
    assert [c.text for c in gen.complete_sync(sampled)] == [c.text for c in gen.complete_sync(sampled)]
    assert by_mode["continuous"].mode == "continuous" and TransformersBackend("embedded", device="cuda").mode == "continuous"


def test_a_final_assistant_message_is_continued(backend: TransformersBackend, embedded_model):
    """Stage 2 in chat mode: the CoT and the extraction phrase start the assistant's message; the model continues it."""
    tok = embedded_model[1]
    messages = (
        {"role": "user", "content": "Q: What is 2 + 3?\nLet's think step by step."},
        {"role": "assistant", "content": "2 + 3 = 5.\nTherefore, the answer (arabic numerals) is"},
    )
    req = Request(messages=messages, max_tokens=6)
    out = backend.complete_sync([req])[0]
    rendered = tok.apply_chat_template(list(messages), continue_final_message=True, add_generation_prompt=False, tokenize=False)
    assert rendered.rstrip().endswith("the answer (arabic numerals) is")  # no end-of-turn, no new assistant header
    assert out.prompt_tokens == len(tok(rendered, add_special_tokens=False)["input_ids"])
    assert "5" in out.text


def test_prefix_mode_equals_padded_generate_greedy_and_sampled(embedded_model: tuple):
    """mode="prefix" (shared few-shot prefix run once, its KV cache reused) gives generate's exact tokens."""
    from thoughtsource.star.tasks.arithmetic import ArithmeticTask

    task = ArithmeticTask(1, 3, n_train=9, n_test_per_digit=0)
    problems = task.load("train", 0)
    ex = task.exemplars(2)
    # at most 40 tokens a row (not the task's 44-88): the 1-digit rows still end on their stop string (35 tokens), the
    # longer ones are cut; the identity is checked on every token either decoder chooses
    greedy = [Request(prompt=task.prompt(p, ex), max_tokens=min(task.max_new_tokens(p), 40), stop=task.stop)
              for p in problems]
    sampled = [replace(greedy[i], temperature=0.9, seed=7, sample_index=j) for i in (0, 4) for j in range(2)]
    prefix = TransformersBackend.from_loaded(*embedded_model, mode="prefix", batch_size=4)
    padded = TransformersBackend.from_loaded(*embedded_model, mode="generate", batch_size=4)
    assert TransformersBackend.from_loaded(*embedded_model).mode == "prefix"  # the CPU default
    a = prefix.complete_sync(greedy + sampled)
    b = padded.complete_sync(greedy + sampled)
    assert [c.text for c in a] == [c.text for c in b]
    assert [c.completion_tokens for c in a] == [c.completion_tokens for c in b]
    assert [c.finish_reason for c in a] == [c.finish_reason for c in b] and a[0].raw["mode"] == "prefix"
    assert {c.finish_reason for c in a[:9]} == {"stop", "length"}  # greedy rows that end on their stop string, and cut
    assert len({c.text for c in a[9:]}) > 1  # the draws differ between sample indices


def test_prefix_groups_share_only_real_prefixes():
    from thoughtsource.backends.prefix_decode import Row, group_by_prefix

    shared = list(range(100, 140))
    rows = [Row([*shared, 1, 2], 4), Row([7, 8, 9], 4), Row([*shared, 3], 4), Row([*shared, 1, 2, 5], 4)]
    groups = {tuple(sorted(m)): plen for plen, m in group_by_prefix(rows)}
    assert groups == {(0, 2, 3): 40, (1,): 0}  # every member keeps at least one token of its own


def test_rows_without_a_shared_prefix_are_decoded_in_batches_not_one_by_one(embedded_model: tuple):
    """Zero-shot prompts share no long prefix: they form one group decoded batch_size rows at a time (each was its
    own group before, decoded at batch 1: 14x slower on a from-scratch STaR base), with generate's exact tokens."""
    from thoughtsource.backends.prefix_decode import Row, group_by_prefix
    from thoughtsource.star.tasks.arithmetic import ArithmeticTask

    rows = [Row([1, 2, 3], 4), Row([7, 8, 9], 4), Row([4, 5], 4), Row([*range(100, 140), 1], 4), Row([*range(100, 140), 2], 4)]
    assert sorted((plen, sorted(m)) for plen, m in group_by_prefix(rows)) == [(0, [0, 1, 2]), (40, [3, 4])]
    task = ArithmeticTask(1, 3, n_train=8, n_test_per_digit=0, scratchpad="compact")
    requests = [Request(prompt=task.prompt(p, []), max_tokens=12, stop=task.stop) for p in task.load("train", 0)]
    model, tok = embedded_model
    calls = []
    # threads pinned: threads="auto" times forward passes of its own first, which this hook would count too
    hook = model.register_forward_hook(lambda module, args, output: calls.append(1))
    try:
        prefix = TransformersBackend.from_loaded(model, tok, mode="prefix", batch_size=8, threads=1).complete_sync(requests)
    finally:
        hook.remove()
    assert len(calls) <= 12 + 1  # one forward per decoding step for the whole batch (8 x 12 when decoded one by one)
    padded = TransformersBackend.from_loaded(model, tok, mode="generate", batch_size=8).complete_sync(requests)
    assert [c.text for c in prefix] == [c.text for c in padded]


def test_threads_option_sets_torch_cpu_threads(embedded_model, gsm8k_questions: list[str], cot_request):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    try:
        for n in (1, 2):
            b = TransformersBackend.from_loaded(*embedded_model, name="embedded", batch_size=2, threads=n)
            if not b.device.startswith("cpu"):
                pytest.skip("threads applies to CPU generation")
            (out,) = b.generate([cot_request(gsm8k_questions[0], max_tokens=2)])
            assert torch.get_num_threads() == n and out.completion_tokens > 0
    finally:
        torch.set_num_threads(before)


def test_threads_auto_takes_the_count_that_measured_fastest():
    """The choice follows the measured times, not the core count: where 2 threads run the step slower (a busy machine)
    it is 1, where they run it faster it is 2; 4 % faster is not worth a thread; a load change of a core re-measures."""
    from thoughtsource.backends.cpu_threads import MeasuredThreads, fastest
    from thoughtsource.backends.transformers_local import TransformersOptions

    def machine(cost: dict[int, float]) -> MeasuredThreads:
        now, threads = [0.0], [1]

        def step() -> None:
            now[0] += cost[threads[0]]

        return MeasuredThreads(step, cap=len(cost), set_threads=lambda n: threads.__setitem__(0, n), clock=lambda: now[0])

    busy = machine({1: 0.020, 2: 0.031})
    assert busy.choose(load=5.0, now=0) == 1 and busy.timings == pytest.approx({1: 0.020, 2: 0.031})
    assert machine({1: 0.020, 2: 0.012}).choose(load=0.1, now=0) == 2
    assert fastest({1: 0.0200, 2: 0.0193}) == 1 and fastest({1: 0.02, 2: 0.012, 3: 0.0121}) == 2
    idle = machine({1: 0.020, 2: 0.012})
    assert idle.choose(load=0.1, now=0) == 2
    idle.step = lambda: None  # what measure() would see now is not consulted until a re-measure is due
    assert idle.choose(load=0.5, now=100) == 2 and idle.choose(load=3.0, now=30) == 2  # a small move; too soon
    assert idle.choose(load=3.0, now=200) == 1  # measured again: now every count takes the same time
    assert MeasuredThreads(lambda: None, cap=1).choose() == 1
    assert TransformersOptions().threads == "auto"
    with pytest.raises(ValueError, match="threads must be >= 1"):
        TransformersOptions(threads=0)


def test_threads_auto_times_the_model_itself(embedded_model, cot_request, gsm8k_questions, monkeypatch):
    import torch

    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    before = torch.get_num_threads()
    try:
        b = TransformersBackend.from_loaded(*embedded_model, threads="auto")
        assert b.thread_timings == {}
        (out,) = b.generate([cot_request(gsm8k_questions[0], max_tokens=2)])
        timings = b.thread_timings
        assert out.completion_tokens > 0 and set(timings) == {1, 2} and all(0 < s < 60 for s in timings.values())
        assert torch.get_num_threads() == min(n for n, s in timings.items() if s <= min(timings.values()) * 1.05)
    finally:
        torch.set_num_threads(before)


MODES = ["prefix", "generate", "static", "continuous", "graph"]


@pytest.mark.parametrize("mode", MODES)
def test_a_natural_end_is_finish_reason_stop_in_every_mode(modes: _ByMode, mode: str):
    """"Say OK." ends with the model's EOS well before max_tokens: "stop", whatever the decoding mode (prefix mode
    dropped the EOS and said "length", so every client believed the answer was cut off)."""
    done, short = modes.plain(mode)[:2]
    assert done.finish_reason == "stop" and 0 < done.completion_tokens < 64
    assert short.finish_reason == "length" and short.completion_tokens == 2


@pytest.mark.parametrize("mode", MODES)
def test_sinks_get_each_token_as_it_is_chosen_and_can_stop_their_row(modes: _ByMode, mode: str):
    """serve-model's streaming: a row's sink receives its tokens in order (the end token excluded), the output is the
    same as without sinks, and a sink that returns False stops its row there while the others go on."""
    backend = modes.backend(mode)
    plain = modes.plain(mode)
    say_ok, count = SAY_OK, COUNT
    got: list[list[int]] = [[], [], []]

    def sink(i: int, stop_after: int | None = None):
        def on_token(token: int) -> bool:
            got[i].append(token)
            return stop_after is None or len(got[i]) < stop_after
        return on_token

    cancelled = backend.counters.cancelled
    out = backend.generate([say_ok, count, replace(count, sample_index=1)], [sink(0), sink(1), sink(2, stop_after=3)])
    assert [c.text for c in out[:2]] == [plain[0].text, plain[2].text]
    assert out[0].finish_reason == "stop" and got[0] == out[0].raw["token_ids"][:-1]  # all but the end token
    assert got[1] == out[1].raw["token_ids"] and len(got[1]) == 24
    assert got[2] == got[1][:3] and out[2].completion_tokens == 3  # stopped at once, the batch went on
    assert backend.counters.cancelled == cancelled + 1
