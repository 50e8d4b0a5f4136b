"""Correctness of generated text for dataset tasks: :mod:`thoughtsource.extract` in strict mode.

The one place where the STaR loop meets the evaluation module, so the loop never grows a second
answer extractor.  Answers are handed back in the form the problem stores its gold answer (the
choice text, the number, yes/no), so a majority pseudo-label can replace a gold answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..answers import get
from ..extract import Source, extract, gold_value
from ..extract import is_correct as _is_correct

if TYPE_CHECKING:
    from .tasks.base import Problem


def _value(problem: Problem, text: str, source: Source = "cot") -> Any:
    return extract(text, problem.type, mode="strict", choices=problem.choices, source=source).value


def extract_answer(problem: Problem, text: str, source: Source = "cot") -> str | None:
    """The answer ``text`` commits to (strict mode) as gold-answer text, or None.

    ``source="extraction"``: ``text`` follows an answer prompt ("A:" of the STaR authors' direct
    prompts, answered "(e)."), so its start is read as the answer."""
    v = _value(problem, text, source)
    return None if v is None else get(problem.type).answer_text(v, problem.choices)


def is_correct(problem: Problem, text: str, source: Source = "cot") -> bool:
    gold = gold_value(problem.type, [problem.answer], problem.choices)
    return bool(_is_correct(_value(problem, text, source), problem.type, gold))
