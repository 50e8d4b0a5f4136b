"""Answer extraction: the predicted answer of a CoT, per answer type, with the rule that found it.

:func:`extract` reads either an *answer-extraction output* (``source="extraction"``, the model's text
after a prompt such as "Therefore, the answer is", i.e. :attr:`Answer.answer`) or a *CoT*
(``source="cot"``, when no extraction step ran) and returns an :class:`Extraction`: the value and
the name of the rule that produced it.  "No answer" is a value (``Extraction.value is None``, rule
``none`` or ``ambiguous``), never an exception.

Two modes, reported separately (as lm-evaluation-harness does with its ``strict-match`` and
``flexible-extract`` filters):

``strict``
    The answer must follow an answer phrase: the start of an extraction output (the prompt ended in
    "the answer is"), or an explicit phrase in the text ("the answer is", "Answer:", "the correct
    option is", "####", ``\\boxed{}``).  Only the first sentence after the phrase is read.  When
    several phrases occur, the last one that states an answer wins (an answer stated and then
    revised counts as revised, and so does a self-correction after an answer: "The answer is C. Wait, no: it
    must be B." is B); a phrase followed by "not" is skipped, and so is a verdict on an answer given before ("I
    conclude that my answer is correct.").  PRM800K's "# Answer" line takes the line under it, GSM8K's "#### 72"
    the value after it (a markdown heading "## Step 1" is no answer).  An answer that depends on a condition ("18
    if no tax applies, and 20 with tax") is ``conditional``, and a text cut off while it thinks (an unclosed
    ``<think>``) or right after its answer phrase ("... so the answer is", a CoT) is ``truncated``: neither has an
    answer in any mode.  Numbers: a phrase that restates
    the answer in another form ("The answer (as a fraction) is 1/4") never overrides the one before it,
    and a text cut off inside the sentence of its last answer phrase ("... The answer is 6", of 6000?)
    is ``truncated`` when it is a CoT (an extraction output keeps the answer at its start).
``flexible``
    The strict answer when there is one; otherwise a type-specific fallback over the whole text: the
    last number, the last wrapped choice letter ("(B)", "B)", "option B"), the last yes/no/true/false,
    the last line (text, collection).

Per type, inside the sentence after an answer phrase:

``multiplechoice`` -> the choice letter (``"B"``)
    "B", "(B)", "B)", "B.", "b", "option B", "choice (b)", "B: <text>", or the text of a choice.  The
    first letter stated counts ("(C), because (A) and (B) are wrong" is C); two different letters
    joined as a list ("B or C", "(A), (B), or (D)", "A and B") are ``ambiguous``.  A bare capital
    "A"/"I" followed by a lower-case word is read as an article/pronoun, not as a letter.
``number`` -> ``float``
    "-3", "−3", "1,000", "10 000" (not a list: "5 10"), "1e3", "2.5\\times10^{3}", "$5.50", "50%", "3/4",
    "3 1/2", ".5", "12 km/h"; after an "=" the result is taken ("3 x 15 = 45" -> 45), after a "≈" the rounding
    ("268.083... ≈ 268" -> 268; "1/3 ≈ 0.33" -> 1/3); a few number words ("twelve").  Two numbers joined by "or" are
    ``ambiguous``.  Compared exactly (:func:`numbers_equal`): integers exactly, decimals at the precision the
    gold states (gold 3.5 accepts 3.50, not 3.5004), fractions as fractions; a value of 15 or more significant
    digits (a float's repr, a fraction that does not terminate) stands for the number it rounds.
``bool`` -> ``bool``
    yes/no/true/false in their usual forms ("Yes.", "No, it would not", "**True**"); "no" counts only
    at the start of the sentence or before punctuation ("there is no evidence" is not an answer); when
    the sample has choices (ThoughtSource stores ``["True", "False"]``) a letter ("A)") maps to its choice.
``text`` -> ``str``
    the sentence after the phrase without quotes, markdown and final punctuation; scored by normalized
    exact match (lower case, no punctuation, no articles, single spaces; or equal once all whitespace
    is removed, so "n a o a" matches "naoa") and token F1 (SQuAD).
``collection`` -> ``frozenset[str]``
    the items of that sentence split on commas, semicolons, "and", slashes and new lines, normalized.
``math`` -> ``str`` (LaTeX)
    think blocks dropped, then the last ``\\boxed{}`` (its label and approximation read: "\\text{answer: 12}" and
    "268.083\\ldots \\approx 268" are 12 and 268), else the math after the last answer phrase ("the (final) answer
    is", "# Answer", "####"; a sentence in words is no math answer); compared with math-verify after a fast path
    for identical LaTeX and plain numbers.

Each type lives in its own module of :mod:`thoughtsource.answers` (registry ``ANSWER_TYPES``); this module is the
entry point that dispatches to them.  All patterns are compiled once at import; per-choice-list patterns are cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .answers import ANSWER_TYPES, MODES, NONE, TRUNCATED, Extraction, Mode, Source, get
from .answers.base import ends_in_phrase, normalize_text, text_f1
from .answers.latex import last_boxed, latex_key, math_equal
from .answers.number import numbers_equal
from .reasoning import strip_think

__all__ = [
    "MODES",
    "Extraction",
    "Mode",
    "Source",
    "extract",
    "gold_value",
    "is_correct",
    "last_boxed",
    "latex_key",
    "math_equal",
    "normalize_text",
    "numbers_equal",
    "sample_gold",
    "text_f1",
    "vote_key",
]


def extract(
    text: str | None,
    answer_type: str,
    *,
    mode: Mode = "strict",
    choices: Sequence[str] = (),
    source: Source = "extraction",
    shortcut: bool = True,
) -> Extraction:
    """The predicted answer in ``text`` (see the module doc for the rules); never raises on odd text.

    ``shortcut=False`` reads even a bare answer-extraction output ("B.", "No") with the full rules, which give
    the same result (the reference the shortcut is tested against).  An unknown ``answer_type`` is an
    :class:`~thoughtsource.errors.UnknownNameError` naming the known ones.
    """
    t = ANSWER_TYPES.get(answer_type) or get(answer_type)
    if not text or not text.strip():
        return NONE
    if mode not in MODES:
        raise ValueError(f"mode must be 'strict' or 'flexible', got {mode!r}")
    if "<think>" in text or "</think>" in text:
        text = strip_think(text)
        if not text:
            return TRUNCATED  # cut off mid-thought ("<think>... so the answer is"): no answer in any mode
    if source == "cot" and ends_in_phrase(text):
        return TRUNCATED  # "... 3 + 4 = 7, so the answer is": cut off where it stated its answer
    if shortcut and source == "extraction" and len(text) < 200:
        bare = t.bare(text, choices)
        if bare is not None:
            return bare
    return t.extract(text, mode, source, choices)


def gold_value(answer_type: str, gold: Sequence[str], choices: Sequence[str] = (), letter: str | None = None) -> Any:
    """The gold answer in the form :func:`extract` returns (letter, float, bool, str, frozenset); None if unusable.

    Multiple choice: ``letter`` (the source's, ``Sample.answer_letter``) fixes the gold by position; without it, a
    gold whose text is the text of several choices is the frozenset of their letters.
    """
    t = ANSWER_TYPES.get(answer_type) or get(answer_type)
    return t.gold(gold, choices, letter) if gold else None


def sample_gold(sample: Any) -> Any:
    """:func:`gold_value` of a :class:`~thoughtsource.schema.Sample` (its answer, choices and source letter)."""
    return gold_value(sample.type, sample.answer, sample.choices, getattr(sample, "answer_letter", None))


def is_correct(value: Any, answer_type: str, gold: Any) -> bool:
    """Whether an extracted value matches a gold value (both as returned by :func:`extract` / :func:`gold_value`)."""
    if value is None or gold is None:
        return False
    if value == gold:  # equal values are equal answers in every type (the common case, without a dispatch)
        return True
    return (ANSWER_TYPES.get(answer_type) or get(answer_type)).equal(value, gold)


def vote_key(value: Any, answer_type: str) -> Any:
    """What self-consistency votes on for a value of ``answer_type`` (equal keys: the same answer)."""
    return (ANSWER_TYPES.get(answer_type) or get(answer_type)).vote_key(value)
