"""The ``collection`` type: a set of normalized items (split on commas, semicolons, "and", slashes, new lines, bullets)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .base import NONE, AnswerType, Extraction, Mode, Source, answer_spans, clean_text, last_line, normalize_text

_ITEM_SPLIT = re.compile(r"\s*(?:[,;/\n]|\band\b|\s-\s|^\s*[-*•]\s|•)\s*", re.I | re.M)
_LIST_END = re.compile(r"\.(?=\s|$)|\n\s*\n|\}")  # a collection may be a bulleted list over several lines


def _items(span: str) -> frozenset[str]:
    return frozenset(n for n in (normalize_text(x) for x in _ITEM_SPLIT.split(span)) if n)


def _extract_collection(text: str, mode: Mode, source: Source) -> Extraction:
    for _, span in answer_spans(text, source, _LIST_END):
        items = _items(span)
        if items:
            return Extraction(items, "collection:after-phrase")
    if mode == "flexible":
        items = _items(last_line(text))
        if items:
            return Extraction(items, "collection:last-line")
    return NONE


class Collection(AnswerType):
    name = "collection"

    def extract(self, text: str, mode: Mode, source: Source, choices: Sequence[str]) -> Extraction:
        return _extract_collection(clean_text(text, source), mode, source)

    def gold(self, gold: Sequence[str], choices: Sequence[str], letter: str | None = None) -> Any:
        return frozenset(n for n in (normalize_text(x) for x in gold) if n)

    def answer_text(self, value: Any, choices: Sequence[str]) -> str | None:
        return "; ".join(sorted(value))

    def gold_problems(self, answer: Sequence[str], choices: Sequence[str]) -> list[str]:
        return []  # a collection's gold is several items
