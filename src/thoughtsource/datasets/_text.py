"""Text clean-up shared by the dataset converters.

Raw QA files come in several states: pre-tokenized (QED, EntailmentBank: ``"Röntgen , of Germany"``),
lower-case fact lists without final punctuation (WorldTree, EntailmentBank, OpenBookQA), or free text
that has to be cut into sentences (ECQA explanations, PubMedQA long answers).  These helpers turn such
text into the clean sentences a reference CoT is made of.  They never lower-case anything: the
published ThoughtSource loaders used ``str.capitalize()``, which lower-cased proper nouns
("fort wayne is in indiana"); :func:`sentence` only upper-cases the first letter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

_WS = re.compile(r"\s+")


def squash(text: str) -> str:
    """Collapse runs of white space (incl. newlines) into one blank and strip the ends."""
    return _WS.sub(" ", text).strip()


# Undo Penn-Treebank-style tokenization ("a , b", "( x )", "do n't", "`` q ''").
_DETOK_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"``\s*"), '"'),
    (re.compile(r"\s*''"), '"'),
    (re.compile(r"\.\s\.\s\."), "..."),
    (re.compile(r"([(\[{])\s+"), r"\1"),
    (re.compile(r"\s+([)\]}])"), r"\1"),
    (re.compile(r"\s+([.,:;?!%](?:\s|$|[\"')\]]))"), r"\1"),
    (re.compile(r"\s+([.,:;?!%])$"), r"\1"),
    (re.compile(r"\s+(n't|'s|'re|'ve|'ll|'d|'m)\b", re.IGNORECASE), r"\1"),
    (re.compile(r"\b(can) (not)\b", re.IGNORECASE), r"\1\2"),
    (re.compile(r"(\w)\s+-\s+(\w)"), r"\1-\2"),  # "Skłodowska - Curie" -> "Skłodowska-Curie"
    (re.compile(r"\s+--\s+"), " – "),
    (re.compile(r"\$\s+(\d)"), r"$\1"),
)


def detokenize(text: str) -> str:
    """Turn pre-tokenized text back into ordinary text (white space around punctuation, brackets, clitics)."""
    out = squash(text)
    for pattern, repl in _DETOK_RULES:
        out = pattern.sub(repl, out)
    return out.strip()


def upper_first(text: str) -> str:
    """Upper-case the first letter only (``str.capitalize`` would lower-case the rest)."""
    for i, ch in enumerate(text):
        if ch.isalpha():
            return text[:i] + ch.upper() + text[i + 1 :]
        if not ch.isspace() and ch not in "\"'(":
            break
    return text


def sentence(text: str, end: str = ".") -> str:
    """A clean sentence: squashed white space, first letter upper-cased, final punctuation added if missing."""
    out = upper_first(squash(text))
    if out and out[-1] not in ".!?\"'":
        out += end
    return out


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    import pysbd  # rule-based, pure Python, no model download

    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(text: str) -> list[str]:
    """Cut free text into sentences (pysbd's rule-based English segmenter); empty pieces dropped.

    Line breaks are sentence boundaries too (ECQA writes one statement per line, often without a period).
    """
    out: list[str] = []
    for line in text.splitlines():
        line = squash(line)
        if not line:
            continue
        for piece in _segmenter().segment(line):
            piece = squash(piece)
            if piece:
                out.append(piece)
    return out


def sentences(items: Iterable[str]) -> list[str]:
    """:func:`sentence` applied to each non-empty item."""
    return [sentence(x) for x in items if x and x.strip()]
