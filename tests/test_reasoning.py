"""Reasoning models: the thinking (a response field or inline think tags) is the CoT, the content the answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thoughtsource.backends.base import Request
from thoughtsource.backends.openai_compat import OpenAIBackend
from thoughtsource.collection import Collection
from thoughtsource.generation import generate
from thoughtsource.reasoning import CONTENT_EXTRACTION, reasoning_info, split_reasoning, strip_think
from thoughtsource.store import CompletionStore
from thoughtsource.testing.fault_server import run_fault_server


@pytest.fixture
def worldtree(examples_dir: Path) -> Collection:
    return Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(
        split="train", number_samples=3, seed=1)


def test_split_reasoning_inline_tags():
    s = split_reasoning("<think>\n3 + 4 = 7\n</think>\n\nThe answer is 7.")
    assert (s.reasoning, s.answer, s.truncated, s.source) == ("3 + 4 = 7", "The answer is 7.", False, "tags")
    # R1's template opens the thought in the prompt: the output has only the end tag
    s = split_reasoning("3 + 4 = 7</think>The answer is 7.")
    assert (s.reasoning, s.answer) == ("3 + 4 = 7", "The answer is 7.")
    s = split_reasoning("3 + 4 is", started=True)
    assert (s.reasoning, s.answer, s.truncated) == ("3 + 4 is", "", True)
    s = split_reasoning("<think>still thinking about")
    assert s.truncated and s.answer == "" and s.reasoning == "still thinking about"
    assert split_reasoning("No tags. The answer is 7.").reasoning is None
    assert split_reasoning("[R]x[/R] 7", ("[R]", "[/R]")).answer == "7"


def test_strip_think():
    assert strip_think("<think>the answer is 3</think> The answer is 4.") == "The answer is 4."
    assert strip_think("<think>the answer is 3") == ""
    assert strip_think("plain CoT, the answer is 3") == "plain CoT, the answer is 3"


@pytest.mark.parametrize("style", ["reasoning_content", "reasoning", "tags", "tags-started"])
def test_reasoning_response_round_trips_into_a_thoughtsource_file(style: str, worldtree: Collection, tmp_path: Path):
    options = {"think_started": True} if style == "tags-started" else {}
    with run_fault_server(reasoning=style) as server:
        report = generate(worldtree, backend="openai", model="fault-echo", base_urls=[server.base_url], chat=True,
                          max_tokens=200, store=tmp_path / "s.sqlite", progress=False, backend_options=options)
        bodies = [r.body for r in server.requests]
    # one request per CoT: the final content is the answer, no answer-extraction prompt is sent
    assert report.errors == 0 and len(bodies) == 3 and report.attached_answers == 3
    out = tmp_path / "out.json"
    worldtree.dump(out)
    back = Collection.load(out)
    for (_, _, sample), body in zip(back.samples(), bodies, strict=True):
        (cot,) = sample.generated_cot
        assert cot.cot.startswith("First, restate the question") and "<think>" not in cot.cot and "</think>" not in cot.cot
        assert cot.cot.endswith(".") and "The answer is" not in cot.cot.replace("So the answer is", "")
        letter = cot.cot.rstrip(".").rsplit(" ", 1)[-1]
        (answer,) = cot.answers
        assert (answer.answer_extraction, answer.answer) == (CONTENT_EXTRACTION, f"The answer is {letter}.")
        info = reasoning_info(cot)
        assert info is not None and info.source == ("tags" if style.startswith("tags") else style)
        assert not info.truncated and info.finish_reason == "stop"
        if not style.startswith("tags"):  # the server reports reasoning tokens (here: words) apart
            assert info.reasoning_tokens == len(cot.cot.split()) and info.answer_tokens == 4
        else:  # one total, split by characters
            assert info.reasoning_tokens > 10 * info.answer_tokens > 0
        assert body["messages"][-1]["role"] == "user"
    raw = json.loads(out.read_text())
    assert "reasoning" in json.dumps(raw)


@pytest.mark.parametrize("style", ["reasoning_content", "tags"])
def test_cut_off_mid_thought_is_marked_and_stored_not_retried(style: str, worldtree: Collection, tmp_path: Path):
    db = tmp_path / "s.sqlite"
    with run_fault_server(reasoning=style) as server:
        report = generate(worldtree, backend="openai", model="fault-echo", base_urls=[server.base_url], chat=True,
                          max_tokens=6, store=db, progress=False)
        assert len(server.requests) == 3  # an empty content after a thought is not an empty completion: no retries
    assert report.errors == 0
    for _, _, sample in worldtree.samples():
        (cot,) = sample.generated_cot
        info = reasoning_info(cot)
        assert info is not None and info.truncated and info.finish_reason == "length"
        assert cot.cot and cot.answers[0].answer == ""
    with CompletionStore(db) as store:
        rows = list(store.get_many(store.keys()).values())
    assert all(r.reasoning and r.to_completion().cut_off_in_reasoning for r in rows)


async def test_reasoning_budget_is_passed_through_and_changes_the_cache_key():
    with run_fault_server(reasoning="reasoning_content") as server:
        plain = OpenAIBackend(model="fault-echo", base_url=server.base_url)
        budget = OpenAIBackend(model="fault-echo", base_url=server.base_url, reasoning_effort="low", reasoning_max_tokens=64)
        request = Request(messages=({"role": "user", "content": "What is 3 + 4?"},), max_tokens=100)
        (a,) = await plain.complete([request])
        (b,) = await budget.complete([request])
        await plain.aclose()
        await budget.aclose()
        first, second = (r.body for r in server.requests)
    assert "reasoning_effort" not in first and "thinking_token_budget" not in first
    assert second["reasoning_effort"] == "low" and second["thinking_token_budget"] == 64
    assert second["reasoning"] == {"max_tokens": 64}
    assert plain.cache_identity() != budget.cache_identity()
    assert "reasoning_effort" not in plain.cache_identity()  # completions stored before keep their keys
    assert a.reasoning and b.reasoning and a.text.startswith("The answer is") and a.reasoning_tokens == len(a.reasoning.split())
    assert a.completion_tokens == a.reasoning_tokens + len(a.text.split())


async def test_reasoning_off_keeps_the_text_as_it_comes():
    with run_fault_server(reasoning="tags") as server:
        backend = OpenAIBackend(model="fault-echo", base_url=server.base_url, reasoning="off")
        (c,) = await backend.complete([Request(messages=({"role": "user", "content": "Why?"},), max_tokens=100)])
        await backend.aclose()
    assert c.reasoning is None and c.text.startswith("<think>")


@pytest.mark.slow
def test_transformers_backend_marks_an_open_thought_cut_off(embedded_model: tuple):
    """The embedded model continues a prompt that opened a thought; it never closes it within 12 tokens."""
    from thoughtsource.backends.transformers_local import TransformersBackend

    backend = TransformersBackend.from_loaded(*embedded_model, name="embedded", think_tags=("<think>", "</think>"), threads=1)
    plain = TransformersBackend.from_loaded(*embedded_model, name="embedded", threads=1)
    request = Request(prompt="Question: What is 3 + 4?\nLet me think step by step.\n<think>\n", max_tokens=12)
    (c,) = backend.generate([request])
    assert c.reasoning and c.text == "" and c.cut_off_in_reasoning and c.finish_reason == "length"
    assert c.reasoning_tokens == c.completion_tokens == 12
    (p,) = plain.generate([request])
    assert p.reasoning is None and p.text.strip() == c.reasoning  # the same tokens, only split
    assert backend.cache_identity()["think_tags"] == ["<think>", "</think>"] and "think_tags" not in plain.cache_identity()


@pytest.mark.slow
def test_transformers_backend_counts_reasoning_tokens_up_to_the_end_tag(embedded_model: tuple):
    """Greedy output is deterministic: a word of the plain output, taken as the end tag, closes the thought there."""
    from thoughtsource.backends.transformers_local import TransformersBackend

    request = Request(prompt="Question: What is 3 + 4?\nLet me think step by step.\n<think>\n", max_tokens=24)
    (p,) = TransformersBackend.from_loaded(*embedded_model, name="embedded", threads=1).generate([request])
    words = p.text.split()
    end = next(w for w in words[3:] if len(w) > 3 and p.text.count(w) == 1)
    backend = TransformersBackend.from_loaded(*embedded_model, name="embedded", think_tags=("<think>", end), threads=1)
    (c,) = backend.generate([request])
    reasoning, _, answer = p.text.partition(end)
    assert (c.reasoning, c.text) == (reasoning.strip(), answer.strip())
    assert not c.cut_off_in_reasoning and c.reasoning_source == "tags"
    assert 0 < c.reasoning_tokens < c.completion_tokens == p.completion_tokens
    # the tokens of the reasoning and its end tag: fewer tokens do not reach past the end tag
    tok = backend.load()[1]
    ids = tok(p.text, add_special_tokens=False)["input_ids"]
    if tok.decode(ids) == p.text:  # re-tokenizing the text gives the generated tokens back (no merge across the prompt)
        assert end in tok.decode(ids[: c.reasoning_tokens]) and end not in tok.decode(ids[: c.reasoning_tokens - 1])



def _reasoning_collection(examples_dir: Path, tmp_path: Path, max_tokens: int = 200, **server: object) -> Collection:
    c = Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(
        split="train", number_samples=3, seed=1)
    with run_fault_server(**server) as s:
        report = generate(c, backend="openai", model="fault-echo", base_urls=[s.base_url], chat=True,
                          max_tokens=max_tokens, store=tmp_path / "s.sqlite", progress=False)
    assert report.errors == 0
    return c


def test_evaluate_reads_the_content_and_flags_a_contradiction(examples_dir: Path, tmp_path: Path):
    from thoughtsource.evaluate import evaluate_frame

    c = _reasoning_collection(examples_dir, tmp_path / "a", reasoning="reasoning_content")
    a = evaluate_frame(c).answers
    assert (a["source"] == "cot").all() and not a["contradicts_thinking"].any() and not a["truncated"].any()
    letters = [cot.cot.rstrip(".").rsplit(" ", 1)[-1] for _, _, x in c.samples() for cot in x.generated_cot]
    assert a[a["mode"] == "strict"]["pred"].tolist() == letters
    lying = evaluate_frame(_reasoning_collection(examples_dir, tmp_path / "b", reasoning="reasoning", contradict=True))
    assert lying.answers["contradicts_thinking"].all()
    assert (lying.accuracy["contradictions"] == lying.accuracy["n"]).all()


def test_think_blocks_are_stripped_before_extraction(examples_dir: Path, tmp_path: Path):
    """A server without a reasoning parser, read with reasoning='off': the think block stays in the stored text."""
    from thoughtsource.evaluate import evaluate_frame

    c = Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(
        split="train", number_samples=3, seed=1)
    with run_fault_server(reasoning="tags", contradict=True) as s:
        generate(c, backend="openai", model="fault-echo", base_urls=[s.base_url], chat=True, max_tokens=200,
                 store=tmp_path / "s.sqlite", progress=False, backend_options={"reasoning": "off"})
    cots = [cot for _, _, x in c.samples() for cot in x.generated_cot]
    assert all(cot.cot.startswith("<think>") and reasoning_info(cot) is None for cot in cots)
    stripped = evaluate_frame(c).answers
    kept = evaluate_frame(c, think_tags=None).answers
    # read from the CoT itself (the stage-2 answers read the extraction output): the text after </think> is the answer
    final = [cot.cot.rstrip(".").rsplit(" ", 1)[-1] for cot in cots]
    thought = [cot.cot.split("</think>")[0].rstrip(" .").rsplit(" ", 1)[-1] for cot in cots]
    assert final != thought  # contradict=True: the content states another answer than the thinking
    c.dump(tmp_path / "c.json")
    c2 = Collection.load(tmp_path / "c.json")
    for _, _, x in c2.samples():
        for cot in x.generated_cot:
            for ans in cot.answers:
                ans.answer = ""  # no extraction output: the CoT is read
    s2 = evaluate_frame(c2).answers
    k2 = evaluate_frame(c2, think_tags=None).answers
    per_cot = s2[s2["mode"] == "flexible"].drop_duplicates("cot_id")
    assert per_cot["pred"].tolist() == final and per_cot["contradicts_thinking"].all()
    assert not k2["contradicts_thinking"].any()
    assert len(stripped) == len(kept)


def test_cut_off_mid_thought_is_not_scored_as_wrong(examples_dir: Path, tmp_path: Path):
    from thoughtsource.evaluate import evaluate, evaluate_frame

    c = _reasoning_collection(examples_dir, tmp_path, reasoning="reasoning_content", max_tokens=6)
    result = evaluate_frame(c)
    assert result.answers["truncated"].all()
    acc = result.accuracy
    assert acc.empty or (acc["n"] == 0).all()
    evaluate(c, warn=False)
    assert all(ans.correct_answer is None for _, _, x in c.samples() for _, ans in x.iter_answers())


def test_a_reasoning_models_boxed_math_answer_is_scored_right(shared_data: Path, tmp_path: Path):
    """MATH-500 through a reasoning model (think block + "The final answer is $\\boxed{N}$."), recorded by the fault
    server: the think block is stripped, the last \\boxed{} read, and an equivalent LaTeX gold accepted."""
    from thoughtsource.evaluate import evaluate_frame

    def run(folder: str, **options: object) -> tuple[Collection, list[int]]:
        c = Collection(["math500"], data_dir=shared_data).select(split="test", number_samples=3, seed=1)
        with run_fault_server(reasoning="tags", boxed=True) as s:
            report = generate(c, backend="openai", model="fault-echo", base_urls=[s.base_url], chat=True, max_tokens=200,
                              store=tmp_path / folder / "s.sqlite", progress=False, backend_options=options)
        assert report.errors == 0
        samples = [x for _, _, x in c.samples()]
        # the thought ends "So the answer is N." (with the think tags kept, before "</think>")
        answers = [int(x.generated_cot[0].cot.split("</think>")[0].rstrip(" .").rsplit(" ", 1)[-1]) for x in samples]
        # the server does not know MATH: each problem gets a gold equal to its answer only as mathematics
        for x, n in zip(samples, answers, strict=True):
            x.answer = [f"\\dfrac{{{2 * n}}}{{2}}"]
        samples[-1].answer = [f"\\frac{{{2 * answers[-1] + 1}}}{{2}}"]  # and one it does not equal
        return c, answers

    # the backend splits the thought off: the content "The final answer is $\\boxed{N}$." is the answer
    c, answers = run("parsed")
    assert all(x.generated_cot[0].answers[0].answer.startswith("The final answer is $\\boxed{") for _, _, x in c.samples())
    a = evaluate_frame(c, mode="strict").answers.drop_duplicates("cot_id")
    assert a["pred"].tolist() == [str(n) for n in answers] and a["rule"].tolist() == ["math:boxed"] * 3
    assert a["correct"].tolist() == [True, True, False]
    # a server without a reasoning parser: the stored CoT keeps "<think> ... </think> The final answer is ..."; read
    # without an extraction output, the think block is stripped before the last \\boxed{} is taken
    c, answers = run("raw", reasoning="off")
    for _, _, x in c.samples():
        assert x.generated_cot[0].cot.startswith("<think>") and "</think> The final answer is $\\boxed{" in x.generated_cot[0].cot
        for ans in x.generated_cot[0].answers:
            ans.answer = ""
    a = evaluate_frame(c, mode="strict").answers.drop_duplicates("cot_id")
    assert a["pred"].tolist() == [str(n) for n in answers] and a["rule"].tolist() == ["math:boxed"] * 3
    assert a["correct"].tolist() == [True, True, False]
