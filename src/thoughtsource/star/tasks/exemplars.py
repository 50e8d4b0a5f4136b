"""The STaR authors' few-shot exemplars (the files of :mod:`thoughtsource.star.prompts`) as problems.

:func:`star_exemplars` parses a prompt file into :class:`~thoughtsource.star.tasks.base.Problem`
objects (question, choices in the file's order, gold answer, rationale without its answer
sentence); the task's formatter renders them back, and a test checks that the rendering equals
every shipped file byte for byte.
"""

from __future__ import annotations

import re
from functools import cache

from ..prompts import PROMPT_FILES, read_prompt
from .base import Problem

__all__ = ["star_exemplars"]

_CHOICE = re.compile(r"^\(([a-z])\) (.*)$")
_CQA_ANSWER = re.compile(r"^A: (?P<rationale>.*) Therefore, the answer is (?P<text>.+) \((?P<letter>[a-z])\)\.$")
_GSM_ANSWER = re.compile(r"^A: (?P<rationale>.*)\n#### (?P<answer>\S+)$", re.S)


def _blocks(text: str) -> list[str]:
    return text.strip("\n").split("\n\n")


def _cqa_problem(i: int, block: str) -> Problem:
    lines = block.split("\n")
    if not lines[0].startswith("Q: ") or lines[1] != "Answer Choices:":
        raise ValueError(f"CQA exemplar {i}: not 'Q: …\\nAnswer Choices:'")
    choices = tuple(m.group(2) for m in map(_CHOICE.match, lines[2:-1]) if m)
    m = _CQA_ANSWER.match(lines[-1])
    if m is None or len(choices) != len(lines) - 3:
        raise ValueError(f"CQA exemplar {i}: unexpected layout")
    answer = choices[ord(m["letter"]) - 97]
    if answer != m["text"]:
        raise ValueError(f"CQA exemplar {i}: answer text {m['text']!r} is not choice ({m['letter']}) {answer!r}")
    return Problem(id=f"star-prompt/commonsense_qa/{i}", question=lines[0][3:], answer=answer, type="multiplechoice",
                   choices=choices, rationale=m["rationale"], meta={"dataset": "commonsense_qa", "star_prompt": True})


def _gsm_problem(i: int, block: str) -> Problem:
    question, _, rest = block.partition("\n")
    m = _GSM_ANSWER.match(rest)
    if not question.startswith("Q: ") or m is None:
        raise ValueError(f"GSM8K exemplar {i}: not 'Q: …\\nA: …\\n#### N'")
    return Problem(id=f"star-prompt/gsm8k/{i}", question=question[3:], answer=m["answer"], type="number",
                   rationale=m["rationale"], meta={"dataset": "gsm8k", "star_prompt": True})


@cache
def star_exemplars(task: str) -> tuple[Problem, ...]:
    """The authors' exemplars for ``task`` ("commonsense_qa" or "gsm8k"), in the file's order."""
    if task not in PROMPT_FILES:
        raise KeyError(f"no STaR prompt for {task!r} (have {sorted(PROMPT_FILES)})")
    parse = _cqa_problem if task == "commonsense_qa" else _gsm_problem
    return tuple(parse(i, b) for i, b in enumerate(_blocks(read_prompt(PROMPT_FILES[task][0]))))
