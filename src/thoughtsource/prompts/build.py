"""Assemble prompt texts from a sample and fragments, as the ThoughtSource generator did.

Stage 1 (CoT)::

    {instruction}\\n\\n{question}\\n{answer_choices}\\n\\n{cot_trigger}

Stage 2 (answer extraction)::

    {instruction}\\n\\n{question}\\n{answer_choices}\\n\\n{cot_trigger}{cot}\\n{answer_extraction}

These are the paper's templates (stored in ``cot_trigger_template`` / ``answer_extraction_template``).
An empty part (no instruction, no choices) is left out together with its separator; multiple choices
are written one per line as ``A) text``; a sample's ``context`` goes before its question.  With
few-shot, ``k`` exemplars built from gold CoTs stand between the instruction and the question.
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from dataclasses import dataclass

from ..answers import get as answer_type
from ..errors import DataError
from ..schema import Sample
from . import AUTO, Fragments
from .templates import Templates

COT_TEMPLATE = "{instruction}\n\n{question}\n{answer_choices}\n\n{cot_trigger}"
ANSWER_TEMPLATE = "{instruction}\n\n{question}\n{answer_choices}\n\n{cot_trigger}{cot}\n{answer_extraction}"
COT_TEMPLATE_FEW_SHOT = "{instruction}\n\n{exemplars}\n\n{question}\n{answer_choices}\n\n{cot_trigger}"
ANSWER_TEMPLATE_FEW_SHOT = "{instruction}\n\n{exemplars}\n\n{question}\n{answer_choices}\n\n{cot_trigger}{cot}\n{answer_extraction}"

LETTERS = string.ascii_uppercase


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: the template it follows and the full text.

    ``user`` is the part a chat model gets as the user's message when the rest of ``text`` is the
    start of its own answer (stage 2: the generated CoT and the answer-extraction phrase), which the
    model then continues; empty when all of ``text`` is the user's message.
    """

    template: str
    text: str
    user: str = ""
    templates: Templates | None = None  # published templates (stage 2 is rendered from them and ``values``)
    values: tuple[tuple[str, str], ...] = ()

    def messages(self) -> tuple[dict[str, str], ...]:
        """Chat messages: the user's message, then (stage 2) the assistant's answer so far, to be continued."""
        if not self.user:
            return chat_messages(self.text)
        return (*chat_messages(self.user), {"role": "assistant", "content": self.text[len(self.user):].strip()})


def format_choices(choices: Sequence[str]) -> str:
    """``A) first\\nB) second ...``"""
    if len(choices) > len(LETTERS):
        raise DataError(f"{len(choices)} choices; at most {len(LETTERS)} can be lettered", field="choices")
    return "\n".join(f"{LETTERS[i]}) {c}" for i, c in enumerate(choices))


def question_block(sample: Sample) -> str:
    """Context (if any), question and lettered choices (where its answer type lists them: multiple choice)."""
    parts = [p for p in ((sample.context or "").strip(), sample.question.strip()) if p]
    text = "\n".join(parts)
    listed = answer_type(sample.type).question_choices(sample.choices)
    if listed:
        text += "\n" + format_choices(listed)
    return text


def auto_extraction(sample: Sample, fragments: Fragments) -> str:
    """The answer-extraction id that fits the sample (Kojima et al.'s per-type prompts).

    Multiple choice with n choices: ``kojima-A-<n-th letter>``; bool: ``kojima-yes-no``; number:
    ``kojima-numerals``; anything else (or a choice count without its prompt): ``kojima-01``.
    """
    return answer_type(sample.type).extraction_prompt(sample.choices, fragments.answer_extractions)


def resolve_extraction(key: str, sample: Sample, fragments: Fragments) -> str:
    return auto_extraction(sample, fragments) if key == AUTO else key


def gold_answer_text(sample: Sample) -> str:
    """The gold answer as an answer extraction would state it: a letter, Yes/No, or the value."""
    return answer_type(sample.type).gold_text(sample.answer, sample.choices) if sample.answer else ""


