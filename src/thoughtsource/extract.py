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
    revised counts as revised); a phrase followed by "not" is skipped.  Numbers: a phrase that restates
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
    "-3", "−3", "1,000", "$5.50", "50%", "3/4", "3 1/2", ".5", "12 km/h"; after an "=" the result is
    taken ("3 x 15 = 45" -> 45); a few number words ("twelve").  Two numbers joined by "or" are
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

All patterns are compiled once at import; per-choice-list patterns are cached.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from .schema import BOOL_WORDS, parse_number

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
    "text_f1",
]

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

# ---------------------------------------------------------------------------------------------
# Text clean-up and answer phrases
# ---------------------------------------------------------------------------------------------

_MARKDOWN = re.compile(r"\*\*|__|`|(?<!\w)\*(?=\S)|(?<=\S)\*(?!\w)")
_NEXT_QUESTION = re.compile(r"\n\s*(?:Q|Question)\s*:", re.I)
_LATEX_FRAC = re.compile(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}")
_ANCHOR = re.compile(
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
_ANCHOR_KEYS = ("answer", "option", "choice", "response", "#", "\\", "choose", "pick", "select", "go with")
_LEAD = re.compile(r"""^(?:[\s:="'“‘(\[{>*_,–—]|-(?![\d$.])|\.(?!\d)|\$(?![\d.-]))*""")
_SPAN_END = re.compile(r"\.(?=\s|$)|[!?;](?=\s|$)|\n|\}")
_NEGATED = re.compile(r"(?:not|n't|neither)\b", re.I)
_TRAIL = " \t\n\"'“”‘’.,;:!?)*_`"
_UNANSWERED = re.compile(
    r"^(?:unknown|unclear|uncertain|undetermined|none|n/?a|moot|cannot|can't|not\s+(?:known|sure|certain|possible|enough|clear|determinable))\b",
    re.I,
)


def _clean(text: str, source: Source) -> str:
    if source == "extraction":
        m = _NEXT_QUESTION.search(text)
        if m:
            text = text[: m.start()]
    if "*" in text or "_" in text or "`" in text:
        text = _MARKDOWN.sub("", text)
    if "\\" in text:
        text = _LATEX_FRAC.sub(r"\1/\2", text)
    return text


def _span(text: str, start: int, end_re: re.Pattern[str] | None = None) -> str:
    """The first sentence of ``text`` from ``start``, without leading punctuation."""
    chunk = text[start : start + 400]
    lead = _LEAD.match(chunk)
    if lead:
        # keep an opening parenthesis that wraps a letter: "(B)"
        cut = lead.end()
        if cut and chunk[cut - 1] == "(":
            cut -= 1
        chunk = chunk[cut:]
    m = (end_re or _SPAN_END).search(chunk)
    return chunk[: m.start()] if m else chunk


def _spans(text: str, source: Source, end_re: re.Pattern[str] | None = None) -> list[tuple[int, str]]:
    """(position, sentence) after each answer phrase, last phrase first."""
    low = text.lower()
    if any(k in low for k in _ANCHOR_KEYS):
        out: list[tuple[int, str]] = [(m.end(), _span(text, m.end(), end_re)) for m in _ANCHOR.finditer(text)]
    else:
        out = []
    if source == "extraction":
        out.insert(0, (0, _span(text, 0, end_re)))
    out.reverse()
    return out


# ---------------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------------

_NUM = re.compile(
    r"""
    (?<![\w.,/])
    (?P<neg>[-−](?=\s?[$€£¥]?\s?[\d.]))?\s?
    [$€£¥]?\s?
    (?P<neg2>-)?
    (?:
        (?P<mw>\d+)\s+(?P<mn>\d+)/(?P<md>\d+)(?![\d/])
      | (?P<fn>\d+)\s*/\s*(?P<fd>\d+)(?![\d/])
      | (?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<dec>\.\d+)?
      | (?P<dec0>\.\d+)
    )
    """,
    re.X,
)
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
        return sign * float(g["int"].replace(",", "") + (g["dec"] or ""))
    return sign * float(g["dec0"])


def _number_in_span(span: str) -> Extraction | None:
    rule = "number:after-phrase"
    if "=" in span:
        tail = span.rsplit("=", 1)[1]
        if any(c.isdigit() for c in tail):
            span, rule = tail, "number:after-phrase-result"
    elif _OPERATION.search(span):
        # "23 + 18 + 28, which equals 69", "246 people times 4 sections, which is 984", "65899 + 119, or 65918"
        marks = list(_RESULT.finditer(span))
        if marks and any(c.isdigit() for c in span[marks[-1].end() :]):
            span, rule = span[marks[-1].end() :], "number:after-phrase-result"
    for m in _NUM.finditer(span):
        value = _num_value(m)
        if value is None:
            continue
        if _OR_NUMBER.match(span[m.end() :]):
            other = _NUM.search(span, m.end())
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


def _number_phrases(text: str, source: Source, open_end: bool) -> list[tuple[str, bool]] | None:
    """(sentence, restates an earlier answer) after each answer phrase, last phrase first.

    A CoT cut off in the sentence of its last answer phrase is None (not answered); an extraction
    output, whose start is its answer, loses only that cut phrase.  ``open_end``: the text as written (before
    mark-up was removed) ends in a digit ("**1,250**" is closed)."""
    out: list[tuple[str, bool]] = []
    low = text.lower()
    if any(k in low for k in _ANCHOR_KEYS):
        for m in _ANCHOR.finditer(text):
            line_start = text.rfind("\n", 0, m.start()) + 1
            restated = bool(_RESTATED.search(text, max(line_start, m.start() - 60), m.end()))
            out.append((_span(text, m.end()), restated))
        last = list(_ANCHOR.finditer(text))[-1] if out else None
        end = text.rstrip()
        if (
            last is not None
            and open_end
            and end[-1:].isdigit()
            and _PROSE_PHRASE.search(last.group(0))
            and not _SPAN_END.search(text, last.end(), len(end))
        ):
            if source != "extraction":
                return None  # a CoT cut off mid-sentence: not answered
            out.pop()  # an extraction output answered at its start; the cut phrase after it does not count
    if source == "extraction":
        out.insert(0, (_span(text, 0), False))
    out.reverse()
    return out


# LaTeX numerics, rewritten as plain numbers before a number is read: "3\frac{3}{4}" (3 3/4), "\frac12",
# "3^{4}" (81), "2.5 \times 10^{4}" (25000), "\$5", "50\%", "\text{ cm}", "90^\circ", "1{,}000".
_TEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox)\s*\{([^{}]*)\}")
_TEX_MIXED = re.compile(r"(\d)\s*\\[dt]?frac\s*\{(\d+)\}\s*\{(\d+)\}")
_TEX_FRAC_SHORT = re.compile(r"\\[dt]?frac\s*(\d)\s*(\d)")
_TEX_SCI = re.compile(r"(\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|×)\s*10\s*\^\s*(?:\{\s*([-−]?\d+)\s*\}|([-−]?\d+))")
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
    for span, again in phrases:
        if again:
            restated.append(span)
            continue
        if _NEGATED.match(span):
            continue
        r = _number_in_span(span)
        if r is not None:
            return r
    for span in restated:  # only a restatement states an answer ("The answer (in words) is twelve.")
        r = _number_in_span(span)
        if r is not None:
            return r
    if mode == "flexible":
        last = None
        for m in _NUM.finditer(text):
            last = m
        if last is not None:
            value = _num_value(last)
            if value is not None:
                return Extraction(value, "number:last-number")
    return NONE


