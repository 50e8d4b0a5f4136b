"""How the sample page cuts a CoT into thinking and final answer (web/traces.py), without a browser: the split agrees
with the backends' own (reasoning.split_reasoning), every sentence stays one step in order whatever the tags, and the
served page folds the thinking, labels it with its length and never shows a think tag as text."""

from __future__ import annotations

import html as html_mod
import random
import re
from pathlib import Path

import pytest

from thoughtsource.reasoning import ReasoningInfo, split_reasoning
from thoughtsource.testing.traces import MODELS, write_long_traces
from thoughtsource.web.data import ServedData
from thoughtsource.web.similarity import segments
from thoughtsource.web.traces import COLLAPSE_CHARS, trace_parts

from .conftest import add_user, login, page_data

R1 = "<think>\nOkay, the sum is 2 + 3.\nWait, let me check. It is 5.\n</think>\n\nThe answer is $\\boxed{5}$."


def _steps(parts) -> list[int]:
    return [p.index for part in parts for p in part.pieces if p.index >= 0]


def _norm(text: str) -> str:
    return " ".join(text.split())


def test_thinking_and_final_answer_apart_with_their_lengths() -> None:
    parts = trace_parts(R1)
    assert [(p.kind, p.closed) for p in parts] == [("thinking", True), ("answer", True)]
    want = split_reasoning(R1)
    assert (parts[0].text, parts[1].text) == (want.reasoning, want.answer)
    assert (parts[0].chars, parts[0].words) == (len(want.reasoning), len(want.reasoning.split()))
    assert (parts[1].chars, parts[1].words) == (len(want.answer), 4)
    # the tags are sentences of their own: hidden steps, so the steps keep the numbers of similarity.segments
    assert _steps(parts) == list(range(sum(s.index >= 0 for s in segments(R1))))
    assert [p.text for part in parts for p in part.pieces if p.tag] == ["<think>", "</think>"]
    assert "<think>" not in parts[0].text + parts[1].text


def test_an_unclosed_think_is_a_cut_off_thought_with_no_answer() -> None:
    text = "<think>\nLet me see. The area is 12.\nHmm, so the perimeter"
    parts = trace_parts(text)
    assert [(p.kind, p.closed) for p in parts] == [("thinking", False)]
    want = split_reasoning(text)
    assert want.truncated and parts[0].text == want.reasoning
    # tags that start or end a sentence are not shown, whatever their case
    parts = trace_parts("<THINK>So x = 5.</Think>\nFinal: 5.")
    assert [(p.kind, p.text) for p in parts] == [("thinking", "So x = 5."), ("answer", "Final: 5.")]


def test_an_end_tag_alone_means_the_cot_began_inside_the_thought() -> None:
    text = "The sum is 5.\n</think>\n\nSo 5."  # R1's chat template opened <think> in the prompt
    parts = trace_parts(text)
    assert [(p.kind, p.closed, p.text) for p in parts] == [("thinking", True, "The sum is 5."), ("answer", True, "So 5.")]
    assert (split_reasoning(text).reasoning, split_reasoning(text).answer) == ("The sum is 5.", "So 5.")


def test_text_before_and_between_thoughts_and_an_empty_answer() -> None:
    parts = trace_parts("Plan first.\n<think>\nA.\n</think>\nMiddle.\n<think>\nB.\n</think>\n")
    assert [(p.kind, p.text) for p in parts] == [("text", "Plan first."), ("thinking", "A."), ("text", "Middle."),
                                                ("thinking", "B."), ("answer", "")]
    assert parts[-1].chars == 0 and parts[-1].steps == 0
    assert [p.text for p in parts[3].pieces if p.tag] == ["<think>", "</think>"]  # hidden steps in the thought they bound


