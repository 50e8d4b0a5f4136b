"""The ``bool`` type: yes/no/true/false as a bool; with stored choices ["True", "False"] a letter maps to its choice."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..schema import BOOL_WORDS
from .base import AMBIGUOUS, NONE, UNANSWERED, AnswerType, Extraction, Mode, Source, answer_spans, clean_text
from .multiplechoice import Choices, choice_letters, parse_choices

_BOOL = re.compile(r"(?<![\w'-])(yes|no|true|false)(?![\w'-])", re.I)
_NO_OK = re.compile(r"\s*(?:[.,;:!)]|$)")
_NO_THEN = re.compile(r"\s+(?:it|they|he|she|this|that|there|because|since|as|not)\b", re.I)  # "No it would not"
_NOT_BEFORE = re.compile(r"(?:\bnot|n't)\s+$", re.I)
_BOOL_OR = re.compile(r"^\s*(?:,\s*)?(?:or|and|/)\s*$", re.I)


def _bools(span: str, sentence_start: bool) -> list[tuple[int, int, bool]]:
    out = []
    for m in _BOOL.finditer(span):
        word = m.group(1).lower()
        if word == "no" and not (
            _NO_OK.match(span, m.end()) or (sentence_start and not span[: m.start()].strip() and _NO_THEN.match(span, m.end()))
        ):
            continue  # "there is no evidence", "no one cuisine"
        value = BOOL_WORDS[word]
        if _NOT_BEFORE.search(span, 0, m.start()):
            value = not value  # "not true"
        out.append((m.start(), m.end(), value))
    return out


def _bool_in_span(span: str, ch: Choices) -> Extraction | None:
    found = _bools(span, True)
    if found:
        _, e0, first = found[0]
        if len(found) > 1 and found[1][2] != first and _BOOL_OR.match(span[e0 : found[1][0]]):
            return AMBIGUOUS
        return Extraction(first, "bool:word")
    if ch.n:
        letters = choice_letters(span, ch)
        if letters:
            text = ch.texts[ord(letters[0][2]) - 65].strip().lower()
            if text in BOOL_WORDS:
                return Extraction(BOOL_WORDS[text], "bool:letter")
    return None


def _extract_bool(text: str, mode: Mode, source: Source, ch: Choices) -> Extraction:
    for _, span in answer_spans(text, source):
        if UNANSWERED.match(span):
            continue
        r = _bool_in_span(span, ch)
        if r is not None:
            return r
    if mode == "flexible":
        found = _bools(text, False)
        if found:
            return Extraction(found[-1][2], "bool:last-word")
    return NONE


_BARE_BOOL = re.compile(r"[ \t]*:?[ \t]*(yes|no|true|false)\.?[ \t]*", re.I)


class Bool(AnswerType):
    name = "bool"
    extraction = "kojima-yes-no"

    def extract(self, text: str, mode: Mode, source: Source, choices: Sequence[str]) -> Extraction:
        return _extract_bool(clean_text(text, source), mode, source, parse_choices(tuple(choices)))

    def bare(self, text: str, choices: Sequence[str]) -> Extraction | None:
        if len(text) < 12:
            m = _BARE_BOOL.fullmatch(text)
            if m:
                return Extraction(BOOL_WORDS[m.group(1).lower()], "bool:word")
        return None

    def gold(self, gold: Sequence[str], choices: Sequence[str], letter: str | None = None) -> Any:
        return BOOL_WORDS.get(str(gold[0]).strip().lower())

    def extraction_prompt(self, choices: Sequence[str], available: Sequence[str] | dict[str, Any]) -> str:
        return self.extraction

    def gold_text(self, answer: Sequence[str], choices: Sequence[str]) -> str:
        return "Yes" if answer and answer[0].strip().lower() in ("true", "yes") else "No"

    def answer_text(self, value: Any, choices: Sequence[str]) -> str | None:
        return "yes" if value else "no"

    def gold_problems(self, answer: Sequence[str], choices: Sequence[str]) -> list[str]:
        problems = [f"field 'answer': expected a bool (true/false/yes/no), got {a!r}" for a in answer
                    if str(a).strip().lower() not in BOOL_WORDS]
        return problems + super().gold_problems(answer, choices)

    def star_label(self, answer: str, choices: Sequence[str]) -> str:
        return self.answer_text(self.gold([answer], choices), choices) or "no"