# ---------------------------------------------------------------------------------------------
# Multiple choice
# ---------------------------------------------------------------------------------------------

_LETTER = re.compile(
    r"""
      \(\s*(?P<p>[A-Za-z])\s*\)                                  # (B) (b)
    | \b(?:option|choice|letter)\s*\(?(?P<o>[A-Za-z])\b\)?       # option B, choice (b)
    | (?<![\w'])(?P<r>[A-Za-z])\)                                # B)
    | (?<![\w'’-])(?P<b>[A-Z])(?![\w'’]|-\w)                     # B  B.  B:  D--text
    """,
    re.X,
)
_STRONG = re.compile(
    r"\(\s*(?P<p>[A-Za-z])\s*\)|\b(?:option|choice)\s*\(?(?P<o>[A-Za-z])\b\)?|(?<![\w'])(?P<r>[A-Za-z])\)",
)
_LIST_SEP = re.compile(r"^[\s,/&.]*(?:(?:or|and|nor|vs\.?)\b)?[\s,/&]*(?:maybe|possibly|perhaps|also|either)?\s*$", re.I)
_LOWER_WORD = re.compile(r"\s+(?!(?:or|and|nor|through|to|vs)\b)[a-z]")


class _Choices(NamedTuple):
    n: int
    norms: tuple[str, ...]  # normalized choice texts
    texts: tuple[str, ...]


