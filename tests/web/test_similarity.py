"""Sentence splitting and tf-idf / Jaccard similarities, on hand examples and the real merged model runs."""

from __future__ import annotations

import pytest

from thoughtsource.web.similarity import highlighted, jaccard, pairwise, segments, sentences


def test_segments_keep_the_text_and_split_sentences() -> None:
    text = "Costs 3.5 dollars. Then e.g. more!\nB) bookstore - yes\n\nSo the answer is B."
    segs = segments(text)
    assert "".join(s.text for s in segs) == text
    assert sentences(text) == ["Costs 3.5 dollars.", "Then e.g.", "more!", "B) bookstore - yes", "So the answer is B."]
    assert [s.index for s in segs if s.index >= 0] == [0, 1, 2, 3, 4]


def test_jaccard_by_hand() -> None:
    # {the, cat, sat} vs {the, cat, ran}: 2 shared of 4 distinct words
    assert jaccard("The cat sat.", "the cat ran") == pytest.approx(0.5)
    assert jaccard("", "") == 0.0
    assert jaccard("a b", "c d") == 0.0


def test_pairs_are_between_different_cots_and_the_threshold_filters() -> None:
    cots = ["Plants need sunlight. The sky is blue.", "Plants need sunlight to grow. Cats purr.", "Plants need sunlight."]
    sim = pairwise(cots)
    assert sim["sentences"][0] == ["Plants need sunlight.", "The sky is blue."]
    assert all(p[0] < p[2] for p in sim["pairs"])
    by = {(p[0], p[1], p[2], p[3]): p for p in sim["pairs"]}
    assert by[(0, 0, 2, 0)][4] == pytest.approx(1.0) and by[(0, 0, 2, 0)][5] == pytest.approx(1.0)
    assert by[(0, 0, 1, 0)][5] == pytest.approx(3 / 5)  # {plants, need, sunlight} of {plants, need, sunlight, to, grow}
    assert (0, 1, 1, 1) not in by  # "The sky is blue." and "Cats purr." share nothing
    low = highlighted(sim, "jaccard", 0.25)
    high = highlighted(sim, "jaccard", 0.9)
    assert (1, 0) in low and (1, 0) not in high
    assert (0, 0) in high and (2, 0) in high
    assert (0, 1) not in low


def test_real_sample_of_seven_cots(served) -> None:
    it = next(it for it in served.items if len(it.sample.generated_cot) >= 7)
    texts = [c.cot or "" for c in it.sample.generated_cot]
    sim = pairwise(texts)
    assert len(sim["sentences"]) == len(texts)
    for text, sents in zip(texts, sim["sentences"], strict=True):
        assert [s.text for s in segments(text) if s.index >= 0] == sents
    assert sim["pairs"], "seven CoTs of the same question share some sentences"
    counts = [len(highlighted(sim, "tfidf", t)) for t in (0.1, 0.25, 0.5, 0.9)]
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