def _join(trigger: str, cot: str) -> str:
    """The trigger followed by the CoT, with one space between them when neither brings whitespace."""
    if trigger and cot and not trigger[-1].isspace() and not cot[0].isspace():
        return f"{trigger} {cot}"
    return trigger + cot


def exemplar_text(sample: Sample, trigger: str, extraction: str) -> str:
    """One few-shot exemplar: the question block, the trigger, the gold CoT and the gold answer."""
    answer = gold_answer_text(sample)
    tail = f"{extraction} {answer}." if extraction else f"{answer}."
    return f"{question_block(sample)}\n\n{_join(trigger, ' '.join(s.strip() for s in sample.cot))}\n{tail}"


def exemplar_candidates(pool: Sequence[Sample], k: int, seed: int) -> list[Sample]:
    """``k + 1`` samples with gold CoTs and answers drawn with ``seed``: k exemplars plus a spare, so the
    target itself can be left out and k remain (see :func:`draw_exemplars`)."""
    if k <= 0:
        return []
    usable = [x for x in pool if x.cot and x.answer]
    return random.Random(seed).sample(usable, min(k + 1, len(usable)))


def draw_exemplars(pool: Sequence[Sample], k: int, seed: int, exclude_id: str | None = None) -> list[Sample]:
    """``k`` exemplars with gold CoTs, drawn once with ``seed`` (the same for every target but ``exclude_id``)."""
    return [x for x in exemplar_candidates(pool, k, seed) if x.id != exclude_id][:k]


def _head(instruction: str, exemplars: Sequence[str], sample: Sample) -> str:
    return "\n\n".join(p for p in (instruction.strip(), *exemplars, question_block(sample)) if p)


def cot_prompt(
    sample: Sample,
    fragments: Fragments,
    instruction: str | None,
    cot_trigger: str,
    *,
    exemplars: Sequence[Sample] = (),
    templates: Templates | None = None,
) -> Prompt:
    """Stage 1: the prompt that asks for a CoT.

    Exemplars end with the answer-extraction prompt that fits them (:func:`auto_extraction`), so the
    stage-1 prompt does not depend on which extraction prompts stage 2 will use.  With ``templates`` (the
    published library's, see :mod:`.templates`) the prompt is rendered from them instead.
    """
    if templates is not None:
        if exemplars:
            raise ValueError("few-shot exemplars cannot be combined with published templates (they have no place for them)")
        values = templates.values(sample, fragments, instruction, cot_trigger)
        return Prompt(templates.cot, templates.cot_text(values), templates=templates, values=tuple(values.items()))
    trigger = fragments.cot_trigger(cot_trigger)
    shots = [exemplar_text(x, trigger, fragments.answer_extraction(auto_extraction(x, fragments))) for x in exemplars]
    text = _head(fragments.instruction(instruction), shots, sample) + "\n\n" + trigger
    return Prompt(COT_TEMPLATE_FEW_SHOT if shots else COT_TEMPLATE, text)


def answer_prompt(stage1: Prompt, cot: str, fragments: Fragments, answer_extraction: str) -> Prompt:
    """Stage 2: the stage-1 prompt, the generated CoT and the answer-extraction prompt."""
    if stage1.templates is not None:
        text = stage1.templates.answer_text(dict(stage1.values), cot, fragments.answer_extraction(answer_extraction))
        return Prompt(stage1.templates.answer, text, user=stage1.text if text.startswith(stage1.text) else "",
                      templates=stage1.templates, values=stage1.values)
    template = ANSWER_TEMPLATE_FEW_SHOT if stage1.template == COT_TEMPLATE_FEW_SHOT else ANSWER_TEMPLATE
    return Prompt(template, f"{_join(stage1.text, cot.strip())}\n{fragments.answer_extraction(answer_extraction)}", user=stage1.text)


def chat_messages(text: str) -> tuple[dict[str, str], ...]:
    """The prompt as one user message (how ThoughtSource called chat models)."""
    return ({"role": "user", "content": text.strip()},)