@lru_cache(maxsize=8192)
def _choices(choices: tuple[str, ...]) -> _Choices:
    return _Choices(len(choices), tuple(normalize_text(c) for c in choices), choices)


def _letters(span: str, ch: _Choices, pattern: re.Pattern[str] = _LETTER) -> list[tuple[int, int, str]]:
    """(start, end, LETTER) of the choice letters in ``span``, in order."""
    out = []
    limit = ch.n if ch.n else 10
    whole = span.strip(_TRAIL)
    for m in pattern.finditer(span):
        kind = m.lastgroup
        letter = m.group(kind)  # type: ignore[arg-type]
        # A bare capital "A"/"I" before a lower-case word is an article or a pronoun ("A dog", "I think"),
        # unless the words are the text of that choice ("A motel room").
        if kind == "b" and letter in "AI" and _LOWER_WORD.match(span, m.end()):
            idx = ord(letter) - 65
            rest = normalize_text(span[m.end() :])
            if not (idx < ch.n and ch.norms[idx] and rest.startswith(ch.norms[idx])):
                continue
        idx = ord(letter.upper()) - 65
        if 0 <= idx < limit:
            out.append((m.start(), m.end(), letter.upper()))
    if not out and len(whole) == 1 and whole.isalpha():  # "the answer is b."
        idx = ord(whole.upper()) - 65
        if 0 <= idx < limit:
            out.append((0, len(span), whole.upper()))
    return out


def _choice_text(span: str, ch: _Choices) -> Extraction | None:
    if not ch.n:
        return None
    norm = normalize_text(span)
    if not norm:
        return None
    for i, c in enumerate(ch.norms):
        if c and norm == c:
            return Extraction(chr(65 + i), "mc:choice-text")
    padded = f" {norm} "
    hits = [(padded.find(f" {c} "), len(c), i) for i, c in enumerate(ch.norms) if c and f" {c} " in padded]
    if not hits:
        return None
    # Drop choices contained in a longer matched one ("money" inside "money bank").
    hits = [h for h in hits if not any(o[2] != h[2] and o[0] <= h[0] and h[0] + h[1] <= o[0] + o[1] for o in hits)]
    hits.sort()
    if len(hits) > 1 and _LIST_SEP.match(padded[hits[0][0] + hits[0][1] + 1 : hits[1][0]]):
        return AMBIGUOUS  # "wealth or get rich"
    first = hits[0]
    if first[0] > 25 and first[0] + first[1] + 2 < len(padded):
        return None  # a choice's words in the middle of a sentence are not a stated answer (start or end only)
    if len(hits) == 1 or hits[0][0] == 0:
        return Extraction(chr(65 + hits[0][2]), "mc:choice-text")
    return AMBIGUOUS


def _after_choice_text(span: str, pos: int, letter: str, ch: _Choices) -> int:
    """Position after the text of choice ``letter`` when it follows at ``pos`` ("B) falling down")."""
    idx = ord(letter) - 65
    if idx < ch.n:
        t = ch.texts[idx].strip().rstrip(".").lower()
        if t:
            j = span.lower().find(t, pos, pos + len(t) + 4)
            if j >= 0 and not span[pos:j].strip(" :.-–)"):
                return j + len(t)
    return pos


