"""The ``number`` type: a float, compared exactly (integers exactly, decimals at the gold's precision, fractions as
fractions); LaTeX numerics are read; a CoT cut off in the sentence of its answer is ``truncated``; a restated
answer ("The answer (as a fraction) is 1/4") never overrides the one before it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ..schema import parse_number
from .base import (
    AMBIGUOUS,
    CONDITIONAL,
    NONE,
    SPAN_END,
    TRUNCATED,
    AnswerType,
    Extraction,
    Mode,
    Source,
    affirmed,
    answer_phrases,
    answer_span,
    clean_text,
    conditional,
    exact_side,
    sentence_at,
    sentence_start,
)

# The digits of a whole number: grouped by commas ("1,000") or by spaces ("10 000", "1 250 000"; also the no-break and
# thin spaces of typeset text), else plain.  Space groups are read only where they cannot be a list of numbers: every
# group after the first has three digits, no number comes right before ("5 100" after "3 ") or after ("100 200 30"),
# and a list goes on after them ("100 200 and 300") only where a group starts with 0 ("10 000 and 20 000").
_GROUP_SPACE = "[ \u00a0\u2009\u202f]"
_LEAD = r"(?<!\d\s)(?<!\d,\s)\d{1,3}"  # a first group no number comes right before
_GROUP = rf"{_GROUP_SPACE}\d{{3}}"
_SPACED_END = rf"(?!{_GROUP_SPACE}?\d)"
INTEGER = (
    r"\d{1,3}(?:,\d{3})+(?!\d)"
    rf"|{_LEAD}(?:{_GROUP})*{_GROUP_SPACE}0\d\d(?:{_GROUP})*{_SPACED_END}"
    rf"|{_LEAD}(?:{_GROUP})+{_SPACED_END}(?!\s*(?:,|\band\b|\bor\b)\s*[$€£¥]?\d)"
    r"|\d+"
)
EXPONENT = r"[eE][-+]?\d{1,3}(?!\w)"  # scientific notation: "1e3", "2.5E-4"
NUM = re.compile(
    rf"""
    (?<![\w.,/])(?=[-−$€£¥\s]{{0,5}}[\d.])  # a number is near: anything else fails at once
    (?P<neg>[-−](?=\s?[$€£¥]?\s?[\d.]))?\s?
    [$€£¥]?\s?
    (?P<neg2>-)?
    (?:
        (?P<mw>\d+)\s+(?P<mn>\d+)/(?P<md>\d+)(?![\d/])
      | (?P<fn>\d+)\s*/\s*(?P<fd>\d+)(?![\d/])
      | (?P<int>{INTEGER})(?P<dec>\.\d+)?(?P<exp>{EXPONENT})?
      | (?P<dec0>\.\d+)
    )
    """,
    re.X,
)
_PLAIN_NUMBER = re.compile(rf"[-−]?(?:(?:{INTEGER})(?:\.\d+)?|\.\d+)(?:{EXPONENT})?")


def plain_number(s: str) -> float | None:
    """The value of ``s`` when it is one number written plainly ("-1,250", "10 000", "2.5", "1e3"), else None."""
    s = s.strip()
    if not _PLAIN_NUMBER.fullmatch(s):
        return None
    return float(re.sub(_GROUP_SPACE + "|,", "", s).replace("−", "-"))
_UNITS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
}
_TENS = {w: 10 * i for i, w in enumerate(["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_NUM_WORD = "|".join([*_UNITS, *_TENS, *_SCALES])
_WORD_NUM = re.compile(rf"\b(?:{_NUM_WORD})(?:(?:[\s-]+and[\s-]+|[\s-]+)(?:{_NUM_WORD}))*\b", re.I)
_POINT = re.compile(r"\s+point\b", re.I)


def _words_value(words: str) -> float:
    total = current = 0
    for w in re.split(r"[\s-]+", words.lower()):
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        elif w in _SCALES:
            total += max(current, 1) * _SCALES[w]
            current = 0
    return float(total + current)


_OPERATION = re.compile(r"\d\s*[-+*/x×÷]\s*[$]?\d|\d[^.\d]{0,25}?\b(?:times|plus|minus|divided\s+by|multiplied\s+by)\b", re.I)
_RESULT = re.compile(r"\bequals?\b|\bequal\s+to\b|\bwhich\s+(?:is|gives|makes)\b|\bgives\b|,\s*or\b", re.I)
_OR_NUMBER = re.compile(r"^\s*(?:or|and/or)\s+[-−$]?\d")


def _num_value(m: re.Match[str]) -> float | None:
    g = m.groupdict()
    sign = -1.0 if (g["neg"] or g["neg2"]) else 1.0
    if g["mw"] is not None:
        den = float(g["md"])
        return sign * (float(g["mw"]) + float(g["mn"]) / den) if den else None
    if g["fn"] is not None:
        den = float(g["fd"])
        return sign * float(g["fn"]) / den if den else None
    if g["int"] is not None:
        return sign * float(re.sub(_GROUP_SPACE + "|,", "", g["int"]) + (g["dec"] or "") + (g["exp"] or ""))
    return sign * float(g["dec0"])


# An exact value before an approximation that the number type reads: a fraction ("1/3 ≈ 0.33" is 1/3).
_EXACT_NUMBER = re.compile(r"^\s*[-−]?\d+\s*/\s*\d+\s*$")


def _number_in_span(span: str) -> Extraction | None:
    rule = "number:after-phrase"
    span = exact_side(span, _EXACT_NUMBER)  # "268.083... ≈ 268" is 268
    if "=" in span:
        tail = span.rsplit("=", 1)[1]
        if any(c.isdigit() for c in tail):
            span, rule = tail, "number:after-phrase-result"
    elif _OPERATION.search(span):
        # "23 + 18 + 28, which equals 69", "246 people times 4 sections, which is 984", "65899 + 119, or 65918"
        marks = list(_RESULT.finditer(span))
        if marks and any(c.isdigit() for c in span[marks[-1].end() :]):
            span, rule = span[marks[-1].end() :], "number:after-phrase-result"
    for m in NUM.finditer(span):
        value = _num_value(m)
        if value is None:
            continue
        if _OR_NUMBER.match(span[m.end() :]):
            other = NUM.search(span, m.end())
            if other is not None and _num_value(other) != value:
                return AMBIGUOUS
        return Extraction(value, rule)
    w = _WORD_NUM.search(span)
    if w and not _POINT.match(span, w.end()):  # "nine point eight" is not 9
        return Extraction(_words_value(w.group(0)), "number:word")
    return None


# "The answer (as a fraction) is 1/4", "The answer (in words) is ...", "if we write this answer in words, the answer
# would be": the same answer restated in another form, which never overrides the answer stated before it.
_RESTATED = re.compile(
    r"\b(?:as\s+an?\s+(?:fraction|decimal|percent(?:age)?|mixed\s+number|whole\s+number)"
    r"|in\s+(?:words|(?:fraction(?:al)?|decimal|percent(?:age)?|simplest|word)\s+form)|words)\b",
    re.I,
)
# An answer phrase in prose ("the answer is", "would be"): a number right at the end of the text after one, with no
# sentence end, may have been cut off while it was written ("... The answer is 6" of "6000").
_PROSE_PHRASE = re.compile(r"(?:is|be)(?:\s*:)?$", re.I)


def _number_phrases(text: str, source: Source, open_end: bool) -> list[tuple[int, str, bool]] | None:
    """(position, sentence, restates an earlier answer) after each answer phrase, last phrase first.

    A CoT cut off in the sentence of its last answer phrase is None (not answered); an extraction
    output, whose start is its answer, loses only that cut phrase.  ``open_end``: the text as written (before
    mark-up was removed) ends in a digit ("**1,250**" is closed)."""
    out: list[tuple[int, str, bool]] = []
    phrases = answer_phrases(text, source)
    if phrases:
        for m in phrases:
            line_start = text.rfind("\n", 0, m.start()) + 1
            restated = bool(_RESTATED.search(text, max(line_start, m.start() - 60), m.end()))
            out.append((m.end(), answer_span(text, m.end()), restated))
        last = phrases[-1]
        end = text.rstrip()
        if (
            last is not None
            and open_end
            and end[-1:].isdigit()
            and _PROSE_PHRASE.search(last.group(0))
            and not SPAN_END.search(text, last.end(), len(end))
        ):
            if source != "extraction":
                return None  # a CoT cut off mid-sentence: not answered
            out.pop()  # an extraction output answered at its start; the cut phrase after it does not count
    if source == "extraction":
        out.insert(0, (0, answer_span(text, 0), False))
    out.reverse()
    return out


# LaTeX numerics, rewritten as plain numbers before a number is read: "3\frac{3}{4}" (3 3/4), "\frac12",
# "3^{4}" (81), "2.5 \times 10^{4}" (25000), "\$5", "50\%", "\text{ cm}", "90^\circ", "1{,}000".
_TEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox)\s*\{([^{}]*)\}")
_TEX_MIXED = re.compile(r"(\d)\s*\\[dt]?frac\s*\{(\d+)\}\s*\{(\d+)\}")
_TEX_FRAC_SHORT = re.compile(r"\\[dt]?frac\s*(\d)\s*(\d)")
_TEX_SCI = re.compile(r"(\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|×|\*|x)\s*10\s*\^\s*(?:\{\s*([-−]?\d+)\s*\}|([-−]?\d+))")
_TEX_POWER = re.compile(r"(?<![\d.])(\d+)\s*\^\s*(?:\{\s*(\d+)\s*\}|(\d))(?!\s*\\circ)")
_TEX_SPACES = re.compile(r"\\[,;:! ]|\\left|\\right|\^\s*\{?\s*\\circ\s*\}?|\\circ|\\degree")


def _sci(m: re.Match[str]) -> str:
    exponent = int((m.group(2) or m.group(3)).replace("−", "-"))
    if abs(exponent) > 30:
        return m.group(0)
    return format(Decimal(m.group(1)).scaleb(exponent).normalize(), "f")


def _power(m: re.Match[str]) -> str:
    base, exponent = int(m.group(1)), int(m.group(2) or m.group(3))
    return str(base**exponent) if exponent <= 64 and base.bit_length() * exponent <= 200 else m.group(0)


def _latex_numbers(text: str) -> str:
    """``text`` with LaTeX numerics written as plain numbers (only the forms listed above; the rest is left)."""
    text = _TEX_TEXT.sub(r" \1", text)
    text = text.replace("\\$", "$").replace("\\%", "%").replace("{,}", ",")
    text = _TEX_SPACES.sub("", text)
    text = _TEX_MIXED.sub(r"\1 \2/\3", text)
    text = _TEX_FRAC_SHORT.sub(r"\1/\2", text)
    text = _TEX_SCI.sub(_sci, text)
    return _TEX_POWER.sub(_power, text)


def _extract_number(text: str, mode: Mode, source: Source, open_end: bool = True) -> Extraction:
    phrases = _number_phrases(text, source, open_end)
    if phrases is None:
        return TRUNCATED
    restated: list[str] = []
    for pos, span, again in phrases:
        if again:
            restated.append(span)
            continue
        if conditional(sentence_at(text, pos)):
            return CONDITIONAL
        said = affirmed(text, pos, span)
        if said is None:
            continue
        r = _number_in_span(said)
        if r is not None:
            return r
    for span in restated:  # only a restatement states an answer ("The answer (in words) is twelve.")
        r = _number_in_span(span)
        if r is not None:
            return r
    if mode == "flexible":
        last = None
        for m in NUM.finditer(text):
            last = m
        if last is not None:
            if conditional(sentence_at(text, sentence_start(text, last.start()))):
                return CONDITIONAL
            value = _num_value(last)
            if value is not None:
                return Extraction(value, "number:last-number")
    return NONE


_FRACTION = re.compile(r"(?<![\d/])(\d+)\s*/\s*\d+(?![\d/])")

# A float whose shortest repr has this many significant digits is a computed value (2/3 -> 0.6666666666666666),
# not a stated one: it stands for the number it rounds.
_COMPUTED_DIGITS = 15


def _decimal(x: float) -> Decimal:
    return Decimal(repr(float(x)))


def _significant(d: Decimal) -> int:
    return len(d.normalize().as_tuple().digits)


def numbers_equal(value: float, gold: float) -> bool:
    """Whether a predicted number equals the gold one, exactly as a careful reader compares them.

    Integers exactly (1,201,587 is not 1,201,565); decimals at the precision the gold states (gold 3.5 accepts
    3.50, not 3.5004); fractions as fractions (3/4 = 0.75).  Two exceptions, both about values that are not
    written exactly: a gold of 15 or more significant digits is a float's repr of a computed value (AddSub's
    "0.6666666666666666"), equal to any prediction that agrees to 12 significant digits; a prediction of 15 or
    more significant digits (the model wrote 2/3 or 0.6666666666666667) is right for a gold stated with at least
    two decimals when it rounds to it (2/3 for gold 0.67).
    """
    v, g = float(value), float(gold)
    if v == g:
        return True
    if not (math.isfinite(v) and math.isfinite(g)):
        return False
    gd = _decimal(g)
    if _significant(gd) >= _COMPUTED_DIGITS:
        return math.isclose(v, g, rel_tol=1e-12, abs_tol=1e-12)
    vd = _decimal(v)
    exponent = int(gd.normalize().as_tuple().exponent)
    if _significant(vd) >= _COMPUTED_DIGITS and exponent <= -2:
        return vd.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_UP) == gd
    return False


class Number(AnswerType):
    name = "number"
    extraction = "kojima-numerals"

    def extract(self, text: str, mode: Mode, source: Source, choices: Sequence[str]) -> Extraction:
        open_end = text.rstrip()[-1:].isdigit()
        if "\\" in text or "^" in text or "{,}" in text:
            text = _latex_numbers(text)
        return _extract_number(clean_text(text, source), mode, source, open_end)

    def gold(self, gold: Sequence[str], choices: Sequence[str], letter: str | None = None) -> Any:
        return parse_number(str(gold[0]))

    def equal(self, value: Any, gold: Any) -> bool:
        return numbers_equal(value, gold)

    def vote_key(self, value: Any) -> Hashable:
        return round(float(value), 6) + 0.0

    def answer_text(self, value: Any, choices: Sequence[str]) -> str | None:
        f = float(value)
        return str(int(f)) if f.is_integer() else repr(f)

    def gold_problems(self, answer: Sequence[str], choices: Sequence[str]) -> list[str]:
        problems = [f"field 'answer': expected a number, got {a!r}" for a in answer if parse_number(str(a)) is None]
        return problems + super().gold_problems(answer, choices)

    def published_gold(self, gold: str, choices: Sequence[str]) -> tuple[str, str | None]:
        return gold.replace(",", ""), None

    def published_reason(self, pred: str, text: str, value: Any, gold: Any, correct: bool) -> str | None:
        said = parse_number(pred) if correct else None
        if said is not None and gold is not None and self.equal(said, gold):
            return "kojima-string-compare"  # the same number written otherwise ("8.0" for 8)
        if any(m.group(1) == pred for m in _FRACTION.finditer(text)):
            return "fraction"  # the published cleanser kept a fraction's numerator
        if re.search(rf"(?<![\d.])\.{re.escape(pred)}\b", text):
            return "decimal-point"  # ... or the digits after a bare decimal point
        if pred and pred not in text and pred in text.replace(",", ""):
            return "comma-removal"  # ... or two numbers joined by removing their commas
        return None

    def star_completion(self, answer: str, choices: Sequence[str], rationale: str | None) -> str:
        # GSM8K's format (the STaR authors' prompt): the rationale lines, then "#### 72"
        return f" #### {answer}" if rationale is None else f" {rationale.strip()}\n#### {answer}"