def test_a_cot_without_tags_is_one_part_and_a_stored_thought_is_thinking() -> None:
    text = "Step one. Step two.\nSo B."
    assert [(p.kind, p.text) for p in trace_parts(text)] == [("cot", text)]
    info = ReasoningInfo(source="reasoning_content", truncated=True)
    assert [(p.kind, p.closed) for p in trace_parts(text, info)] == [("thinking", False)]
    assert [(p.kind, p.closed) for p in trace_parts(text, ReasoningInfo(source="tags"))] == [("thinking", True)]
    long = "A sentence of the chain. " * (COLLAPSE_CHARS // 25 + 1)
    assert trace_parts(long)[0].long and not trace_parts(text)[0].long


def test_no_sentence_lost_moved_or_doubled_whatever_the_tags() -> None:
    """An attacker's CoTs: tags anywhere (inside sentences, doubled, stray, unclosed, upper case, glued to words)."""
    rng = random.Random(7)
    atoms = ["<think>", "</think>", "<THINK>", "Okay.", "So x = 3.5 here", "e.g.x is fine!", " ", "\n", "\n\n", "Why?",
             "done</think>", "<think>go", "a.</think>b", "  <think>  ", "ok.\n</think>\n\nAnswer: 4."]
    for _ in range(3000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 12)))
        parts = trace_parts(text)
        n = sum(s.index >= 0 for s in segments(text))
        assert _steps(parts) == list(range(n)), text
        shown = "".join(p.text for part in parts for p in part.pieces if not p.tag)
        tag = re.compile("</?think>", re.I)
        assert re.sub(r"\s", "", tag.sub("", shown)) == re.sub(r"\s", "", tag.sub("", text)), text
        assert all(part.kind != "answer" or i == len(parts) - 1 for i, part in enumerate(parts)), text


@pytest.fixture
def long_app(make_app, tmp_path: Path):
    # 4 KB traces: over the collapse limit, and the page's similarity (every sentence pair, in Python) stays cheap
    path = write_long_traces(Path(__file__).resolve().parents[2].parent / "shared" / "data", tmp_path / "long.json",
                             trace_chars=4000)
    return make_app(data=ServedData.load([path]))


@pytest.mark.slow  # the page's first view imports scikit-learn and computes the similarity
def test_the_served_page_folds_the_thinking_and_shows_the_final_answer_apart(long_app) -> None:
    add_user(long_app, "alice")
    client, _ = login(long_app, "alice")
    it = long_app.state.data.items[0]
    page = client.get(f"/sample/{it.dataset}/{it.split}/{it.sample.id}").text
    # three cards; each thought folded (a closed <details>), collapsed and labelled with its length
    assert page.count('<details class="part part-thinking collapsed" data-kind="thinking">') == len(MODELS)
    assert page.count('class="part part-answer"') == len(MODELS) - 1 and page.count("cut off: no &lt;/think&gt;") == 1
    assert "No final answer: the trace was cut off while thinking." in page
    for c in it.sample.generated_cot:
        want = split_reasoning(c.cot)
        assert f"{len(want.reasoning):,} chars · {len(want.reasoning.split()):,} words" in page
        if not want.truncated:
            assert f"{len(want.answer):,} chars · {len(want.answer.split()):,} words" in page
    # what the page shows as text: no think tag anywhere; every sentence once, as one step numbered as the similarity
    visible = re.sub(r'<span class="sent step[^"]*tagstep"[^>]*hidden>.*?</span>', "", page, flags=re.S)
    texts = re.findall(r'<div class="cot-text">(.*?)</div>', visible, re.S)
    assert not any("think&gt;" in t for t in texts)
    steps = [int(s) for s in re.findall(r'data-s="(\d+)"', page)]
    sims = page_data(page)["similarity"]["sentences"]
    assert steps == [i for ss in sims for i in range(len(ss))]
    shown = [_norm(html_mod.unescape(re.sub(r"<[^>]+>", "", t))) for t in texts]
    for c in it.sample.generated_cot:
        want = split_reasoning(c.cot)
        assert _norm(want.reasoning) in shown and (want.truncated or _norm(want.answer) in shown)