def _mc_in_span(span: str, ch: _Choices) -> Extraction | None:
    found = _letters(span, ch)
    if found:
        _, e0, first = found[0]
        e0 = _after_choice_text(span, e0, first, ch)
        for s, e, letter in found[1:]:
            if s < e0:
                continue  # a capital inside the choice's own text ("C) A 6'' Man")
            if not _LIST_SEP.match(span[e0:s]):
                break
            if letter != first:
                return AMBIGUOUS  # "B or C", "(A), (B), or (D)", "B) falling down and D) exhaustion"
            e0 = _after_choice_text(span, e, letter, ch)
        return Extraction(first, "mc:letter")
    return _choice_text(span, ch)


def _extract_mc(text: str, mode: Mode, source: Source, ch: _Choices) -> Extraction:
    for _, span in _spans(text, source):
        if _NEGATED.match(span):
            continue
        r = _mc_in_span(span, ch)
        if r is not None:
            return r
    if mode == "flexible":
        found = _letters(text, ch, _STRONG)
        if found:
            return Extraction(found[-1][2], "mc:last-letter")
    return NONE


# ---------------------------------------------------------------------------------------------
# Bool
# ---------------------------------------------------------------------------------------------

_BOOL = re.compile(r"(?<![\w'-])(yes|no|true|false)(?![\w'-])", re.I)
_NO_OK = re.compile(r"\s*(?:[.,;:!)]|$)")
_NO_THEN = re.compile(r"\s+(?:it|they|he|she|this|that|there|because|since|as|not)\b", re.I)  # "No it would not"
_NOT_BEFORE = re.compile(r"(?:\bnot|n't)\s+$", re.I)
_BOOL_OR = re.compile(r"^\s*(?:,\s*)?(?:or|and|/)\s*$", re.I)


def _bools(span: str, sentence_start: bool) -> list[tuple[int, int, bool]]:
    out = []
    for m in _BOOL.finditer(span):
        word = m.group(1).lower()
        if word == "no" and not (
            _NO_OK.match(span, m.end()) or (sentence_start and not span[: m.start()].strip() and _NO_THEN.match(span, m.end()))
        ):
            continue  # "there is no evidence", "no one cuisine"
        value = BOOL_WORDS[word]
        if _NOT_BEFORE.search(span, 0, m.start()):
            value = not value  # "not true"
        out.append((m.start(), m.end(), value))
    return out


def _bool_in_span(span: str, ch: _Choices) -> Extraction | None:
    found = _bools(span, True)
    if found:
        _, e0, first = found[0]
        if len(found) > 1 and found[1][2] != first and _BOOL_OR.match(span[e0 : found[1][0]]):
            return AMBIGUOUS
        return Extraction(first, "bool:word")
    if ch.n:
        letters = _letters(span, ch)
        if letters:
            text = ch.texts[ord(letters[0][2]) - 65].strip().lower()
            if text in BOOL_WORDS:
                return Extraction(BOOL_WORDS[text], "bool:letter")
    return None


def _extract_bool(text: str, mode: Mode, source: Source, ch: _Choices) -> Extraction:
    for _, span in _spans(text, source):
        if _UNANSWERED.match(span):
            continue
        r = _bool_in_span(span, ch)
        if r is not None:
            return r
    if mode == "flexible":
        found = _bools(text, False)
        if found:
            return Extraction(found[-1][2], "bool:last-word")
    return NONE


# ---------------------------------------------------------------------------------------------
# Text and collections
# ---------------------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "“”‘’")
_ITEM_SPLIT = re.compile(r"\s*(?:[,;/\n]|\band\b|\s-\s|^\s*[-*•]\s|•)\s*", re.I | re.M)
_LIST_END = re.compile(r"\.(?=\s|$)|\n\s*\n|\}")  # a collection may be a bulleted list over several lines


