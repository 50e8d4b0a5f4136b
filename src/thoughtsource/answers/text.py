"""The ``text`` type: the sentence after the answer phrase (a quoted answer up to its closing quote); scored by
normalized exact match (or equal without any whitespace: "n a o a" is "naoa") and token F1."""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import Any

from .base import (
    NONE,
    TRAIL,
    AnswerType,
    Extraction,
    Mode,
    Source,
    answer_spans,
    clean_text,
    compact_text,
    last_line,
    normalize_text,
    text_f1,
)


def _text_value(span: str) -> str | None:
    v = span.strip(TRAIL).strip()
    return v or None


_QUOTED = re.compile(r"""[\s:*]*(?:"([^"\n]+)"|“([^”\n]+)”)""")


def _extract_text(text: str, mode: Mode, source: Source) -> Extraction:
    for pos, span in answer_spans(text, source):
        q = _QUOTED.match(text, pos)  # a quoted answer ends at its closing quote: '"ndoa" (without the quotes)'
        v = _text_value(q.group(1) or q.group(2)) if q else _text_value(span)
        if v is not None:
            return Extraction(v, "text:after-phrase")
    if mode == "flexible":
        v = _text_value(last_line(text))
        if v is not None:
            return Extraction(v, "text:last-line")
    return NONE


class Text(AnswerType):
    name = "text"

    def extract(self, text: str, mode: Mode, source: Source, choices: Sequence[str]) -> Extraction:
        return _extract_text(clean_text(text, source), mode, source)

    def gold(self, gold: Sequence[str], choices: Sequence[str], letter: str | None = None) -> Any:
        return tuple(str(x) for x in gold)

    def equal(self, value: Any, gold: Any) -> bool:
        norm = normalize_text(str(value))
        golds = (gold,) if isinstance(gold, str) else gold
        if any(norm == normalize_text(str(g)) for g in golds):
            return True
        # Spelled-out letter sequences ("n a o a" for "naoa"): compare without any whitespace, articles kept.
        compact = compact_text(str(value))
        return bool(compact) and any(compact == compact_text(str(g)) for g in golds)

    def vote_key(self, value: Any) -> Hashable:
        return normalize_text(str(value))

    def f1(self, value: Any, gold: Any) -> float | None:
        return text_f1(str(value), gold) if gold else None

    def published_reason(self, pred: str, text: str, value: Any, gold: Any, correct: bool) -> str | None:
        return "text-normalization" if value is not None and correct else None
