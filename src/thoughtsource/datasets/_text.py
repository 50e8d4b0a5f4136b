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
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..schema import Sample

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
        letters = re.match(r"[A-Za-z]+", m.group(0))
        assert letters is not None  # a _PLAIN_BOUNDARY match starts with 3+ letters
        word = letters.group(0).lower()
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


# --------------------------------------------------------------------------- raw debris
# Applied to every converted sample by ``datasets.convert_split`` (one place, every dataset): invisible
# characters, odd white space and CSV-escaping leftovers of the raw files never reach a Sample.

_INVISIBLE = dict.fromkeys(map(ord, "\ufeff\u200b\u200c\u200d\u2060"), None)  # BOM / zero-width
_SPACES = dict.fromkeys(map(ord, "\u00a0\u202f\u2007"), " ")  # no-break spaces
_LINE_SEPARATORS = dict.fromkeys(map(ord, "\u2028\u2029"), "\n")
_RUNS_OF_BLANKS = re.compile(r"[ \t]{2,}")
_BLANKS_AROUND_NEWLINE = re.compile(r"[ \t]*\n[ \t]*")
_TRIPLE_QUOTE = re.compile(r'^"""|"""$')  # '"""Let's talk"""': a CSV-escaped quotation
_HAS_WORD = re.compile(r"\w")
_STRAY_QUOTE = re.compile(r'\s"$')

#: the kinds of debris :func:`debris` reports, in the order of the docs' before/after table
DEBRIS_KINDS = ("invisible", "no-break space", "line separator", "doubled blank", "stray quote", "tripled quotes",
                "empty CoT item")


def _stray_quote(text: str) -> bool:
    """An unbalanced ``"`` after white space at the very end (MedQA's ``'Age\\n"'``); a closing quote
    right after a word (``42"`` for inches, ``…sandwiches."``) is left alone."""
    return bool(_STRAY_QUOTE.search(text)) and text.count('"') % 2 == 1


def _quote_debris(text: str) -> str:
    if _TRIPLE_QUOTE.search(text):
        return _TRIPLE_QUOTE.sub('"', text)
    if _stray_quote(text):
        return text[:-1].rstrip()
    return text


def clean_text(text: str) -> str:
    """Text without the raw files' debris: BOM / zero-width characters dropped, no-break spaces and
    line separators made ordinary, runs of blanks squashed (line breaks kept), stray or CSV-tripled quotes
    undone, ends stripped.  Idempotent."""
    out = text.translate(_INVISIBLE).translate(_SPACES).translate(_LINE_SEPARATORS)
    out = _BLANKS_AROUND_NEWLINE.sub("\n", _RUNS_OF_BLANKS.sub(" ", out)).strip()
    return _quote_debris(out)


def debris(text: str) -> list[str]:
    """The kinds of debris (see :data:`DEBRIS_KINDS`) in ``text``; [] for clean text."""
    found = []
    if text != text.translate(_INVISIBLE):
        found.append("invisible")
    if text != text.translate(_SPACES):
        found.append("no-break space")
    if text != text.translate(_LINE_SEPARATORS):
        found.append("line separator")
    if _RUNS_OF_BLANKS.search(text):
        found.append("doubled blank")
    stripped = text.strip()
    if _TRIPLE_QUOTE.search(stripped):
        found.append("tripled quotes")
    elif _stray_quote(text.rstrip()):
        found.append("stray quote")
    return found


def is_empty_item(text: str) -> bool:
    """A reference-CoT item without a single letter or digit (PubMedQA's lone ".")."""
    return not _HAS_WORD.search(text)


CLEANUP_VERSION = 1  # part of the converted-cache key: bump when clean_text / clean_sample change


def clean_sample(sample: Sample) -> Sample:
    """``sample`` with :func:`clean_text` applied to question, context, choices, answers and reference CoT
    items, and CoT items without a letter or digit dropped.  Choices and answers are cleaned alike, so an
    answer that was a choice stays one."""
    cot = [clean_text(x) for x in sample.cot]
    return sample.model_copy(update={
        "question": clean_text(sample.question),
        "context": clean_text(sample.context or ""),
        "choices": [clean_text(c) for c in sample.choices],
        "answer": [clean_text(a) for a in sample.answer],
        "cot": [x for x in cot if not is_empty_item(x)],
    })


def sample_debris(sample: Sample) -> Counter[str]:
    """Fields of ``sample`` per kind of debris (a field with two kinds counts for both)."""
    found: Counter[str] = Counter()
    for text in (sample.question, sample.context or "", *sample.choices, *sample.answer, *sample.cot):
        found.update(debris(text))
    found["empty CoT item"] += sum(is_empty_item(x) for x in sample.cot)
    return +found