def normalize_text(s: str) -> str:
    """SQuAD normalization: lower case, no punctuation, no articles, single spaces."""
    s = s.lower().translate(_PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _compact(s: str) -> str:
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


def _text_value(span: str) -> str | None:
    v = span.strip(_TRAIL).strip()
    return v or None


def _last_line(text: str) -> str:
    for line in reversed(text.strip().splitlines()):
        if line.strip(_TRAIL):
            return line
    return ""


_QUOTED = re.compile(r"""[\s:*]*(?:"([^"\n]+)"|“([^”\n]+)”)""")


def _extract_text(text: str, mode: Mode, source: Source) -> Extraction:
    for pos, span in _spans(text, source):
        q = _QUOTED.match(text, pos)  # a quoted answer ends at its closing quote: '"ndoa" (without the quotes)'
        v = _text_value(q.group(1) or q.group(2)) if q else _text_value(span)
        if v is not None:
            return Extraction(v, "text:after-phrase")
    if mode == "flexible":
        v = _text_value(_last_line(text))
        if v is not None:
            return Extraction(v, "text:last-line")
    return NONE


def _items(span: str) -> frozenset[str]:
    return frozenset(n for n in (normalize_text(x) for x in _ITEM_SPLIT.split(span)) if n)


def _extract_collection(text: str, mode: Mode, source: Source) -> Extraction:
    for _, span in _spans(text, source, _LIST_END):
        items = _items(span)
        if items:
            return Extraction(items, "collection:after-phrase")
    if mode == "flexible":
        items = _items(_last_line(text))
        if items:
            return Extraction(items, "collection:last-line")
    return NONE


# ---------------------------------------------------------------------------------------------
# Math (LaTeX answers, MATH-500)
# ---------------------------------------------------------------------------------------------

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_MATH_PHRASE = re.compile(
    r"\b(?:final\s+answer|answer)(?:\s*\([^()\n]{0,40}\))?\s*(?:is|would\s+be|will\s+be|=|:)(?:\s*:)?[ \t]*", re.I
)
_MATH_DELIMS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_MATH_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n")
_INLINE_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$]+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)


