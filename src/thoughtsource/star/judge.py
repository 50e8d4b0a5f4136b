"""Correctness of generated text for dataset tasks: :mod:`thoughtsource.extract` in strict mode.

The one place where the STaR loop meets the evaluation module, so the loop never grows a second
answer extractor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tasks.base import Problem


def _sample(problem: Problem):
    from ..schema import Sample

    return Sample(id=problem.id, question=problem.question, type=problem.type,  # type: ignore[arg-type]
                  choices=list(problem.choices), answer=[problem.answer])


def extract_answer(problem: Problem, text: str) -> str | None:
    """The answer ``text`` commits to (strict mode), or None."""
    from .. import extract

    return extract.extract(text, _sample(problem), mode="strict")


def is_correct(problem: Problem, text: str) -> bool:
    from .. import extract

    return bool(extract.is_correct(text, _sample(problem), mode="strict"))
