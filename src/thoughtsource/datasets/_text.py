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
    """Upper-case the first letter only (``str.capitalize`` would lower-case the rest).

    A first word that is a symbol or name with its own casing ("p53", "mRNA", "iPhone", "epiDWI") is left alone.
    """
    for i, ch in enumerate(text):
        if ch.isalpha():
            word = text[i:].split(" ", 1)[0]
            if any(c.isupper() or c.isdigit() for c in word[1:]):
                return text
            return text[:i] + ch.upper() + text[i + 1 :]
        if not ch.isspace() and ch not in "\"'(":
            break
    return text


def sentence(text: str, end: str = ".") -> str:
    """A clean sentence: squashed white space, first letter upper-cased, final punctuation added if missing."""
    out = upper_first(squash(text))
    if out and out[-1] in ",;:":
        out = out[:-1]
    if out and out[-1] not in ".!?\"'":
        out += end
    return out


_INNER_STOP = re.compile(r"[.!?][\"')\]]*\s+\S")
# A boundary is plain when a word of 3+ letters ends with . ! or ? and the next word starts upper-case;
# a line whose every candidate boundary is plain is cut right there (pysbd gives the same, ~100x slower).
_PLAIN_BOUNDARY = re.compile(r"(?<![\w.])[A-Za-z]{3,}[.!?][\"')\]]*\s+[A-Z]")
_BOUNDARY = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=\S)")
_ABBREVIATIONS = frozenset({"mrs", "etc", "fig", "figs", "nos", "approx", "inc", "ltd", "viz", "resp", "vol", "dept",
                            "univ", "ref", "refs", "tab", "min", "max", "hrs", "yrs", "est", "ave"})


def _plain_cut(line: str) -> list[str] | None:
    """The sentences of ``line`` when all its candidate boundaries are plain, else None (ask pysbd)."""
    candidates = list(_INNER_STOP.finditer(line))
    plain = list(_PLAIN_BOUNDARY.finditer(line))
    if len(plain) != len(candidates):
        return None
    for m in plain:
        word = re.match(r"[A-Za-z]+", m.group(0)).group(0).lower()
        if word in _ABBREVIATIONS:
            return None
    return [p for p in (x.strip() for x in _BOUNDARY.sub(lambda m: m.group(1) + "\n", line).split("\n")) if p]


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    import pysbd  # rule-based, pure Python, no model download

    return pysbd.Segmenter(language="en", clean=False)


def split_sentences(text: str, *, join_lowercase: bool = False) -> list[str]:
    """Cut free text into sentences (pysbd's rule-based English segmenter); empty pieces dropped.

    Line breaks are sentence boundaries too (ECQA writes one statement per line, often without a period).
    With ``join_lowercase`` a piece that starts with a lower-case letter is glued back to the previous one
    (in scientific prose that is a false break after an abbreviation: "the m. puborectalis").
    """
    out: list[str] = []
    for line in text.splitlines():
        line = squash(line)
        if not line:
            continue
        first = True
        # pysbd is slow (it recompiles its regexes); a line without inner sentence punctuation is one sentence
        pieces = (_plain_cut(line) or _segmenter().segment(line)) if _INNER_STOP.search(line) else [line]
        for piece in pieces:
            piece = squash(piece)
            if not piece:
                continue
            if join_lowercase and not first and out and piece[0].islower():
                out[-1] = f"{out[-1]} {piece}"
            else:
                out.append(piece)
            first = False
    return out


def sentences(items: Iterable[str]) -> list[str]:
    """:func:`sentence` applied to each non-empty item."""
    return [sentence(x) for x in items if x and x.strip()]
