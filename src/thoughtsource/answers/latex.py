"""The ``math`` type (MATH-500): a LaTeX answer as a string, the last ``\\boxed{}`` once think blocks are dropped, else
the answer after the answer phrases every type shares (``base.answer_phrases``: "The final answer is", PRM800K's
"# Answer" line, GSM8K's "#### 12"); compared with HF's math-verify after a fast path for identical LaTeX and plain
numbers."""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import Any

from ..errors import ThoughtSourceError
from .base import (
    AFFIRMED,
    CONDITIONAL,
    NEGATED,
    NONE,
    TRUNCATED,
    AnswerType,
    Extraction,
    Mode,
    Source,
    answer_phrases,
    conditional,
    exact_side,
    sentence_at,
    sentence_start,
)
from .number import NUM, numbers_equal, plain_number

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_MATH_DELIMS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_MATH_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n")
# the answer set against what it is not, outside braces: "6, not 5", "6 (not 5)", "6 rather than 5"
_CONTRAST = re.compile(r",\s*(?:and\s+)?not\b|\s+and\s+not\b|,?\s+(?:instead\s+of|rather\s+than)\b|\s*\(\s*not\b", re.I)
# a math span; an escaped dollar ("$\\$5.50$") is a character of it, not its end
_INLINE_MATH = re.compile(
    r"(?<!\\)\$\$((?:[^$\\]|\\.)+?)\$\$|(?<!\\)\$((?:[^$\\]|\\.)+)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S
)


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


_BRACE = re.compile(r"(?<!\\)[{}]")


