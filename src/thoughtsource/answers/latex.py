"""The ``math`` type (MATH-500): a LaTeX answer as a string, the last ``\\boxed{}`` once think blocks are dropped;
compared with HF's math-verify after a fast path for identical LaTeX and plain numbers."""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from functools import lru_cache
from typing import Any

from .base import AFFIRMED, NEGATED, NONE, TRUNCATED, AnswerType, Extraction, Mode, Source
from .number import NUM, numbers_equal

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_MATH_PHRASE = re.compile(
    r"\b(?:final\s+answer|answer)(?:\s*\([^()\n]{0,40}\))?\s*(?:is|would\s+be|will\s+be|=|:)(?:\s*:)?[ \t]*", re.I
)
_MATH_DELIMS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_MATH_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n")
# the answer set against what it is not, outside braces: "6, not 5", "6 (not 5)", "6 rather than 5"
_CONTRAST = re.compile(r",\s*(?:and\s+)?not\b|\s+and\s+not\b|,?\s+(?:instead\s+of|rather\s+than)\b|\s*\(\s*not\b", re.I)
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
    sentence = rest[: m.start()] if m else rest
    c = _CONTRAST.search(sentence)
    if c and sentence.count("{", 0, c.start()) == sentence.count("}", 0, c.start()):
        sentence = sentence[: c.start()]  # "6, not 5", "6 (not 5)", "6 rather than 5": the answer is 6
    return _math_value(sentence)


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
    """A LaTeX answer as a string: the last ``\\boxed{}``, else the answer after the last answer phrase
    ("The final answer is $\\frac{1}{2}$"); think blocks are dropped first."""
    if "</think>" in text or "<think>" in text:
        from ..reasoning import strip_think

        text = strip_think(text)
        if not text:
            return TRUNCATED
    boxed = last_boxed(text)
    if boxed is not None:
        return Extraction(boxed.strip(), "math:boxed")
    for m in reversed(list(_MATH_PHRASE.finditer(text))):
        v = _math_after(text, m.end())
        if v is not None and NEGATED.match(v):
            v = _math_affirmed(text, m.end())
        if v is not None:
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
        nums = list(NUM.finditer(text))
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
        from ..errors import ThoughtSourceError

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