def _braced(text: str, start: int) -> str | None:
    """The content of the brace group opening at ``text[start]`` ("{"), None when it is never closed."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "{" and (i == 0 or text[i - 1] != "\\"):
            depth += 1
        elif c == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return None


def last_boxed(text: str) -> str | None:
    """The content of the last closed ``\\boxed{…}`` / ``\\fbox{…}`` of ``text`` ("\\boxed 5" too), None if none."""
    found = None
    for m in _BOXED.finditer(text):
        if m.end() < len(text) and text[m.end()] == "{":
            content = _braced(text, m.end())
        else:
            token = re.match(r"[^\s$]+", text[m.end() :])
            content = token.group(0) if token else None
        if content is not None and content.strip():
            found = content
    return found


def _math_value(s: str) -> str | None:
    s = s.strip().rstrip(".").strip()
    for a, b in _MATH_DELIMS:
        if s.startswith(a) and s.endswith(b) and len(s) > len(a) + len(b):
            s = s[len(a) : -len(b)].strip()
            break
    inner = last_boxed(s)
    return (inner if inner is not None else s).strip() or None


def _math_after(text: str, pos: int) -> str | None:
    """The answer written at ``pos``: a math span ("$…$", "\\(…\\)") or the rest of the sentence."""
    rest = text[pos : pos + 600]
    for a, b in _MATH_DELIMS:
        if rest.startswith(a):
            end = rest.find(b, len(a))
            # a math span that is never closed was cut off ("The answer is $f(1986) = 1"): no answer
            return _math_value(rest[len(a) : end]) if end > len(a) else None
    m = _MATH_SENTENCE_END.search(rest)
    return _math_value(rest[: m.start()] if m else rest)


def _extract_math(text: str, mode: Mode, source: Source) -> Extraction:
    """A LaTeX answer as a string: the last ``\\boxed{}``, else the answer after the last answer phrase
    ("The final answer is $\\frac{1}{2}$"); think blocks are dropped first."""
    if "</think>" in text or "<think>" in text:
        from .reasoning import strip_think

        text = strip_think(text)
        if not text:
            return TRUNCATED
    boxed = last_boxed(text)
    if boxed is not None:
        return Extraction(boxed.strip(), "math:boxed")
    for m in reversed(list(_MATH_PHRASE.finditer(text))):
        v = _math_after(text, m.end())
        if v is not None and not _NEGATED.match(v):
            return Extraction(v, "math:after-phrase")
    if source == "extraction":
        v = _math_after(text, len(text) - len(text.lstrip(" \t:")))
        if v is not None:
            return Extraction(v, "math:after-phrase")
    if mode == "flexible":
        spans = list(_INLINE_MATH.finditer(text))
        if spans:
            last = spans[-1]
            v = _math_value(next(g for g in last.groups() if g is not None))
            if v is not None:
                return Extraction(v, "math:last-math")
        nums = list(_NUM.finditer(text))
        if nums:
            return Extraction(nums[-1].group(0).strip(), "math:last-number")
    return NONE


_PLAIN_NUMBER = re.compile(r"[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-−]?\.\d+")
_LATEX_NOISE = re.compile(r"\\left|\\right|\\[,;:! ]|\s+|\\displaystyle|^\$|\$$")


def latex_key(s: str) -> str:
    """A LaTeX answer with spacing, \\left/\\right and \\dfrac/\\tfrac told apart from nothing: equal keys, equal answers."""
    return _LATEX_NOISE.sub("", s).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


def _plain_number(s: str) -> float | None:
    s = s.strip()
    return float(s.replace(",", "").replace("−", "-")) if _PLAIN_NUMBER.fullmatch(s) else None


@lru_cache(maxsize=16384)
def _parsed(latex: str) -> tuple[Any, ...]:
    import threading

    from math_verify import parse

    timeout = 5 if threading.current_thread() is threading.main_thread() else None  # signal-based: main thread only
    try:
        return tuple(parse(f"\\boxed{{{latex}}}", parsing_timeout=timeout))  # type: ignore[arg-type]
    except Exception:
        return ()


def math_equal(value: str, gold: str) -> bool:
    """Whether two LaTeX answers are equivalent: the same up to spacing, else equal plain numbers
    (:func:`numbers_equal`, the fast path), else `math-verify <https://github.com/huggingface/Math-Verify>`_'s
    ``verify(parse(gold), parse(value))`` (fractions, radicals, tuples, intervals, sets, units, ``\\text{}``)."""
    if latex_key(value) == latex_key(gold):
        return True
    p, g = _plain_number(value), _plain_number(gold)
    if p is not None and g is not None:
        return numbers_equal(p, g)
    try:
        import threading

        from math_verify import verify
    except ImportError:  # pragma: no cover - the math extra is part of every install we test
        from .errors import ThoughtSourceError

        raise ThoughtSourceError("scoring 'math' answers needs math-verify: pip install 'thoughtsource[math]'") from None
    gp, vp = _parsed(gold), _parsed(value)
    if not gp or not vp:
        return False
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    try:
        return bool(verify(list(gp), list(vp), timeout_seconds=timeout))
    except Exception:
        return False


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


# A bare answer, the most common answer-extraction output ("B.", " (C)", ": No", "True", "B) <choice B's text>."):
# the full rules give exactly what these give (a letter within the choices, a yes/no/true/false word), so they
# are read at once.
# ``extract(..., shortcut=False)`` always runs the full rules; tests check both agree on every real answer.
_BARE_LETTER = re.compile(r"[ \t]*:?[ \t]*(?:\(([A-Z])\)|([A-Z])\)?)\.?[ \t]*")
_BARE_BOOL = re.compile(r"[ \t]*:?[ \t]*(yes|no|true|false)\.?[ \t]*", re.I)


# "B) the text of choice B." with nothing else: no sentence end, mark-up or answer phrase inside
_BARE_LETTER_TEXT = re.compile(r"[ \t]*\(?([A-Z])\)[ \t]+([^.!?;}\n*_`\\]+?)\.?[ \t]*")


def _bare(text: str, answer_type: str, choices: Sequence[str]) -> Extraction | None:
    if answer_type == "multiplechoice":
        m = _BARE_LETTER.fullmatch(text) if len(text) < 12 else None
        if m:
            letter = m.group(1) or m.group(2)
            if ord(letter) - 65 < (len(choices) or 10):
                return Extraction(letter, "mc:letter")
            return None
        m = _BARE_LETTER_TEXT.fullmatch(text)
        if m:
            idx = ord(m.group(1)) - 65
            if idx < len(choices) and m.group(2).lower() == choices[idx].strip().rstrip(".").lower():
                low = text.lower()
                if not any(k in low for k in _ANCHOR_KEYS):
                    return Extraction(m.group(1), "mc:letter")
        return None
    elif answer_type == "bool" and len(text) < 12:
        m = _BARE_BOOL.fullmatch(text)
        if m:
            return Extraction(BOOL_WORDS[m.group(1).lower()], "bool:word")
    return None


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
    the same result (the reference the shortcut is tested against).
    """
    if not text or not text.strip():
        return NONE
    if mode not in MODES:
        raise ValueError(f"mode must be 'strict' or 'flexible', got {mode!r}")
    if shortcut and source == "extraction" and len(text) < 200:
        bare = _bare(text, answer_type, choices)
        if bare is not None:
            return bare
    if answer_type == "number":
        open_end = text.rstrip()[-1:].isdigit()
        if "\\" in text or "^" in text or "{,}" in text:
            text = _latex_numbers(text)
        return _extract_number(_clean(text, source), mode, source, open_end)
    if answer_type == "math":
        return _extract_math(text, mode, source)
    text = _clean(text, source)
    if answer_type == "multiplechoice":
        return _extract_mc(text, mode, source, _choices(tuple(choices)))
    if answer_type == "bool":
        return _extract_bool(text, mode, source, _choices(tuple(choices)))
    if answer_type == "text":
        return _extract_text(text, mode, source)
    if answer_type == "collection":
        return _extract_collection(text, mode, source)
    raise ValueError(f"unknown answer type {answer_type!r}")


