"""Correctness of generated text for dataset tasks: :mod:`thoughtsource.extract` in strict mode.

The one place where the STaR loop meets the evaluation module, so the loop never grows a second
answer extractor.  Answers are handed back in the form the problem stores its gold answer (the
choice text, the number, yes/no), so a majority pseudo-label can replace a gold answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tasks.base import Problem


def _value(problem: Problem, text: str) -> Any:
    from ..extract import extract

    return extract(text, problem.type, mode="strict", choices=problem.choices, source="cot").value


def extract_answer(problem: Problem, text: str) -> str | None:
    """The answer ``text`` commits to (strict mode) as gold-answer text, or None."""
    v = _value(problem, text)
    if v is None:
        return None
    if problem.type == "multiplechoice":
        i = ord(str(v).upper()) - 65
        return problem.choices[i] if 0 <= i < len(problem.choices) else None
    if problem.type == "number":
        f = float(v)
        return str(int(f)) if f.is_integer() else repr(f)
    if problem.type == "bool":
        return "yes" if v else "no"
    return str(v)


def is_correct(problem: Problem, text: str) -> bool:
    from ..extract import gold_value
    from ..extract import is_correct as _is_correct

    gold = gold_value(problem.type, [problem.answer], problem.choices)
    return bool(_is_correct(_value(problem, text), problem.type, gold))
