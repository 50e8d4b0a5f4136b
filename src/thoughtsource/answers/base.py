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
CONDITIONAL = Extraction(None, "conditional")  # "18 if no tax applies, and 20 with tax": no single answer


class AnswerType:
    """One answer type: everything that depends on it, in one place.

    A subclass sets :attr:`name` (the ``Sample.type`` it reads) and implements :meth:`extract` and :meth:`gold`;
    the rest has defaults.  ``tests/answers/test_answer_types.py`` runs every registered type through the same checks.
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

    def vote_key(self, value: Hashable) -> Hashable:
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
# Every answer phrase of every type (one rule set: the number, math, choice, yes/no, text and list types all read the
# answer after these).  ``line``: PRM800K's "# Answer" line, the answer on the line under it; ``fix``: a self-correction ("Wait, no: it must be B"), an answer phrase only after another one.
ANCHOR = re.compile(
    r"""
    (?P<line>^[ \t]*\#{1,4}[ \t]*(?:final[ \t]+)?answer[ \t]*:?[ \t]*$)
  | \banswer(?:\s+choice)?(?:\s*\([^()\n]{0,40}\))?\s*(?:is|would\s+be|will\s+be|should\s+be|must\s+be|=|:)(?:\s*:)?
  | \b(?:correct|right|best|most\s+likely)\s+(?:option|choice|response)\s*(?:is|would\s+be|will\s+be|:)(?:\s*:)?
  | \banswer\s+to\s+[^.?!\n]{1,80}?\s+is\b
  | \bI\s+(?:would|will|'d)\s+(?:choose|pick|select|go\s+with)\b
  | ^[ \t]*\#{2,4}(?=[ \t]*(?:[^\s\#A-Za-z]|[A-Za-z][ \t]*(?:[.)]|$)))(?![ \t]*\d+[.)][ \t]+[A-Za-z])
  | \\(?:boxed|fbox)\{
  | (?P<fix>(?<![\w'])
        (?:(?:wait|hold\s+on|oops|sorry|correction)\b[\s,.:;!\u2014-]{0,4})?
        (?:
            (?:(?:no(?=\s*[,:;!.\u2014-])|actually|I\s+was\s+wrong|I\s+made\s+a\s+mistake)\b[\s,.:;!\u2014-]{0,4}){1,3}
            (?:it|that|this|the\s+(?:correct\s+)?(?:one|result|value))
            (?:\s+(?:must|should|has\s+to|would|will)\s+be|\s+is(?:\s+actually)?|'s(?:\s+actually)?)\b
          | (?:it|that|this|the\s+(?:correct\s+)?(?:one|result|value))
            (?:\s+(?:must|should|has\s+to)\s+be|\s+is\s+actually|'s\s+actually)\b
        ))
    """,
    re.I | re.X | re.M,
)
# Every answer phrase contains one of these (lower-case) strings; texts without any skip the regex.  A self-correction
# (``_FIX_KEYS``) counts only after an answer, so a CoT needs one of the others first.
ANCHOR_KEYS = ("answer", "option", "choice", "response", "#", "\\", "choose", "pick", "select", "go with")
_FIX_KEYS = ("wait", "actually", "oops", "correction", "sorry", "hold on", "no,", "no:", "no;", "no!", "no.", "no\u2014",
             "no -")
# What an answer phrase says of an answer given before it, not an answer: "I conclude that my answer is correct.",
# "the answer is as follows:"; "right"/"wrong" only of "my/our/this/that answer" ("The answer is right." may answer
# "Which way?").
_VERDICT = re.compile(
    r"\s*(?:(?:indeed|definitely|clearly|certainly|probably|likely|now|also|still|most\s+likely)\s+)?"
    r"(?:(?P<judged>correct|incorrect|valid|invalid|reasonable|accurate|consistent|confirmed|verified|justified|"
    r"plausible|sensible|right|wrong)(?=\s*(?:[.!?,;)]|$|\s+(?:because|since|as|and|but|so|now|then|here)\b))"
    r"|as\s+follows|(?:given|shown|stated|written)\s+(?:below|above)|below\b|above\b|the\s+following\b)",
    re.I,
)
_OWN_ANSWER = re.compile(r"\b(?:my|our|this|that)\s+(?:final\s+)?$", re.I)


def answer_phrases(text: str, source: Source) -> list[re.Match[str]]:
    """The answer phrases of ``text`` (:data:`ANCHOR`) in order, without verdicts on an answer ("my answer is
    correct") and without self-corrections that no answer precedes ("Wait, it is 3 per box" mid-reasoning; an
    extraction output's start is an answer)."""
    low = text.lower()
    if not any(k in low for k in ANCHOR_KEYS) and (source != "extraction" or not any(k in low for k in _FIX_KEYS)):
        return []
    out: list[re.Match[str]] = []
    answered = source == "extraction"
    for m in ANCHOR.finditer(text):
        if m.group("fix") is not None and not answered:
            continue
        v = _VERDICT.match(text, m.end())
        if v is not None and (
            v.group("judged") is None
            or v.group("judged").lower() not in ("right", "wrong")
            or _OWN_ANSWER.search(text, max(0, m.start() - 30), m.start())
        ):
            continue
        out.append(m)
        answered = True
    return out


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


def ends_in_phrase(text: str) -> bool:
    """Whether ``text`` ends with an answer phrase and nothing after it ("... so the answer is", "#### "): it was cut
    off where it stated its answer."""
    tail = text[text.rfind("\n", 0, max(0, len(text) - 300)) + 1 :]  # whole lines: "^" of "#### " is a line start
    phrases = answer_phrases(tail, "extraction")  # "Wait, no, it must be" too
    return bool(phrases) and not tail[phrases[-1].end() :].strip(" \t\n:*_")


def answer_spans(text: str, source: Source, end_re: re.Pattern[str] | None = None) -> list[tuple[int, str]]:
    """(position, sentence) after each answer phrase, last phrase first."""
    out = [(m.end(), answer_span(text, m.end(), end_re)) for m in answer_phrases(text, source)]
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


def sentence_at(text: str, pos: int) -> str:
    """The sentence of ``text`` from ``pos`` (up to ".", "!", "?", a new line or "}"; a ";" does not end it)."""
    return answer_span(text, pos, _SENTENCE_END)


def sentence_start(text: str, pos: int) -> int:
    """Where the sentence holding ``text[pos]`` starts (after the last sentence end before it)."""
    start = 0
    for m in SPAN_END.finditer(text, 0, pos):
        start = m.end()
    return start


# A value stated under a condition: "18 if no tax applies", "20 with tax", "$12 before the discount", "5 otherwise".
# "if", "unless", "when", "otherwise" ... are the strong conditions; "with/without", "before/after" are weak (as often
# a part of the story: "8 apples with her"), so only beside a strong one.
_UNDER = re.compile(
    r"(?<![\w.])(\d[\d,.]*)[$%})\]]*(?:\s+[A-Za-z$%]+){0,2}?\s+"
    r"(?:(if|unless|when|assuming|provided|otherwise|else|in\s+case)|with|without|before|after|including|excluding)\b",
    re.I,
)


def conditional(sentence: str) -> bool:
    """Whether an answer sentence gives different answers under different conditions ("18 if no tax applies, and 20
    with tax", "12 if she walks, 8 otherwise"): two different values each stated under a condition, one of them an
    "if" (or "unless", "when", "otherwise" ...).  Such an answer is no single answer; "if she paid $10, she was left
    with $5" (a premise, then its result) is one."""
    values: set[str] = set()
    strong = False
    for m in _UNDER.finditer(sentence):
        values.add(m.group(1).rstrip(".,").replace(",", ""))
        strong = strong or m.group(2) is not None
    return strong and len(values) > 1


_APPROX = re.compile(r"\\approx|≈|\\simeq")
_ELIDED = re.compile(r"\\[lc]?dots|\.\.\.|…")
# An exact form of a value: a fraction, a root, pi, a power ("\frac{1}{3} \approx 0.33" answers 1/3).
EXACT_FORM = re.compile(r"\\[dt]?frac|\\sqrt|\\pi|/|\^")


def exact_side(s: str, exact: re.Pattern[str] = EXACT_FORM) -> str:
    r"""What an answer with an approximation states: the value left of the (last) "≈" / ``\approx`` where it is an
    exact form (``exact``) written out ("\frac{1}{3} \approx 0.33"), else the value right of it, the rounding of a
    decimal ("268.083\ldots \approx 268", "x \approx 2.5"); ``s`` itself without one."""
    parts = _APPROX.split(s)
    if len(parts) == 1 or parts[-2].count("(") > parts[-2].count(")"):
        return s  # none, or an aside: "17 (≈ 17.3)" states 17
    left = parts[-2].rsplit("=", 1)[-1]
    if exact.search(left) and not _ELIDED.search(left):
        return left.strip()
    return parts[-1].strip()


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