def gold_value(answer_type: str, gold: Sequence[str], choices: Sequence[str] = ()) -> Any:
    """The gold answer in the form :func:`extract` returns (letter, float, bool, str, frozenset); None if unusable.

    A multiple-choice gold whose text is the text of several choices is the frozenset of their letters.
    """
    if not gold:
        return None
    g = str(gold[0])
    if answer_type == "multiplechoice":
        # The gold is stored as the text of a choice (the ThoughtSource schema); where several choices have that
        # text (AQuA test 125: B and E are both "6 kmph"), every one of their letters is right.
        letters = [chr(65 + i) for i, c in enumerate(choices) if c == g]
        if not letters:
            norm = normalize_text(g)
            letters = [chr(65 + i) for i, c in enumerate(_choices(tuple(choices)).norms) if c == norm]
        if letters:
            return letters[0] if len(letters) == 1 else frozenset(letters)
        s = g.strip().strip("()").upper()
        return s if len(s) == 1 and s.isalpha() else None
    if answer_type == "number":
        return parse_number(g)
    if answer_type == "bool":
        return BOOL_WORDS.get(g.strip().lower())
    if answer_type == "text":
        return tuple(str(x) for x in gold)
    if answer_type == "collection":
        return frozenset(n for n in (normalize_text(x) for x in gold) if n)
    if answer_type == "math":
        return g.strip() or None
    return None


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


def is_correct(value: Any, answer_type: str, gold: Any) -> bool:
    """Whether an extracted value matches a gold value (both as returned by :func:`extract` / :func:`gold_value`)."""
    if value is None or gold is None:
        return False
    if answer_type == "multiplechoice" and isinstance(gold, frozenset):
        return value in gold
    if answer_type == "number":
        return numbers_equal(value, gold)
    if answer_type == "math":
        return math_equal(str(value), str(gold))
    if answer_type == "text":
        norm = normalize_text(str(value))
        golds = (gold,) if isinstance(gold, str) else gold
        if any(norm == normalize_text(str(g)) for g in golds):
            return True
        # Spelled-out letter sequences ("n a o a" for "naoa"): compare without any whitespace, articles kept.
        compact = _compact(str(value))
        return bool(compact) and any(compact == _compact(str(g)) for g in golds)
    return bool(value == gold)
