"""What every answer type shares: the extraction result, the answer phrases of a text, SQuAD normalization, and
:class:`AnswerType`, the contract each type's module implements (registered in :data:`thoughtsource.answers.ANSWER_TYPES`).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any, ClassVar, Literal, NamedTuple

Mode = Literal["strict", "flexible"]
Source = Literal["extraction", "cot"]
MODES: tuple[str, ...] = ("strict", "flexible")


class Extraction(NamedTuple):
    """The predicted answer and the rule that found it; ``value is None`` means "no answer"."""

    value: Any
    rule: str

    @property
    def found(self) -> bool:
        return self.value is not None


NONE = Extraction(None, "none")
AMBIGUOUS = Extraction(None, "ambiguous")
TRUNCATED = Extraction(None, "truncated")  # the text was cut off while it stated its answer


class AnswerType:
    """One answer type: everything that depends on it, in one place.

    A subclass sets :attr:`name` (the ``Sample.type`` it reads) and implements :meth:`extract` and :meth:`gold`;
    the rest has defaults.  ``tests/answers/test_conformance.py`` runs every registered type through the same checks.
    """

    name: ClassVar[str]
    #: Kojima et al.'s answer-extraction prompt for this type (fragment id); see :meth:`extraction_prompt`.
    extraction: ClassVar[str] = "kojima-01"

    def extract(self, text: str, mode: Mode, source: Source, choices: Sequence[str]) -> Extraction:
        """The answer of a non-empty ``text`` (strict: after an answer phrase; flexible: with the type's fallback),
        including the type's truncation rule (a text cut off while it states its answer is ``TRUNCATED``)."""
        raise NotImplementedError

    def bare(self, text: str, choices: Sequence[str]) -> Extraction | None:
        """A bare answer-extraction output ("B.", "No") read at once; None: read it with :meth:`extract`.  Must give
        what :meth:`extract` gives (tests compare both on every real answer)."""
        return None

    def gold(self, gold: Sequence[str], choices: Sequence[str], letter: str | None = None) -> Any:
        """The gold answer (a non-empty ``Sample.answer``) in the form :meth:`extract` returns; None if unusable.
        ``letter``: the gold's letter among the choices where the source gave it (``Sample.answer_letter``)."""
        raise NotImplementedError

    def equal(self, value: Any, gold: Any) -> bool:
        """Whether an extracted value (not None) is the gold one (not None)."""
        return bool(value == gold)

    def vote_key(self, value: Any) -> Hashable:
        """What self-consistency votes on: equal keys are the same answer."""
        return value

    def extraction_prompt(self, choices: Sequence[str], available: Sequence[str] | dict[str, Any]) -> str:
        """The answer-extraction fragment id for a sample with these choices (``available``: the known ids)."""
        return self.extraction

    def gold_text(self, answer: Sequence[str], choices: Sequence[str]) -> str:
        """The gold answer as an answer-extraction output would state it (a letter, Yes/No, the value)."""
        return ", ".join(answer)

    def answer_text(self, value: Any, choices: Sequence[str]) -> str | None:
        """An extracted value in the form the sample stores its gold (STaR's pseudo-labels): choice text, number, ..."""
        return str(value)

    def f1(self, value: Any, gold: Any) -> float | None:
        """Partial credit for an extracted value (not None): SQuAD token F1 where the type gives it; None elsewhere."""
        return None

    # -- a sample's gold data (``answers.semantic_problems``) and how questions list choices (``prompts``)

    def gold_problems(self, answer: Sequence[str], choices: Sequence[str]) -> list[str]:
        """What is wrong with a sample's gold ``answer`` (and its ``choices``) for this type; [] when all is well."""
        if len(answer) > 1:
            return [f"field 'answer': a {self.name} sample has one gold answer, got {len(answer)}"]
        return []

    def question_choices(self, choices: Sequence[str]) -> Sequence[str]:
        """The choices a prompt lists after the question: none, unless the answer is one of them."""
        return ()

    # -- published logs (``datasets.cot_logs``): their printed gold, and why their string compare disagrees with us

    def published_gold(self, gold: str, choices: Sequence[str]) -> tuple[str, str | None]:
        """A log's printed gold as ``Sample.answer``, with the letter it names where that choice's text is the text
        of several choices (``Sample.answer_letter``; else None)."""
        return gold, None

    def published_reason(self, pred: str, text: str, value: Any, gold: Any, correct: bool) -> str | None:
        """Why the published scorer (its prediction ``pred`` read from ``text``, compared with the gold as a string)
        disagrees with our verdict ``correct`` on ``value``, where this type's reading explains it; None otherwise."""
        return None

    # -- STaR's prompt format (the STaR paper's CommonsenseQA format, its Appendix B; GSM8K's ``####``, Appendix I)

    def star_label(self, answer: str, choices: Sequence[str]) -> str:
        """A gold answer as a STaR problem holds it: the form :meth:`answer_text` gives, so a pseudo-label can
        replace it."""
        return answer

    def star_answer(self, answer: str, choices: Sequence[str]) -> str:
        """The answer as a STaR completion states it: "Therefore, the answer is <this>."."""
        return answer

    def star_hint(self, answer: str, choices: Sequence[str]) -> str:
        """The rationalization hint: the answer alone in parentheses after the question, as the paper does for GSM8K."""
        return f"({answer})"

    def star_question(self, question: str, answer: str, choices: Sequence[str], hint: bool) -> str:
        """The question as a STaR prompt asks it (after "Q: ", up to "A:"), with the hint where ``hint``."""
        return f"{question} {self.star_hint(answer, choices)}\n" if hint else f"{question}\n"

    def completion(self, answer: str, choices: Sequence[str], rationale: str | None) -> str:
        """A STaR completion with the reference rationale's format: "<rationale> Therefore, the answer is X."."""
        stated = self.star_answer(answer, choices)
        if rationale is None:
            return f" The answer is {stated}."
        return f" {rationale.strip()} Therefore, the answer is {stated}."

    def star_completion(self, answer: str, choices: Sequence[str], rationale: str | None) -> str:
        """A STaR completion in the STaR authors' format for this type (direct: ``rationale`` None)."""
        return self.completion(answer, choices, rationale)


# ---------------------------------------------------------------------------------------------
# Text clean-up and answer phrases
# ---------------------------------------------------------------------------------------------

_MARKDOWN = re.compile(r"\*\*|__|`|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)")
_NEXT_QUESTION = re.compile(r"\n\s*(?:Q|Question)\s*:", re.I)
_LATEX_FRAC = re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}")
ANCHOR = re.compile(
    r"""
    \banswer(?:\s+choice)?(?:\s*\([^()\n]{0,40}\))?\s*(?:is|would\s+be|will\s+be|should\s+be|must\s+be|=|:)(?:\s*:)?
  | \b(?:correct|right|best|most\s+likely)\s+(?:option|choice|response)\s*(?:is|would\s+be|will\s+be|:)(?:\s*:)?
  | \banswer\s+to\s+[^.?!\n]{1,80}?\s+is\b
  | \bI\s+(?:would|will|'d)\s+(?:choose|pick|select|go\s+with)\b
  | ^[ \t]*\#{2,4}
  | \\(?:boxed|fbox)\{
    """,
    re.I | re.X | re.M,
)
# Every answer phrase contains one of these (lower-case) strings; texts without any skip the regex.
ANCHOR_KEYS = ("answer", "option", "choice", "response", "#", "\\", "choose", "pick", "select", "go with")
_LEAD = re.compile(r"""^(?:[\s:="'“‘(\[{>*_,–—]|-(?![\d$.])|\.(?!\d)|\$(?![\d.-]))*""")
SPAN_END = re.compile(r"\.(?=\s|$)|[!?;](?=\s|$)|\n|\}")
NEGATED = re.compile(r"(?:not|n't|neither)\b", re.I)
# Where an answer sentence that opens with a negation goes on to state the answer: "not 5 but 6", "not D, but
# rather E", "not 5, it is 6", "not 5; instead, it is 6", "not 5; rather, 6" (not "not only 5 but also 6").
AFFIRMED = re.compile(
    r"\bbut(?!\s+also\b)(?:\s+(?:rather|instead))?\b"
    r"|[,;]\s*(?:(?:instead|rather)\b,?\s*)?(?:it|this|that)(?:\s+is|'s)\b"
    r"|;\s*(?:instead|rather)\b,?",
    re.I,
)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n|\}")  # SPAN_END without ";"
TRAIL = " \t\n\"'“”‘’.,;:!?)*_`"
UNANSWERED = re.compile(
    r"^(?:unknown|unclear|uncertain|undetermined|none|n/?a|moot|cannot|can't|not\s+(?:known|sure|certain|possible|enough|clear|determinable))\b",
    re.I,
)


