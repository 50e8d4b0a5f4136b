"""Answer types: one module per type, each owning its extraction (strict and flexible, with its truncation rule), its
gold value, its equality, its vote key (maj@k), its answer-extraction prompt and the text forms of its answers.

:data:`ANSWER_TYPES` is the one lookup (as lm-evaluation-harness registers its filters); :func:`get` gives a type or
a one-line error naming the known ones.  ``tests/answers/test_answer_types.py`` runs every registered type through the
same checks; ``CONTRIBUTING.md`` shows how to add one.
"""

from __future__ import annotations

from ..errors import UnknownNameError
from ..schema import Sample
from .base import AMBIGUOUS, CONDITIONAL, MODES, NONE, TRUNCATED, AnswerType, Extraction, Mode, Source
from .boolean import Bool
from .collection import Collection
from .latex import Math
from .multiplechoice import MultipleChoice
from .number import Number
from .text import Text

__all__ = ["AMBIGUOUS", "ANSWER_TYPES", "CONDITIONAL", "MODES", "NONE", "TRUNCATED", "AnswerType", "Extraction", "Mode", "Source", "UnknownAnswerType", "get",
           "semantic_problems"]

#: Every answer type by name (``Sample.type``), in the order of ``schema.ANSWER_TYPES``.
ANSWER_TYPES: dict[str, AnswerType] = {
    t.name: t for t in (MultipleChoice(), Bool(), Number(), Text(), Collection(), Math())
}


class UnknownAnswerType(UnknownNameError, ValueError):
    """An answer type that is not registered (a ValueError too, as bad arguments to ``extract`` always were)."""


def get(name: str) -> AnswerType:
    """The answer type called ``name``; an unknown name is a one-line error listing the known ones."""
    t = ANSWER_TYPES.get(name)
    if t is None:
        raise UnknownAnswerType("answer type", name, ANSWER_TYPES)
    return t


def semantic_problems(sample: Sample) -> list[str]:
    """The checks of a sample's gold data by its answer type (:meth:`AnswerType.gold_problems`) and of its generated
    CoTs' ids; [] when all is well."""
    t = ANSWER_TYPES.get(sample.type)
    problems = t.gold_problems(sample.answer, sample.choices) if t is not None else []
    seen: set[str] = set()
    for cot in sample.generated_cot:
        if cot.id is not None:
            if cot.id in seen:
                problems.append(f"field 'generated_cot': duplicate id {cot.id!r}")
            seen.add(cot.id)
    return problems
