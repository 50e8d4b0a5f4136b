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


def _all_pairs(texts: list[str]) -> dict[tuple[int, int, int, int], tuple[float, float]]:
    """Every sentence pair of different CoTs with both similarities, by brute force (what the page got before)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    flat = [(ci, si, s) for ci, t in enumerate(texts) for si, s in enumerate(sentences(t))]
    cos = cosine_similarity(TfidfVectorizer(stop_words="english").fit_transform([s for _, _, s in flat]))
    return {(ca, sa, cb, sb): (float(cos[i, j]), jaccard(ta, tb))
            for i, (ca, sa, ta) in enumerate(flat) for j, (cb, sb, tb) in enumerate(flat) if ca < cb}


def test_top_partners_highlight_what_all_pairs_highlight_with_the_same_values(served) -> None:
    """Each sentence keeps its TOP_K best partners (and its best one by each method): the values are the brute-force
    ones, and at every threshold and method the page highlights exactly what it highlighted with every pair."""
    from thoughtsource.web.similarity import MIN_SENT, TOP_K

    samples = [it for it in served.items if len(it.sample.generated_cot) >= 7][:15]
    for it in samples:
        texts = [c.cot or "" for c in it.sample.generated_cot]
        sim, full = pairwise(texts), _all_pairs(texts)
        every = {"pairs": [[*k, *(round(x, 4) for x in v)] for k, v in full.items() if max(v) >= MIN_SENT]}
        for p in sim["pairs"]:
            assert p[4:] == pytest.approx(list(full[tuple(p[:4])]), abs=1e-4)
        assert sim["pairs"] == sorted(sim["pairs"])
        partners: dict[tuple[int, int], int] = {}
        for p in sim["pairs"]:
            for end in ((p[0], p[1]), (p[2], p[3])):
                partners[end] = partners.get(end, 0) + 1
        # a pair is kept by one of its ends, each keeping at most TOP_K + 2 partners
        assert sum(partners.values()) <= 2 * (TOP_K + 2) * sum(len(s) for s in sim["sentences"])
        for method in ("tfidf", "jaccard"):
            for threshold in (0.05, 0.1, 0.25, 0.45, 0.7, 0.9, 1.0):
                assert highlighted(sim, method, threshold) == highlighted(every, method, threshold), (method, threshold)


def test_three_20kb_traces_send_a_few_thousand_pairs(served) -> None:
    """Three 20 KB traces (real CoTs of the model runs, concatenated): every pair above 0.05 was ~53,000 pairs and
    1.6 MiB of page data; the top partners are a few thousand and the JSON under 150 KB."""
    import json
    import random

    texts = [c.cot for it in served.items for c in it.sample.generated_cot if c.cot and len(c.cot) > 200]
    rng = random.Random(0)
    traces = []
    for _ in range(3):
        t = ""
        while len(t) < 20_000:
            t += rng.choice(texts) + "\n"
        traces.append(t[:20_000])
    sim = pairwise(traces)
    n = sum(len(s) for s in sim["sentences"])
    assert len(sim["pairs"]) <= 5 * n and len(json.dumps(sim)) < 150_000, (len(sim["pairs"]), len(json.dumps(sim)))