def clean_text(text: str, source: Source) -> str:
    if source == "extraction":
        m = _NEXT_QUESTION.search(text)
        if m:
            text = text[: m.start()]
    if "*" in text or "_" in text or "`" in text:
        text = _MARKDOWN.sub("", text)
    if "\\" in text:
        text = _LATEX_FRAC.sub(r"\1/\2", text)
    return text


def answer_span(text: str, start: int, end_re: re.Pattern[str] | None = None) -> str:
    """The first sentence of ``text`` from ``start``, without leading punctuation."""
    chunk = text[start : start + 400]
    lead = _LEAD.match(chunk)
    if lead:
        # keep an opening parenthesis that wraps a letter: "(B)"
        cut = lead.end()
        if cut and chunk[cut - 1] == "(":
            cut -= 1
        chunk = chunk[cut:]
    m = (end_re or SPAN_END).search(chunk)
    return chunk[: m.start()] if m else chunk


def answer_spans(text: str, source: Source, end_re: re.Pattern[str] | None = None) -> list[tuple[int, str]]:
    """(position, sentence) after each answer phrase, last phrase first."""
    low = text.lower()
    if any(k in low for k in ANCHOR_KEYS):
        out: list[tuple[int, str]] = [(m.end(), answer_span(text, m.end(), end_re)) for m in ANCHOR.finditer(text)]
    else:
        out = []
    if source == "extraction":
        out.insert(0, (0, answer_span(text, 0, end_re)))
    out.reverse()
    return out