def _brace_pairs(text: str) -> dict[int, int]:
    """Where each brace group of ``text`` that closes opens and closes (one pass; ``\\{`` is no brace): what
    :func:`_braced` finds for each, without reading the text again per group ("\\boxed{" a thousand times)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE.finditer(text):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


def _last_boxed(text: str) -> tuple[int, str] | None:
    """(end, content) of the last closed ``\\boxed{…}`` / ``\\fbox{…}`` of ``text`` ("\\boxed 5" too), None if none."""
    found = None
    pairs: dict[int, int] | None = None
    for m in _BOXED.finditer(text):
        if m.end() < len(text) and text[m.end()] == "{":
            pairs = _brace_pairs(text) if pairs is None else pairs
            close = pairs.get(m.end())
            content = text[m.end() + 1 : close] if close is not None else None
            end = close + 1 if close is not None else 0
        else:
            token = re.match(r"[^\s$]+", text[m.end() :])
            content = token.group(0) if token else None
            end = m.end() + len(content) if content is not None else 0
        if content is not None and content.strip():
            found = (end, content)
    return found


def last_boxed(text: str) -> str | None:
    """The content of the last closed ``\\boxed{…}`` / ``\\fbox{…}`` of ``text`` ("\\boxed 5" too), None if none."""
    found = _last_boxed(text)
    return found[1] if found is not None else None


# A label written inside the box: "\boxed{\text{answer: 12}}", "\boxed{\text{The final answer is } 12}"
_LABEL = re.compile(
    r"\s*(?P<text>\\(?:text|textbf|mathrm|mbox)\s*\{)?\s*(?:the\s+)?(?:final\s+)?answer\s*(?:is|=|:)\s*", re.I
)


def answer_value(s: str) -> str:
    """What a stated answer (a box's content, a math span) says: without a label ("\\text{answer: 12}" is 12) and,
    for an approximation, its exact side (:func:`~thoughtsource.answers.base.exact_side`: "268.083\\ldots \\approx
    268" is 268, "\\frac{1}{3} \\approx 0.33" is \\frac{1}{3})."""
    m = _LABEL.match(s)
    if m is not None:
        if m.group("text"):
            opening = m.end("text") - 1
            inner = _braced(s, opening)
            if inner is not None:
                said = s[m.end() : opening + 1 + len(inner)].strip()
                rest = s[opening + len(inner) + 2 :]
                s = (f"\\text{{{said}}}" if re.search(r"[A-Za-z]{2}", said) else said) + rest
        else:
            s = s[m.end() :]
    return exact_side(s).strip()


def _delimited(rest: str, a: str, b: str) -> int:
    """Where the math span that ``rest`` opens with ``a`` closes (``b`` not escaped: "$\\$5$"), -1 if never."""
    end = rest.find(b, len(a))
    while end > 0 and rest[end - 1] == "\\" and b == "$":
        end = rest.find(b, end + 1)
    return end


def _math_value(s: str) -> str | None:
    s = s.strip().rstrip(".").strip()
    for a, b in _MATH_DELIMS:
        if s.startswith(a) and _delimited(s, a, b) == len(s) - len(b) and len(s) > len(a) + len(b):
            s = s[len(a) : -len(b)].strip()
            break
    inner = last_boxed(s)
    return answer_value(inner if inner is not None else s) or None


def _math_after(text: str, pos: int) -> str | None:
    """The answer written at ``pos`` (or on the next line: PRM800K's "# Answer"): a math span ("$…$", "\\(…\\)") or
    the rest of the sentence."""
    rest = text[pos : pos + 600].lstrip()
    for a, b in _MATH_DELIMS:
        if rest.startswith(a):
            end = _delimited(rest, a, b)
            # a math span that is never closed was cut off ("The answer is $f(1986) = 1"): no answer
            return _math_value(rest[len(a) : end]) if end > len(a) else None
    m = _MATH_SENTENCE_END.search(rest)
    sentence = rest[: m.start()] if m else rest
    c = _CONTRAST.search(sentence)
    if c and sentence.count("{", 0, c.start()) == sentence.count("}", 0, c.start()):
        sentence = sentence[: c.start()]  # "6, not 5", "6 (not 5)", "6 rather than 5": the answer is 6
    return _math_value(sentence)


# A sentence in words, not an answer ("answer choice (A) is too low, so we can eliminate it"): four words or more
# without a digit, LaTeX or a math sign (a one-to-three-word answer such as "odd", "Devon" or "no solution" is read).
_PROSE = re.compile(r"[^\W\d_]+(?:[\s,;'’-]+[^\W\d_]+){3,}[\s,;'’-]*")


def _math_affirmed(text: str, pos: int) -> str | None:
    """The answer a negated answer sentence at ``pos`` goes on to state ("not $5$ but $6$" -> "6"), None if it
    only negates."""
    stop = _MATH_SENTENCE_END.search(text, pos)
    m = AFFIRMED.search(text, pos, stop.start() if stop else len(text))
    if m is None:
        return None
    rest = text[m.end() :]
    return _math_after(text, m.end() + len(rest) - len(rest.lstrip(" \t,:")))


def _extract_math(text: str, mode: Mode, source: Source) -> Extraction:
    """A LaTeX answer as a string: the last ``\\boxed{}`` (unless a self-correction or a "# Answer" line comes after
    it), else the answer after the last answer phrase ("The final answer is $\\frac{1}{2}$", "# Answer\\n\\n12",
    "#### 12"); think blocks are dropped by :func:`thoughtsource.extract.extract` first."""
    boxed = _last_boxed(text)
    boxes = list(_BOXED.finditer(text)) if "\\" in text else []
    opened = boxes[-1] if boxes else None
    if opened is not None and text[opened.end() : opened.end() + 1] == "{" and opened.end() not in _brace_pairs(text):
        return TRUNCATED  # cut off inside its box: "The answer is \\boxed{12"
    phrases = [m for m in answer_phrases(text, source) if not m.group(0).startswith("\\")]  # boxes: read above
    if boxed is not None:
        phrases = [m for m in phrases if m.start() >= boxed[0] and (m.group("fix") or m.group("line"))]
    for m in reversed(phrases):
        if conditional(sentence_at(text, m.end())):
            return CONDITIONAL
        v = _math_after(text, m.end())
        if v is not None and NEGATED.match(v):
            v = _math_affirmed(text, m.end())
        if v is not None and not _PROSE.fullmatch(v):
            return Extraction(v, "math:after-phrase")
    if boxed is not None:
        return Extraction(answer_value(boxed[1]), "math:boxed")
    if source == "extraction":
        if conditional(sentence_at(text, 0)):
            return CONDITIONAL
        v = _math_after(text, len(text) - len(text.lstrip(" \t:")))
        if v is not None:
            return Extraction(v, "math:after-phrase")
    if mode == "flexible":
        spans = list(_INLINE_MATH.finditer(text))
        nums = list(NUM.finditer(text)) if not spans else []
        last = spans[-1] if spans else nums[-1] if nums else None
        if last is not None and conditional(sentence_at(text, sentence_start(text, last.start()))):
            return CONDITIONAL
        if spans:
            v = _math_value(next(g for g in spans[-1].groups() if g is not None))
            if v is not None:
                return Extraction(v, "math:last-math")
            nums = list(NUM.finditer(text))
        if nums:
            return Extraction(nums[-1].group(0).strip(), "math:last-number")
    return NONE


_LATEX_NOISE = re.compile(r"\\left|\\right|\\[,;:! ]|\s+|\\displaystyle|^\$|\$$")


def latex_key(s: str) -> str:
    """A LaTeX answer with spacing, \\left/\\right and \\dfrac/\\tfrac told apart from nothing: equal keys, equal answers."""
    return _LATEX_NOISE.sub("", s).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


@lru_cache(maxsize=16384)
def _parsed(latex: str) -> tuple[Any, ...]:
    import threading

    from math_verify import parse

    timeout = 5 if threading.current_thread() is threading.main_thread() else None  # signal-based: main thread only
    try:
        return tuple(parse(f"\\boxed{{{latex}}}", parsing_timeout=timeout))
    except Exception:
        return ()


def math_equal(value: str, gold: str) -> bool:
    """Whether two LaTeX answers are equivalent: the same up to spacing, else equal plain numbers
    (:func:`numbers_equal`, the fast path), else `math-verify <https://github.com/huggingface/Math-Verify>`_'s
    ``verify(parse(gold), parse(value))`` (fractions, radicals, tuples, intervals, sets, units, ``\\text{}``)."""
    if latex_key(value) == latex_key(gold):
        return True
    p, g = plain_number(value), plain_number(gold)
    if p is not None and g is not None:
        return numbers_equal(p, g)
    try:
        import threading

        from math_verify import verify
    except ImportError:  # pragma: no cover - the math extra is part of every install we test
        raise ThoughtSourceError("scoring 'math' answers needs math-verify: pip install 'thoughtsource[math]'") from None
    gp, vp = _parsed(gold), _parsed(value)
    if not gp or not vp:
        return False
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    try:
        return bool(verify(list(gp), list(vp), timeout_seconds=timeout))
    except Exception:
        return False


class Math(AnswerType):
    name = "math"

    def extract(self, text: str, mode: Mode, source: Source, choices: Sequence[str]) -> Extraction:
        return _extract_math(text, mode, source)

    def gold(self, gold: Sequence[str], choices: Sequence[str], letter: str | None = None) -> Any:
        return str(gold[0]).strip() or None

    def equal(self, value: Any, gold: Any) -> bool:
        return math_equal(str(value), str(gold))

    def vote_key(self, value: Any) -> Hashable:
        return latex_key(str(value))
