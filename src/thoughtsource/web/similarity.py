"""Sentence similarity between the CoTs shown for one question (tf-idf cosine and Jaccard).

The server splits every CoT into sentences and computes, for every pair of sentences of *different*
CoTs, both similarities, and keeps each sentence's few best partners (:data:`TOP_K`).  The page receives
them as JSON and the browser filters them with the threshold slider, so moving the slider needs no request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

# A sentence: from a non-space character to the first [.!?] followed by whitespace or the end, or to
# a line break, or to the end.  "3.5" and "e.g.x" stay inside their sentence.
_SENTENCE = re.compile(r"\S.*?(?:[.!?]+(?=\s|$)|(?=\n)|$)")
_WORD = re.compile(r"\w+")

# Pairs below this are not sent to the browser (the slider's lowest setting).
MIN_SENT = 0.05
METHODS = ("tfidf", "jaccard")
# Partners kept per sentence (the best by either method is always kept as well): three 20 KB traces send
# ~4,000 pairs instead of ~53,000 (docs/design/web.md, "Similarity").
TOP_K = 3
# The slider's initial tf-idf threshold, chosen by measurement on the example files (docs/design/web.md,
# "Similarity threshold"; benchmarks/similarity_threshold.py).
DEFAULT_THRESHOLD = 0.45


@dataclass(frozen=True)
class Segment:
    """A piece of CoT text: a sentence (``index`` >= 0) or the whitespace between two (``index`` = -1)."""

    text: str
    index: int


def segments(text: str) -> list[Segment]:
    """Split ``text`` into sentences and the whitespace between them; joining the texts gives ``text`` back."""
    out: list[Segment] = []
    pos = 0
    for n, m in enumerate(_SENTENCE.finditer(text)):
        if m.start() > pos:
            out.append(Segment(text[pos : m.start()], -1))
        out.append(Segment(m.group(0), n))
        pos = m.end()
    if pos < len(text):
        out.append(Segment(text[pos:], -1))
    return out


def sentences(text: str) -> list[str]:
    return [s.text for s in segments(text) if s.index >= 0]


def jaccard(a: str, b: str) -> float:
    """|A ∩ B| / |A ∪ B| of the lower-cased word sets."""
    wa, wb = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    if not wa and not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def pairwise(cots: list[str], k: int = TOP_K) -> dict[str, Any]:
    """Sentences of each CoT and, per sentence, its most similar sentences of the other CoTs.

    Returns ``{"sentences": [[str, ...] per CoT], "pairs": [[cot_a, sent_a, cot_b, sent_b, tfidf, jaccard], ...]}``
    with ``cot_a < cot_b``, sorted.  A pair is kept when it is one of the ``k`` best partners (by the larger of the
    two similarities, at least ``MIN_SENT``) of either of its sentences, or the best partner of either by one method:
    so :func:`highlighted` gives, at every threshold, what it gives with all pairs, and three 20 KB traces send a few
    thousand pairs, not every one of their ~50,000.  Everything depends on the CoTs' order only through their indices:
    ties between partners go to the lower (CoT, sentence) index of ``cots`` as given, so a caller that passes the
    CoTs in the order a viewer sees them (blind review) gets data that tells nothing of any other order.  The tf-idf
    vocabulary and idf weights are fitted on the sentences of these CoTs (English stop words removed); Jaccard is
    over the lower-cased word sets (:func:`jaccard`), both as whole matrices.
    """
    sents = [sentences(c) for c in cots]
    texts = [s for ss in sents for s in ss]
    owner = np.repeat(np.arange(len(sents)), [len(ss) for ss in sents])
    index = np.concatenate([np.arange(len(ss)) for ss in sents]) if texts else np.zeros(0, dtype=int)
    if len(set(owner.tolist())) < 2:
        return {"sentences": sents, "pairs": []}
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

    try:  # rows are l2-normalised: their products are the cosines
        tf = TfidfVectorizer(stop_words="english").fit_transform(texts)
        cos = (tf @ tf.T).toarray()
    except ValueError:  # only stop words / no words at all
        cos = np.zeros((len(texts), len(texts)))
    try:
        words = CountVectorizer(token_pattern=_WORD.pattern, binary=True).fit_transform(texts)
        both = (words @ words.T).toarray().astype(float)
        sizes = np.asarray(words.sum(axis=1), dtype=float).ravel()
        union = sizes[:, None] + sizes[None, :] - both
        jac = np.divide(both, union, out=np.zeros_like(both), where=union > 0)
    except ValueError:  # no words at all
        jac = np.zeros_like(cos)
    other = owner[:, None] != owner[None, :]
    best = np.where(other, np.maximum(cos, jac), -1.0)
    keep = np.zeros_like(other)
    rows = np.arange(len(texts))[:, None]
    # stable sorts: equal scores keep the lower index first
    top = np.argsort(-best, axis=1, kind="stable")[:, :k]
    keep[rows, top] = True
    for m in (cos, jac):
        keep[rows, np.argmax(np.where(other, m, -1.0), axis=1)[:, None]] = True
    keep &= other & (best >= MIN_SENT)
    keep |= keep.T
    i, j = np.nonzero(np.triu(keep))  # row-major: sorted by (i, j), i.e. by (CoT, sentence) of both sides
    pairs = np.stack([owner[i], index[i], owner[j], index[j]], axis=1).tolist()
    t, jj = np.round(cos[i, j], 4).tolist(), np.round(jac[i, j], 4).tolist()
    return {"sentences": sents, "pairs": [[*p, a, b] for p, a, b in zip(pairs, t, jj, strict=True)]}


def highlighted(sim: dict[str, Any], method: str, threshold: float) -> set[tuple[int, int]]:
    """(CoT, sentence) indices the page highlights for ``method`` at ``threshold`` (same rule as app.js)."""
    col = 4 if method == "tfidf" else 5
    out: set[tuple[int, int]] = set()
    for p in sim["pairs"]:
        if p[col] >= threshold:
            out.add((p[0], p[1]))
            out.add((p[2], p[3]))
    return out