def affirmed(text: str, pos: int, span: str, end_re: re.Pattern[str] | None = None) -> str | None:
    """What the answer sentence ``span`` (read at ``pos`` of ``text`` by :func:`answer_span`) states: the span, or
    where it opens with a negation, the answer after "but (rather)", ", it is" or "; instead," in the same sentence
    ("not 5 but 6" -> "6"); None where it only negates ("not 5", "not only 5 but also 6")."""
    if not NEGATED.match(span):
        return span
    start = text.find(span, pos)
    stop = _SENTENCE_END.search(text, start)
    m = AFFIRMED.search(text, start, stop.start() if stop else len(text))
    return answer_span(text, m.end(), end_re) if m else None


# ---------------------------------------------------------------------------------------------
# SQuAD normalization
# ---------------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "“”‘’")
def normalize_text(s: str) -> str:
    """SQuAD normalization: lower case, no punctuation, no articles, single spaces."""
    s = s.lower().translate(_PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def compact_text(s: str) -> str:
    return "".join(s.lower().translate(_PUNCT).split())


def text_f1(pred: str, gold: Sequence[str]) -> float:
    """Token F1 (SQuAD) of ``pred`` against the best of ``gold``."""
    p = normalize_text(pred).split()
    best = 0.0
    for g in gold:
        gt = normalize_text(g).split()
        if not p or not gt:
            best = max(best, float(p == gt))
            continue
        common = sum((Counter(p) & Counter(gt)).values())
        if common:
            prec, rec = common / len(p), common / len(gt)
            best = max(best, 2 * prec * rec / (prec + rec))
    return best


def last_line(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        if line.strip(TRAIL):
            return line
    return ""
