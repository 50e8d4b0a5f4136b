"""The ``multiplechoice`` type: the letter of a choice ("B"); the gold is the letter of the choice whose text the sample
stores, every letter with that text when several choices have it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from .base import (
    AMBIGUOUS,
    ANCHOR_KEYS,
    NONE,
    TRAIL,
    TRUNCATED,
    AnswerType,
    Extraction,
    Mode,
    Source,
    affirmed,
    answer_spans,
    clean_text,
    normalize_text,
)

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_STAR_LETTERS = LETTERS.lower()  # STaR's prompts letter choices "(a) ..."

_LETTER = re.compile(
    r"""
      \(\s*(?P<p>[A-Za-z])\s*\)                                  # (B) (b)
    | \b(?:option|choice|letter)\s*\(?(?P<o>[A-Za-z])\b\)?       # option B, choice (b)
    | (?<![\w'])(?P<r>[A-Za-z])\)                                # B)
    | (?<![\w'’-])(?P<b>[A-Z])(?![\w'’]|-\w)                     # B  B.  B:  D--text
    """,
    re.X,
)
_STRONG = re.compile(
    r"\(\s*(?P<p>[A-Za-z])\s*\)|\b(?:option|choice)\s*\(?(?P<o>[A-Za-z])\b\)?|(?<![\w'])(?P<r>[A-Za-z])\)",
)
_LIST_SEP = re.compile(r"^[\s,/&.]*(?:(?:or|and|nor|vs\.?)\b)?[\s,/&]*(?:maybe|possibly|perhaps|also|either)?\s*$", re.I)
_LOWER_WORD = re.compile(r"\s+(?!(?:or|and|nor|through|to|vs)\b)[a-z]")


class Choices(NamedTuple):
    n: int
    norms: tuple[str, ...]  # normalized choice texts
    texts: tuple[str, ...]


@lru_cache(maxsize=8192)
def parse_choices(choices: tuple[str, ...]) -> Choices:
    return Choices(len(choices), tuple(normalize_text(c) for c in choices), choices)


def choice_letters(span: str, ch: Choices, pattern: re.Pattern[str] = _LETTER) -> list[tuple[int, int, str]]:
    """(start, end, LETTER) of the choice letters in ``span``, in order."""
    out = []
    limit = ch.n if ch.n else 10
    whole = span.strip(TRAIL)
    for m in pattern.finditer(span):
        kind = m.lastgroup
        letter = m.group(kind)  # type: ignore[arg-type]
        # A bare capital "A"/"I" before a lower-case word is an article or a pronoun ("A dog", "I think"),
        # unless the words are the text of that choice ("A motel room").
        if kind == "b" and letter in "AI" and _LOWER_WORD.match(span, m.end()):
            idx = ord(letter) - 65
            rest = normalize_text(span[m.end() :])
            if not (idx < ch.n and ch.norms[idx] and rest.startswith(ch.norms[idx])):
                continue
        idx = ord(letter.upper()) - 65
        if 0 <= idx < limit:
            out.append((m.start(), m.end(), letter.upper()))
    if not out and len(whole) == 1 and whole.isalpha():  # "the answer is b."
        idx = ord(whole.upper()) - 65
        if 0 <= idx < limit:
            out.append((0, len(span), whole.upper()))
    return out


def _choice_text(span: str, ch: Choices) -> Extraction | None:
    if not ch.n:
        return None
    norm = normalize_text(span)
    if not norm:
        return None
    for i, c in enumerate(ch.norms):
        if c and norm == c:
            return Extraction(chr(65 + i), "mc:choice-text")
    padded = f" {norm} "
    hits = [(padded.find(f" {c} "), len(c), i) for i, c in enumerate(ch.norms) if c and f" {c} " in padded]
    if not hits:
        return None
    # Drop choices contained in a longer matched one ("money" inside "money bank"), and a choice whose text is the
    # text of an earlier one (CommonsenseQA's "mortal" as A and E): the first letter with that text stands for it, as
    # an exact match does (gold by position accepts any of them).
    hits = [h for h in hits if not any(o[2] != h[2] and o[0] <= h[0] and h[0] + h[1] <= o[0] + o[1]
                                       and (o[1] > h[1] or o[2] < h[2]) for o in hits)]
    hits.sort()
    if len(hits) > 1 and _LIST_SEP.match(padded[hits[0][0] + hits[0][1] + 1 : hits[1][0]]):
        return AMBIGUOUS  # "wealth or get rich"
    first = hits[0]
    if first[0] > 25 and first[0] + first[1] + 2 < len(padded):
        return None  # a choice's words in the middle of a sentence are not a stated answer (start or end only)
    if len(hits) == 1 or hits[0][0] == 0:
        return Extraction(chr(65 + hits[0][2]), "mc:choice-text")
    return AMBIGUOUS


def _after_choice_text(span: str, pos: int, letter: str, ch: Choices) -> int:
    """Position after the text of choice ``letter`` when it follows at ``pos`` ("B) falling down")."""
    idx = ord(letter) - 65
    if idx < ch.n:
        t = ch.texts[idx].strip().rstrip(".").lower()
        if t:
            j = span.lower().find(t, pos, pos + len(t) + 4)
            if j >= 0 and not span[pos:j].strip(" :.-–)"):
                return j + len(t)
    return pos


def _mc_in_span(span: str, ch: Choices) -> Extraction | None:
    found = choice_letters(span, ch)
    if found:
        _, e0, first = found[0]
        e0 = _after_choice_text(span, e0, first, ch)
        for s, e, letter in found[1:]:
            if s < e0:
                continue  # a capital inside the choice's own text ("C) A 6'' Man")
            if not _LIST_SEP.match(span[e0:s]):
                break
            if letter != first:
                return AMBIGUOUS  # "B or C", "(A), (B), or (D)", "B) falling down and D) exhaustion"
            e0 = _after_choice_text(span, e, letter, ch)
        return Extraction(first, "mc:letter")
    return _choice_text(span, ch)


# an answer sentence that ends while it lists choices: "either (D) university or (", "(A) countryside, ("
_DANGLING = re.compile(r"(?:,|\bor|\band|\beither)\s*\(?\s*$", re.I)


def _cut_in_a_list(text: str, span: str) -> bool:
    """Whether ``text`` ends inside this answer sentence while it lists choices (it was cut off)."""
    tail = span.rstrip()
    return bool(tail) and text.rstrip().endswith(tail) and _DANGLING.search(tail) is not None


def _extract_mc(text: str, mode: Mode, source: Source, ch: Choices) -> Extraction:
    spans = answer_spans(text, source)
    if spans and _cut_in_a_list(text, spans[0][1]):
        if source != "extraction":
            return TRUNCATED  # a CoT cut off while it listed its answer: not answered (as for numbers)
        spans = spans[1:]  # an extraction output answered at its start; the cut phrase after it does not count
    for pos, span in spans:
        said = affirmed(text, pos, span)
        if said is None:
            continue
        r = _mc_in_span(said, ch)
        if r is not None:
            return r
    if mode == "flexible":
        found = choice_letters(text, ch, _STRONG)
        if found:
            return Extraction(found[-1][2], "mc:last-letter")
    return NONE


# A bare answer, the most common answer-extraction output ("B.", " (C)", ": No", "True", "B) <choice B's text>."):
# the full rules give exactly what these give (a letter within the choices, a yes/no/true/false word), so they
# are read at once.
# ``extract(..., shortcut=False)`` always runs the full rules; tests check both agree on every real answer.
_BARE_LETTER = re.compile(r"[ \t]*:?[ \t]*(?:\(([A-Z])\)|([A-Z])\)?)\.?[ \t]*")


# "B) the text of choice B." with nothing else: no sentence end, mark-up or answer phrase inside
_BARE_LETTER_TEXT = re.compile(r"[ \t]*\(?([A-Z])\)[ \t]+([^.!?;}\n*_`\\]+?)\.?[ \t]*")


class MultipleChoice(AnswerType):
    name = "multiplechoice"

    def extract(self, text: str, mode: Mode, source: Source, choices: Sequence[str]) -> Extraction:
        return _extract_mc(clean_text(text, source), mode, source, parse_choices(tuple(choices)))

    def bare(self, text: str, choices: Sequence[str]) -> Extraction | None:
        m = _BARE_LETTER.fullmatch(text) if len(text) < 12 else None
        if m:
            letter = m.group(1) or m.group(2)
            if ord(letter) - 65 < (len(choices) or 10):
                return Extraction(letter, "mc:letter")
            return None
        m = _BARE_LETTER_TEXT.fullmatch(text)
        if m:
            idx = ord(m.group(1)) - 65
            if idx < len(choices) and m.group(2).lower() == choices[idx].strip().rstrip(".").lower():
                low = text.lower()
                if not any(k in low for k in ANCHOR_KEYS):
                    return Extraction(m.group(1), "mc:letter")
        return None

    def gold(self, gold: Sequence[str], choices: Sequence[str], letter: str | None = None) -> Any:
        # By position where the source gave it (``letter``, kept by the AQuA and CommonsenseQA converters where the
        # gold's text is the text of several choices).  Otherwise the gold is the text of a choice (the ThoughtSource
        # schema); where several choices have that text, every one of their letters is right.
        g = str(gold[0])
        if letter:
            i = ord((letter.strip().upper() or "@")[0]) - 65
            if 0 <= i < len(choices) and choices[i] == g:
                return chr(65 + i)
        letters = [chr(65 + i) for i, c in enumerate(choices) if c == g]
        if not letters:
            norm = normalize_text(g)
            letters = [chr(65 + i) for i, c in enumerate(parse_choices(tuple(choices)).norms) if c == norm]
        if letters:
            return letters[0] if len(letters) == 1 else frozenset(letters)
        s = g.strip().strip("()").upper()
        return s if len(s) == 1 and s.isalpha() else None

    def equal(self, value: Any, gold: Any) -> bool:
        return value in gold if isinstance(gold, frozenset) else bool(value == gold)

    def extraction_prompt(self, choices: Sequence[str], available: Sequence[str] | dict[str, Any]) -> str:
        if 2 <= len(choices) <= len(LETTERS):
            key = f"kojima-A-{LETTERS[len(choices) - 1]}"
            if key in available:
                return key
        return self.extraction

    def gold_text(self, answer: Sequence[str], choices: Sequence[str]) -> str:
        if answer and answer[0] in choices:
            return LETTERS[list(choices).index(answer[0])]
        return ", ".join(answer)

    def answer_text(self, value: Any, choices: Sequence[str]) -> str | None:
        i = ord(str(value).upper()) - 65
        return choices[i] if 0 <= i < len(choices) else None

    def gold_problems(self, answer: Sequence[str], choices: Sequence[str]) -> list[str]:
        problems = []
        if len(choices) < 2:
            problems.append(f"field 'choices': a multiplechoice sample needs at least 2 choices, got {len(choices)}")
        problems += [f"field 'answer': {a!r} is not one of the choices {list(choices)!r}" for a in answer if a not in choices]
        return problems + super().gold_problems(answer, choices)

    def question_choices(self, choices: Sequence[str]) -> Sequence[str]:
        return choices

    def published_gold(self, gold: str, choices: Sequence[str]) -> tuple[str, str | None]:
        # Kojima's logs print the gold letter: the sample stores that choice's text (the schema), and the letter
        # where several choices have that text, so the gold is scored by position.
        if choices and len(gold) == 1 and 0 <= ord(gold) - 65 < len(choices):
            text = choices[ord(gold) - 65]
            return text, gold if list(choices).count(text) > 1 else None
        return gold, None

    def star_answer(self, answer: str, choices: Sequence[str]) -> str:
        return f"{answer} ({_STAR_LETTERS[list(choices).index(answer)]})"

    def star_hint(self, answer: str, choices: Sequence[str]) -> str:
        return "(CORRECT)"

    def star_question(self, question: str, answer: str, choices: Sequence[str], hint: bool) -> str:
        marked = [f" {self.star_hint(answer, choices)}" if hint and c == answer else "" for c in choices]
        listed = "".join(f"({_STAR_LETTERS[i]}) {c}{m}\n" for i, (c, m) in enumerate(zip(choices, marked, strict=True)))
        return f"{question}\nAnswer Choices:\n{listed}"

    def star_completion(self, answer: str, choices: Sequence[str], rationale: str | None) -> str:
        if rationale is None:  # the authors' direct prompt: "A: (e)."
            return f" ({_STAR_LETTERS[list(choices).index(answer)]})."
        return self.completion(answer, choices, rationale)
