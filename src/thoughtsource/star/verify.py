"""The verified-rationale filter: checks of a rationale itself, beyond its final answer.

The STaR paper keeps every rationale whose final answer is right and names "filtering bad reasoning
paired with correct answers" an open question.  These checks reject the cases that can be decided
mechanically.  Each function returns ``None`` when the rationale passes, otherwise a short
human-readable reason (``str``).  They are pure and cheap (compiled regexes, no ``eval``): the loop
calls them on thousands of rationales.

:func:`verify_scratchpad`
    arithmetic (the scratchpad of the paper's Figure 3): well formed and every line recomputed.
:func:`verify_compact_scratchpad`
    arithmetic (the compact format, one ``x+y+c=t`` line per digit position): every line recomputed.
:func:`verify_number`
    number tasks (GSM8K; word problems): every arithmetic statement, symbolic or verbal ("we add 7 to 55
    and get 62"), evaluates correctly, for word problems every operand comes from the question or an
    earlier result (:func:`ungrounded_operand`), the final answer is gold.
:func:`verify_calc`
    calculator-format rationales (``<<36-12=24>>``): every operation re-executed, every operand from the question or an
    earlier result, the executed answer gold.
:func:`verify_choice`
    multiple choice (CommonsenseQA): no copied hint marker, the stated answer is one consistent choice.
:func:`verify_no_hint`
    any task (bool): the hint marker is not copied.

The rules are stated in each function's docstring.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

from ..extract import extract, gold_value, is_correct
from .calculator import evaluate, find_annotations, leaf_operands, number_text, open_expression

__all__ = [
    "check_statements",
    "ungrounded_operand",
    "verify_bool",
    "verify_calc",
    "verify_choice",
    "verify_compact_scratchpad",
    "verify_no_hint",
    "verify_number",
    "verify_scratchpad",
]

# ---------------------------------------------------------------------------------------------
# Arithmetic scratchpad (Figure 3)
# ---------------------------------------------------------------------------------------------

_OPEN, _CLOSE = "<scratch>", "</scratch>"
_DIGITS = r"\d(?:[ \t]+\d)*"
_FIRST_LINE = re.compile(rf"^({_DIGITS})[ \t]*\+[ \t]*({_DIGITS})[ \t]*,[ \t]*C:[ \t]*(\d+)$")
_STEP_LINE = re.compile(rf"^(?:(\d)[ \t]*\+[ \t]*(\d)[ \t]+)?,[ \t]*({_DIGITS})[ \t]+C:[ \t]*(\d+)$")
_DIGITS_ONLY = re.compile(rf"^{_DIGITS}$")


def _digits(s: str) -> str:
    return "".join(s.split())


def _spaced(s: str) -> str:
    return " ".join(s)


def _check_first_line(line: str, a: int, b: int, width: int) -> str | None:
    m = _FIRST_LINE.match(line)
    if not m:
        return f"first scratchpad line {line!r} is not 'a + b , C: 0'"
    da, db, carry = _digits(m.group(1)), _digits(m.group(2)), m.group(3)
    want_a, want_b = str(a).zfill(width), str(b).zfill(width)
    if (da, db) != (want_a, want_b):
        return f"first scratchpad line restates {_spaced(da)} + {_spaced(db)}, not {_spaced(want_a)} + {_spaced(want_b)}"
    if carry != "0":
        return f"first scratchpad line has carry {carry}, not 0"
    return None


def _check_step(k: int, line: str, da: str, db: str, acc: str, carry: int) -> tuple[str | None, str, int]:
    """Line ``k`` (1-based) after adding digit ``width - k``; returns (reason, new acc, new carry)."""
    width = len(da)
    i = width - k  # index (from the left) of the digit pair this line's digits come from
    s = int(da[i]) + int(db[i]) + carry
    acc, carry = str(s % 10) + acc, s // 10
    m = _STEP_LINE.match(line)
    if not m:
        return f"scratchpad line {k} {line!r} is not '[x + y ], digits C: carry'", acc, carry
    pair = (m.group(1), m.group(2)) if m.group(1) is not None else None
    want_pair = (da[i - 1], db[i - 1]) if i > 0 else None
    if pair != want_pair:
        shown = "none" if pair is None else " + ".join(pair)
        want = "none" if want_pair is None else " + ".join(want_pair)
        return f"scratchpad line {k}: digit pair {shown}, should be {want}", acc, carry
    if _digits(m.group(3)) != acc:
        return f"scratchpad line {k}: digits {m.group(3)}, should be {_spaced(acc)}", acc, carry
    if int(m.group(4)) != carry:
        return f"scratchpad line {k}: carry {m.group(4)}, should be {carry}", acc, carry
    return None, acc, carry


def _scratch_frame(text: str) -> tuple[list[str], list[str]] | str:
    """The stripped lines between ``<scratch>`` (the first line) and ``</scratch>``, and those after it; or why the
    text is not framed so."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    if not lines or lines[0] != _OPEN:
        return "does not open with <scratch>"
    if _CLOSE not in lines:
        return "no </scratch> line"
    end = lines.index(_CLOSE)
    return lines[1:end], lines[end + 1 :]


def verify_scratchpad(text: str, a: int, b: int) -> str | None:
    """Check a generated Figure-3 scratchpad for ``a + b`` line by line (None: it passes).

    Rules (whitespace between tokens is free, the lines are not):

    1. the text opens with ``<scratch>`` and has a ``</scratch>`` line;
    2. the first line restates the operands, zero-padded to the same width: ``6 2 4 + 2 5 9 , C: 0``;
    3. then exactly one line per digit position, right to left: line ``k`` holds the *next* digit
       pair to add (none on the last line), the digits of the sum so far and the carry, all
       recomputed from the operands (``2 + 5 , 3 C: 1`` … ``, 8 8 3 C: 0``);
    4. then the final line: the final carry followed by the digits (``0 8 8 3``);
    5. after ``</scratch>`` exactly one line, the spaced answer, equal to the scratchpad's result and
       to ``a + b``; nothing follows it.
    """
    framed = _scratch_frame(text)
    if isinstance(framed, str):
        return framed
    body, tail = framed
    width = max(len(str(a)), len(str(b)))
    if len(body) != width + 2:
        return f"scratchpad has {len(body)} lines, a {width}-digit sum needs {width + 2}"
    reason = _check_first_line(body[0], a, b, width)
    if reason:
        return reason
    da, db = str(a).zfill(width), str(b).zfill(width)
    acc, carry = "", 0
    for k in range(1, width + 1):
        reason, acc, carry = _check_step(k, body[k], da, db, acc, carry)
        if reason:
            return reason
    final = body[-1]
    if not _DIGITS_ONLY.match(final) or _digits(final) != f"{carry}{acc}":
        return f"final scratchpad line {final!r}, should be {_spaced(f'{carry}{acc}')}"
    if not tail or not _DIGITS_ONLY.match(tail[0]):
        return "no answer line after </scratch>"
    if len(tail) > 1:
        return "text after the answer line"
    answer = int(_digits(tail[0]))
    if answer != int(f"{carry}{acc}"):
        return f"answer {answer} differs from the scratchpad's result {int(f'{carry}{acc}')}"
    if answer != a + b:
        return f"answer {answer} is not {a} + {b} = {a + b}"
    return None


_COMPACT_STEP = re.compile(r"^(\d)\+(\d)\+(\d)=(\d{1,2})$")
_COMPACT_ANSWER = re.compile(r"^\d+$")


def verify_compact_scratchpad(text: str, a: int, b: int) -> str | None:
    """Check a generated compact scratchpad for ``a + b`` line by line (None: it passes).

    Rules: the text opens with ``<scratch>``; then exactly one line per digit position of the wider
    operand, right to left, each ``x+y+c=t`` where x and y are that position's digits (0 past a
    shorter operand's end), c is the carry out of the line before (0 on the first line) and t = x + y
    + c; then ``</scratch>``; then exactly one line, the unspaced answer, equal to a + b.
    """
    framed = _scratch_frame(text)
    if isinstance(framed, str):
        return framed
    body, tail = framed
    width = max(len(str(a)), len(str(b)))
    if len(body) != width:
        return f"scratchpad has {len(body)} lines, a {width}-digit sum needs {width}"
    da, db = str(a).zfill(width), str(b).zfill(width)
    carry = 0
    for k, line in enumerate(body, start=1):
        m = _COMPACT_STEP.match(line)
        if not m:
            return f"scratchpad line {k} {line!r} is not 'x+y+c=t'"
        x, y, c, t = (int(g) for g in m.groups())
        want = (int(da[width - k]), int(db[width - k]), carry)
        if (x, y, c) != want:
            return f"scratchpad line {k}: {x}+{y}+{c}, should be {want[0]}+{want[1]}+{want[2]}"
        if t != x + y + c:
            return f"scratchpad line {k}: total {t}, should be {x + y + c}"
        carry = t // 10
    if not tail or not _COMPACT_ANSWER.match(tail[0]):
        return "no answer line after </scratch>"
    if len(tail) > 1:
        return "text after the answer line"
    if int(tail[0]) != a + b:
        return f"answer {tail[0]} is not {a} + {b} = {a + b}"
    return None


# ---------------------------------------------------------------------------------------------
# Arithmetic statements (GSM8K; MAWPS, ASDiv, SVAMP)
# ---------------------------------------------------------------------------------------------

_NUM = r"(?:\$[ \t]?)?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[ \t]?%)?|(?:\$[ \t]?)?\.\d+(?:[ \t]?%)?"
_TOKEN = re.compile(
    r"""
      (?P<num>""" + _NUM + r""")
    | (?P<word>[A-Za-z_][A-Za-z_']*)
    | (?P<op>\*\*|[-+−–*/×÷^])
    | (?P<lp>\()
    | (?P<rp>\))
    | (?P<eq>=)
    | (?P<ws>\s+)
    | (?P<other>.)
    """,
    re.X,
)
_ANNOTATION = re.compile(r"<<([^<>=]*)=([^<>]*)>>")
_MINUS = "-−–"
_MATH = ("num", "op", "lp", "rp")


class _Tok(NamedTuple):
    kind: str  # num op lp rp eq word other
    text: str
    start: int
    end: int


class _Unparsed(Exception):
    """A segment that is not a complete arithmetic expression (skipped, never an error)."""


def _tokens(line: str) -> list[_Tok]:
    toks = [_Tok(m.lastgroup or "other", m.group(), m.start(), m.end()) for m in _TOKEN.finditer(line) if m.lastgroup != "ws"]
    for j, t in enumerate(toks):  # "12 x 2": the letter x between two operands is a multiplication
        between = 0 < j < len(toks) - 1 and toks[j - 1].kind in ("num", "rp") and toks[j + 1].kind in ("num", "lp")
        if t.kind == "word" and t.text in ("x", "X") and between:
            toks[j] = t._replace(kind="op", text="*")
    return toks


def _number(text: str, percent: bool) -> Fraction:
    s = text.replace("$", "").replace(",", "").replace(" ", "").replace("\t", "")
    pct = s.endswith("%")
    digits = s.rstrip("%")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        raise _Unparsed  # "0900": a time, not a number
    value = Fraction(digits)
    return value / 100 if pct and percent else value


def _decimals(text: str) -> int:
    s = text.rstrip("% \t")
    return len(s.split(".", 1)[1]) if "." in s else 0


class _Parser:
    """Recursive descent over + - * / ^ with unary signs and parentheses, exact (Fraction)."""

    def __init__(self, toks: Sequence[_Tok], percent: bool) -> None:
        self.toks, self.i, self.percent = toks, 0, percent

    def parse(self) -> Fraction:
        if not self.toks:
            raise _Unparsed
        v = self._sum()
        if self.i != len(self.toks):
            raise _Unparsed
        return v

    def _peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _sum(self) -> Fraction:
        v = self._product()
        while (t := self._peek()) is not None and t.kind == "op" and (t.text == "+" or t.text in _MINUS):
            self.i += 1
            rhs = self._product()
            v = v + rhs if t.text == "+" else v - rhs
        return v

    def _product(self) -> Fraction:
        v = self._power()
        while (t := self._peek()) is not None:
            if t.kind == "op" and t.text in "*×/÷":
                self.i += 1
                rhs = self._power()
                if t.text in "/÷" and rhs == 0:
                    raise ZeroDivisionError
                v = v / rhs if t.text in "/÷" else v * rhs
            elif t.kind == "lp" or (t.kind == "num" and self.toks[self.i - 1].kind == "rp"):
                v = v * self._power()  # implicit: "86(2)", "(1/2) 1956", "(1/2)(20)"
            else:
                break
        return v

    def _power(self) -> Fraction:
        v = self._unary()
        t = self._peek()
        if t is not None and t.kind == "op" and t.text in ("^", "**"):
            self.i += 1
            e = self._unary()
            if e.denominator != 1 or abs(e) > 64:
                raise _Unparsed
            v = v ** int(e)
        return v

    def _unary(self) -> Fraction:
        t = self._peek()
        if t is not None and t.kind == "op" and (t.text == "+" or t.text in _MINUS):
            self.i += 1
            v = self._unary()
            return v if t.text == "+" else -v
        return self._atom()

    def _atom(self) -> Fraction:
        t = self._peek()
        if t is None:
            raise _Unparsed
        self.i += 1
        if t.kind == "num":
            return self._number_atom(t)
        if t.kind == "lp":
            v = self._sum()
            close = self._peek()
            if close is None or close.kind != "rp":
                raise _Unparsed
            self.i += 1
            return v
        raise _Unparsed

    def _glued_fraction(self) -> Fraction | None:
        """``n/d`` written without spaces at the cursor (integers), consumed; else None."""
        t = self.toks[self.i : self.i + 4]
        if len(t) == 4 and t[3].text in ("^", "**"):
            return None  # "10/2^2" is 10 / 4
        if (len(t) >= 3 and t[0].kind == "num" and t[1].text == "/" and t[2].kind == "num"
                and t[0].end == t[1].start and t[1].end == t[2].start and t[0].text.isdigit() and t[2].text.isdigit()):
            self.i += 3
            if int(t[2].text) == 0:
                raise ZeroDivisionError
            return Fraction(int(t[0].text), int(t[2].text))
        return None

    def _number_atom(self, t: _Tok) -> Fraction:
        """A number; ``1/5`` glued is one fraction ("28 / 1/5" is 140); ``1 1/2`` is a mixed number."""
        self.i -= 1
        frac = self._glued_fraction()
        if frac is not None:
            return frac
        self.i += 1
        value = _number(t.text, self.percent)
        if t.text.isdigit() and (nxt := self._peek()) is not None and nxt.kind == "num" and nxt.start > t.end:
            frac = self._glued_fraction()
            if frac is not None and frac < 1:
                return value + frac
            if frac is not None:
                raise _Unparsed
        return value


def _value(toks: Sequence[_Tok], percent: bool) -> Fraction | None:
    """The exact value of a complete expression; None when it is not one."""
    try:
        return _Parser(toks, percent).parse()
    except (_Unparsed, ValueError, ZeroDivisionError, OverflowError):
        return None


def _close(x: Fraction, y: Fraction, decimals: int | None) -> bool:
    """Equal, or equal up to the rounding of a number written with ``decimals`` places (or 1e-6 relative)."""
    if x == y:
        return True
    diff = abs(x - y)
    if diff <= Fraction(1, 10**6) * max(abs(x), abs(y)):
        return True
    return decimals is not None and diff <= Fraction(1, 2 * 10**decimals)


class _Side(NamedTuple):
    toks: list[_Tok]
    text: str


def _holds(left: _Side, right: _Side) -> bool:
    """left = right holds with % read as /100 or, failing that, as a bare decoration."""
    sides = (left, right)
    bare = [s for s in sides if len(s.toks) == 1 and s.toks[0].kind == "num"]
    decimals = min(_decimals(s.toks[0].text) for s in bare) if bare else None
    for percent in (True, False):
        x, y = _value(left.toks, percent), _value(right.toks, percent)
        if x is not None and y is not None and _close(x, y, decimals):
            return True
        if not any("%" in t.text for s in sides for t in s.toks):
            break
    return False


_OP_WORDS = frozenset({"x", "X", "times", "plus", "minus"})  # "60 students x 2/3 = 40"
_OP_WORDS_AFTER = frozenset({"x", "X", "times", "plus", "minus", "divided", "multiplied", "over"})
_GLUE_OK = frozenset(":;,([{\"'")


class _Run(NamedTuple):
    """A maximal run of math tokens with its neighbours on the line."""

    toks: list[_Tok]
    prev: _Tok | None
    nxt: _Tok | None
    after_text: bool  # some word or sign precedes the run on its line


def _is_sign(toks: Sequence[_Tok], j: int) -> bool:
    """A + or - glued to the number or parenthesis after it ("-5", "+30")."""
    t = toks[j]
    nxt = toks[j + 1] if j + 1 < len(toks) else None
    return (t.text == "+" or t.text in _MINUS) and nxt is not None and nxt.kind in ("num", "lp") and nxt.start == t.end


def _balanced(seg: Sequence[_Tok]) -> bool:
    depth = 0
    for t in seg:
        depth += (t.kind == "lp") - (t.kind == "rp")
        if depth < 0:
            return False
    return depth == 0


def _cut_at_start(seg: list[_Tok], run: _Run) -> bool:
    """The first side continues a formula with words before it ("S + 30", "11x+15", "√(144)", "half of 10")."""
    prev = run.prev
    glued = prev is not None and prev.end == seg[0].start
    if glued and (prev.kind == "word" or prev.text not in _GLUE_OK):  # type: ignore[union-attr]
        return True
    if seg[0].kind == "op" and not _is_sign(seg, 0):
        return True
    if prev is not None and prev.kind == "word" and prev.text in _OP_WORDS:
        return True
    bare = len(seg) == 1 or (len(seg) == 2 and _is_sign(seg, 0) and seg[1].kind == "num")
    return bare and run.after_text


def _cut_at_end(seg: list[_Tok], run: _Run) -> bool:
    """The last side continues into words ("= 5A", "= 2x-175", "= 2 times …")."""
    nxt = run.nxt
    if nxt is None or nxt.kind != "word":
        return False
    return nxt.start == seg[-1].end or nxt.text in _OP_WORDS_AFTER


def _complete(seg: list[_Tok], first: bool, last: bool, run: _Run) -> bool:
    """Whether a side of an ``=`` chain is a whole expression (not cut from a formula with words)."""
    if not seg or not _balanced(seg):
        return False
    if seg[-1].kind == "op" or seg[0].kind == "rp" or seg[-1].kind == "lp":
        return False  # "… = 2 * x", ") * 2 = …"
    if first and _cut_at_start(seg, run):
        return False
    return not (last and _cut_at_end(seg, run))


def _runs(toks: list[_Tok]) -> list[_Run]:
    """Maximal runs of math tokens (numbers, operators, parentheses, =) with their neighbours."""
    runs: list[_Run] = []
    start = None
    for j, t in enumerate([*toks, None]):
        is_math = t is not None and (t.kind in _MATH or t.kind == "eq")
        if is_math and start is None:
            start = j
        elif not is_math and start is not None:
            prev = toks[start - 1] if start else None
            runs.append(_Run(toks[start:j], prev, t, start > 0))
            start = None
    return runs


def _split_chain(run: _Run) -> list[list[_Tok]]:
    segs: list[list[_Tok]] = [[]]
    for t in run.toks:
        if t.kind == "eq":
            segs.append([])
        else:
            segs[-1].append(t)
    return segs


class _Statement(NamedTuple):
    """One arithmetic statement: where it starts, as written, whether it holds, its operands and results."""

    start: int
    text: str
    holds: bool | None  # None: a verbal operation without a stated result ("we add 3 and 4"), nothing to check
    operands: tuple[str, ...]  # the numbers (as written) the statement computes from
    results: tuple[Fraction, ...]  # the values it establishes


def _readings(text: str) -> set[Fraction]:
    """A written number's values (``20%`` is 0.2 and 20, ``-1/6`` is -1/6); unparsable text has none."""
    toks = _tokens(text)
    return {v for percent in (True, False) if (v := _value(toks, percent)) is not None}


def _side_values(side: _Side) -> tuple[Fraction, ...]:
    return tuple(v for percent in (True, False) if (v := _value(side.toks, percent)) is not None)


def _nums(toks: Sequence[_Tok]) -> tuple[str, ...]:
    return tuple(t.text for t in toks if t.kind == "num")


def _chain_statements(line: str, offset: list[tuple[int, int]]) -> list[_Statement]:
    out = []
    for run in _runs(_tokens(line)):
        if not any(t.kind == "eq" for t in run.toks):
            continue
        segs = _split_chain(run)
        sides = [
            _Side(seg, line[seg[0].start : seg[-1].end])
            for j, seg in enumerate(segs)
            if _complete(seg, j == 0, j == len(segs) - 1, run) and _value(seg, True) is not None
        ]
        for left, right in itertools.pairwise(sides):
            start = _raw_position(left.toks[0].start, offset)
            out.append(_Statement(start, f"{left.text} = {right.text}", _holds(left, right), _nums(left.toks), _side_values(right)))
    return out


def _annotation_statements(line: str) -> list[_Statement]:
    out = []
    for m in _ANNOTATION.finditer(line):
        expr, result = _Side(_tokens(m.group(1)), m.group(1)), _Side(_tokens(m.group(2).strip()), m.group(2))
        if _value(expr.toks, True) is None or _value(result.toks, True) is None:
            continue  # not plain arithmetic: nothing to check
        holds = _holds(expr, result)
        out.append(_Statement(m.start(), f"<<{m.group(1)}={m.group(2)}>>", holds, _nums(expr.toks), _side_values(result)))
    return out


def _raw_position(pos: int, removed: list[tuple[int, int]]) -> int:
    """A position in a line with the annotations removed, mapped back to the line as written."""
    for start, length in removed:
        if start <= pos:
            pos += length
    return pos


# Verbal statements (the MAWPS / ASDiv / SVAMP reference rationales: "We subtract 29 from 42 and get 13.").
# An operand is a number, optionally followed by up to three unit words ("6 weeks", "4 red apples") that
# are not a word of the grammar; a result is a number after "(and|to|, which) get/gets/got/is/equals/gives/=".
_NUMBER = rf"-?(?:{_NUM})(?:/\d+)?(?![.,/]?\d)"  # also -24 and 5/6
_GRAMMAR_WORDS = (
    r"(?:to|from|by|and|with|into|get|gets|got|getting|give|gives|giving|gave|is|are|was|were|equal|equals|make|makes"
    r"|which|that|then|we|you|so|plus|minus|times|divided|multiplied|over|for|of|the|results?|sum|difference|product)"
)
_UNITS = rf"(?:[ \t]+(?!{_GRAMMAR_WORDS}\b)[A-Za-z][A-Za-z'-]*){{0,3}}"
_RESULT = (
    r"(?:[ \t]*,?[ \t]*(?:(?:and|to|we|then|you|which|that|this|it|will|would)[ \t]+)*"
    r"(?:get|gets|got|getting|obtain|obtains|gives|give|giving|is|equals|makes|results[ \t]+in|=)"
    rf"[ \t]*(?P<c>{_NUMBER})(?![ \t]*[-+*/×÷^(=])"  # a number, not the start of an expression ("is 24-4=20")
    rf"(?:[ \t]+(?:with[ \t]+)?(?:a[ \t]+)?remainder(?:[ \t]+of)?[ \t]+(?P<r>{_NUMBER}))?)?"
)
_VERBAL: tuple[tuple[re.Pattern[str], str, bool], ...] = tuple(
    (re.compile(pattern.format(A=rf"(?P<a>{_NUMBER}){_UNITS}", B=rf"(?P<b>{_NUMBER}){_UNITS}") + _RESULT, re.I), op, swap)
    for pattern, op, swap in (
        (r"\b(?:add|adds|added|adding)[ \t]+{A}[ \t]+(?:to|and|with|plus)[ \t]+{B}", "+", False),
        (r"\b(?:subtract|subtracts|subtracted|subtracting|take[ \t]+away|takes[ \t]+away)[ \t]+{A}[ \t]+from[ \t]+{B}", "-", True),
        (r"\b(?:multiply|multiplies|multiplied|multiplying)[ \t]+{A}[ \t]+(?:by|and|with|times)[ \t]+{B}", "*", False),
        (r"\b(?:divide|divides|divided|dividing)[ \t]+{A}[ \t]+by[ \t]+{B}", "/", False),
        (r"\bsum[ \t]+of[ \t]+{A}[ \t]+and[ \t]+{B}", "+", False),
        (r"\bproduct[ \t]+of[ \t]+{A}[ \t]+and[ \t]+{B}", "*", False),
        (r"\bquotient[ \t]+of[ \t]+{A}[ \t]+(?:and|by)[ \t]+{B}", "/", False),
        (r"(?<![\w.,/$])(?<!\$ ){A}[ \t]+plus[ \t]+{B}(?=[ \t]*,?[ \t]*(?:(?:is|equals|makes|gives)\b|=))", "+", False),
        (r"(?<![\w.,/$])(?<!\$ ){A}[ \t]+minus[ \t]+{B}(?=[ \t]*,?[ \t]*(?:(?:is|equals|makes|gives)\b|=))", "-", False),
        (r"(?<![\w.,/$])(?<!\$ ){A}[ \t]+(?:times|multiplied[ \t]+by)[ \t]+{B}(?=[ \t]*,?[ \t]*(?:(?:is|equals|makes|gives)\b|=))", "*", False),
        (r"(?<![\w.,/$])(?<!\$ ){A}[ \t]+divided[ \t]+by[ \t]+{B}(?=[ \t]*,?[ \t]*(?:(?:is|equals|makes|gives)\b|=))", "/", False),
    )
)


def _verbal_statements(line: str) -> list[_Statement]:
    found: list[_Statement] = []
    taken: list[tuple[int, int]] = []
    for pattern, op, swap in _VERBAL:
        for m in pattern.finditer(line):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            a, b = (m.group("b"), m.group("a")) if swap else (m.group("a"), m.group("b"))
            expr = _Side(_tokens(f"({a}) {op} ({b})"), f"{a} {op} {b}")
            values = _side_values(expr)
            if not values:
                continue  # division by zero or not a number: nothing to check
            taken.append((m.start(), m.end()))
            text = m.group().strip()
            if m.group("c") is None:
                found.append(_Statement(m.start(), text, None, (a, b), values))
            elif m.group("r") is not None:  # "divide 26 by 3 and get 8 remainder 2"
                q, r = _readings(m.group("c")), _readings(m.group("r"))
                x, y = _value(_tokens(a), True), _value(_tokens(b), True)
                holds = op == "/" and x is not None and y is not None and any(
                    qv.denominator == 1 and 0 <= rv < abs(y) and qv * y + rv == x for qv in q for rv in r
                )
                found.append(_Statement(m.start(), text, holds, (a, b), tuple(q | r)))
            else:
                result = _Side(_tokens(m.group("c")), m.group("c"))
                found.append(_Statement(m.start(), text, _holds(expr, result), (a, b), _side_values(result)))
    return found


def _statements(text: str) -> list[_Statement]:
    """Every statement of ``text``, in reading order (see :func:`check_statements`)."""
    out: list[_Statement] = []
    base = 0
    for raw in text.splitlines(keepends=True):
        found = _verbal_statements(raw)
        if "=" in raw:
            found += _annotation_statements(raw)
            removed = [(m.start(), m.end() - m.start()) for m in _ANNOTATION.finditer(raw)]
            found += _chain_statements(_ANNOTATION.sub("", raw), removed)
        out += [s._replace(start=s.start + base) for s in sorted(found, key=lambda s: s.start)]
        base += len(raw)
    return out


def check_statements(text: str) -> tuple[list[str], int]:
    """The false arithmetic statements of ``text`` and how many statements were checked.

    A statement is a chain ``e1 = e2 (= e3 …)`` of expressions over numbers (``1,000``, ``2.5``,
    ``.5``, ``$5``, ``20%``), ``+ - − – * x × / ÷ ^`` and parentheses, or a GSM8K calculator
    annotation ``<<expr=value>>`` (checked on its own, then removed, so ``48/2 = <<48/2=24>>24``
    reads ``48/2 = 24``).  Consecutive checkable sides of a chain must be equal, exactly (fractions)
    or within the rounding of a bare number's written precision (``100/3 = 33.33``) or 1e-6
    relative.  ``%`` reads as /100, or, if that fails, as a decoration (``0.2 * 100 = 20%``).

    A *verbal* statement (word problems: MAWPS, ASDiv, SVAMP) is checked the same way, as the
    expression it names (case-insensitive; ``A``, ``B`` numbers, each optionally followed by up to
    three unit words, "6 weeks"):

    - ``add A to|and|with|plus B`` (A + B), ``subtract|take away A from B`` (B - A),
      ``multiply A by|and|with|times B`` (A * B), ``divide A by B`` (A / B), any inflection
      (adds, added, adding …), and ``the sum|product of A and B``, ``the quotient of A and|by B``;
    - ``A plus|minus|times|multiplied by|divided by B`` followed by ``is|equals|makes|gives|=``;

    with its result ``C`` after ``get|gets|got|obtain|gives|giving|is|equals|makes|results in|=``,
    optionally led by ``and|to|we|then|which|…`` ("and get 62", "to get 42", ", which is 12").  A
    verbal operation without a result is not checked (and not counted).

    Not checked (never a rejection): a side next to a variable or a word (``S + 143 = 200 - 16``
    checks only ``200 - 16 = 184`` when followed by ``= 184``; ``half of 10 = 5``; ``2 * x = 12``),
    unbalanced parentheses, anything that does not parse.
    """
    stated = [s for s in _statements(text) if s.holds is not None]
    return [s.text for s in stated if not s.holds], len(stated)


# Grounding (word problems): the numbers a rationale computes with come from the question.
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_H, _Q = Fraction(1, 2), Fraction(1, 4)
# Words that stand for the numbers a rationale computes with: "twice" is 2, "a dozen" 12, "6 quarters" 6 * 25 cents …
_IMPLIED: dict[str, tuple[Fraction | int, ...]] = {
    "double": (2,), "twice": (2,), "triple": (3,), "thrice": (3,), "half": (2, _H), "halves": (2, _H),
    "third": (3, Fraction(1, 3)), "thirds": (3, Fraction(1, 3)), "quarter": (4, _Q, 25), "quarters": (4, _Q, 25),
    "dozen": (12,), "dozens": (12,), "hundred": (100,), "thousand": (1000,), "percent": (100, Fraction(1, 100)),
    "pair": (2,), "pairs": (2,), "nickel": (5, Fraction(1, 20)), "nickels": (5, Fraction(1, 20)),
    "dime": (10, Fraction(1, 10)), "dimes": (10, Fraction(1, 10)), "penny": (1, Fraction(1, 100)),
    "pennies": (1, Fraction(1, 100)), "cent": (100, Fraction(1, 100)), "cents": (100, Fraction(1, 100)),
}
_WORD = re.compile(r"[a-z]+")
_GLUED_FRACTION = re.compile(r"(?<![\d.])\d+/\d+(?![\d.])")
# Numbers any rationale may bring in without the question naming them: the units of counting and measure.
_CONSTANTS = frozenset(Fraction(n) for n in (1, 2, 3, 4, 7, 10, 12, 24, 30, 52, 60, 100, 365, 1000))


def _question_numbers(question: str) -> set[Fraction]:
    """The values a question states: its numbers (``20%`` as 20 and 0.2, ``11/3``), number words and :data:`_IMPLIED`."""
    known: set[Fraction] = set()
    for t in _tokens(question):
        if t.kind == "num":
            known |= _readings(t.text)
    for m in _GLUED_FRACTION.finditer(question):
        known |= _readings(m.group())
    if "%" in question:
        known |= {Fraction(100), Fraction(1, 100)}
    words = _WORD.findall(question.lower())
    for w in words:
        if w in _NUMBER_WORDS:
            known.add(Fraction(_NUMBER_WORDS[w]))
        known.update(Fraction(v) for v in _IMPLIED.get(w, ()))
    for tens, unit in itertools.pairwise(words):  # "twenty five", "twenty-five"
        if _NUMBER_WORDS.get(tens, 0) >= 20 and 0 < _NUMBER_WORDS.get(unit, 0) < 10:
            known.add(Fraction(_NUMBER_WORDS[tens] + _NUMBER_WORDS[unit]))
    return known | {-v for v in known}  # "the product of -2 and -15"


def ungrounded_operand(text: str, question: str) -> str | None:
    """The first operand of ``text``'s statements that comes from nowhere, as ``"13 in subtract 2 from 13"``; None if none.

    Every operand of every statement (:func:`check_statements`, including verbal operations without a
    result) must be *grounded*: a number of the question (``20%`` also 0.2 and 20, ``11/3``), a number
    word of it ("nine", "twenty-five") or a value a word of it implies ("twice" 2, "dozen" 12,
    "quarters" 4, 1/4 and 25, "dimes" 10 and 0.1, "percent" or ``%`` 100 and 0.01 …), a unit constant
    (1, 2, 3, 4, 7, 10, 12, 24, 30, 52, 60, 100, 365, 1000), or a result of an earlier statement.
    """
    known = _question_numbers(question) | _CONSTANTS
    for s in _statements(text):
        for o in s.operands:
            if not _readings(o) & known:
                return f"{o} in {s.text}"
        known.update(s.results)
    return None


def verify_number(
    text: str, gold: str, *, hint: str | None = None, require_statement: bool = True, question: str | None = None
) -> str | None:
    """Check a number-task rationale (GSM8K, MAWPS, ASDiv, SVAMP); None: it passes.

    Rules: (1) the hint (``hint``, e.g. ``"(72)"``) is not copied into the rationale; (2) every
    arithmetic statement, symbolic or verbal, evaluates correctly (:func:`check_statements`); (3) with
    ``require_statement``, there is at least one checked statement (a bare ``#### 72`` is a hint copy,
    not a rationale); (3b) with ``question``, every operand is grounded in it
    (:func:`ungrounded_operand`); (4) the final answer (:func:`thoughtsource.extract.extract`, strict mode:
    ``#### N``, "the answer is N") equals ``gold`` (relative tolerance 1e-4, as in evaluation).
    """
    if hint and hint in text:
        return f"copies the hint {hint}"
    errors, count = check_statements(text)
    if errors:
        return f"false statement: {errors[0]}"
    if require_statement and count == 0:
        return "no arithmetic statement"
    if question is not None and (where := ungrounded_operand(text, question)):
        return f"number not from the question: {where}"
    value = extract(text, "number", mode="strict", source="cot").value
    if value is None:
        return "no final answer"
    if not is_correct(value, "number", gold_value("number", [gold])):
        return f"final answer {value:g} is not the gold answer {gold}"
    return None


def verify_calc(text: str, gold: str, *, hint: str | None = None, question: str | None = None) -> str | None:
    """Check a calculator-format rationale (:mod:`thoughtsource.star.calculator`); None: it passes.

    Rules: (1) the hint is not copied; (2) there is at least one annotation ``<<expr=result>>``, none is left open and
    no ``<<`` or ``>>`` stands outside one;
    (3) every annotation's ``result`` is what the calculator prints for ``expr`` (a refused expression, or a result
    the model wrote itself, is rejected); (4) every other arithmetic statement holds (:func:`check_statements`);
    (5) with ``question``, every operand of every annotation is grounded: a number of the question, a number word or
    implied value of it, a unit constant (as :func:`ungrounded_operand`), or the result of an earlier annotation; a
    quotient of two numbers ``n/d`` (a fraction as the calculator prints it) is grounded as one value or as two;
    (6) the *executed* answer, the last annotation's result, equals ``gold`` and the stated final answer
    (strict extraction: "The answer is N.", ``#### N``; relative tolerance 1e-4, as in evaluation).
    """
    if hint and hint in text:
        return f"copies the hint {hint}"
    found = find_annotations(text)
    if not found:
        return "no calculator operation"
    if open_expression(text) is not None:
        return "an operation is left open (<< without >>)"
    if text.count("<<") != len(found) or text.count(">>") != len(found):
        return "a malformed operation (<< or >> outside <<expr=result>>)"
    known = None if question is None else _question_numbers(question) | _CONSTANTS
    value = Fraction(0)
    for a in found:
        shown = f"<<{a.expr}={a.result}>>"
        computed = evaluate(a.expr)
        if computed is None:
            return f"the calculator refuses {shown}"
        if a.result.strip() != number_text(computed):
            return f"{shown} is not the calculator's result {number_text(computed)}"
        if known is not None:
            for leaf in leaf_operands(a.expr) or []:
                whole = leaf[0] / leaf[1] if isinstance(leaf, tuple) else leaf
                if whole not in known and not (isinstance(leaf, tuple) and {leaf[0], leaf[1]} <= known):
                    written = "/".join(map(number_text, leaf)) if isinstance(leaf, tuple) else number_text(leaf)
                    return f"number not from the question: {written} in {shown}"
            known.add(computed)
        value = computed
    errors, _ = check_statements(text)
    if errors:
        return f"false statement: {errors[0]}"
    stated = extract(text, "number", mode="strict", source="cot").value
    if stated is None:
        return "no final answer"
    if not is_correct(float(value), "number", stated):  # at the precision the answer is stated with ("4.33" for 13/3)
        return f"the final answer {stated:g} is not the executed answer {number_text(value)}"
    if not is_correct(float(value), "number", gold_value("number", [gold])):
        return f"the executed answer {number_text(value)} is not the gold answer {gold}"
    return None


# ---------------------------------------------------------------------------------------------
# Multiple choice (CommonsenseQA) and hint markers
# ---------------------------------------------------------------------------------------------

_CORRECT_MARKER = re.compile(r"\(\s*correct\s*\)|\b(?-i:CORRECT)\b", re.I)
_ANSWER_IS = re.compile(r"\banswer\s+is\b(?!\s+not\b)", re.I)
_SENTENCE_END = re.compile(r"\.(?=\s|$)|[!?\n]")
_LETTER_REF = re.compile(r"\(\s*([A-Za-z])\s*\)")
_NORM = re.compile(r"[^a-z0-9 ]+")


def _norm(s: str) -> str:
    return " ".join(_NORM.sub(" ", s.lower()).split())


def verify_no_hint(text: str, markers: Sequence[str]) -> str | None:
    """None unless ``text`` contains one of the hint ``markers`` (case-insensitive)."""
    low = text.lower()
    for marker in markers:
        if marker and marker.lower() in low:
            return f"copies the hint {marker}"
    return None


def verify_bool(text: str, answer: str) -> str | None:
    """A bool rationale must not copy the hint ``(yes)``/``(no)`` (either, any case)."""
    return verify_no_hint(text, ("(yes)", "(no)", f"({answer})"))


def _answer_spans(text: str) -> list[str]:
    """The sentence after each "answer is" (not "answer is not"), in order."""
    spans = []
    for m in _ANSWER_IS.finditer(text):
        rest = text[m.end() : m.end() + 300]
        end = _SENTENCE_END.search(rest)
        spans.append(rest[: end.start()] if end else rest)
    return spans


def _named_choices(span: str, choices: Sequence[str]) -> tuple[set[int], set[int]]:
    """(letters, texts): indices of the choices a span names by letter ``(c)`` and by their text.

    A choice's text counts as a whole-word match of its normalized text, except inside the text of
    a longer named choice ("money" inside "money bank").
    """
    letters = {i for m in _LETTER_REF.finditer(span) if 0 <= (i := ord(m.group(1).lower()) - 97) < len(choices)}
    padded = f" {_norm(_LETTER_REF.sub(' ', span))} "
    hits = []
    for i, c in enumerate(choices):
        n = _norm(c)
        if n and (pos := padded.find(f" {n} ")) >= 0:
            hits.append((pos, pos + len(n), i))
    texts = {i for s, e, i in hits if not any(j != i and s2 <= s and e <= e2 and (e2 - s2) > (e - s) for s2, e2, j in hits)}
    return letters, texts


def verify_choice(text: str, choices: Sequence[str], gold: str) -> str | None:
    """Check a multiple-choice rationale (CommonsenseQA); None: it passes.

    Rules:

    1. the hint marker is not copied: no ``(CORRECT)`` in any case or spacing, no upper-case word
       ``CORRECT`` (the word "correct" in running text is fine);
    2. an *answer statement* is the sentence after "answer is" (not "answer is not"; "the answer
       must be …", which the authors' rationales use to describe the answer, is not one).  There is
       at least one; the last one is the final answer;
    3. the final answer names exactly one choice: its letters ``(x)`` name at most one choice, the
       choice texts it contains (whole words, a text inside a longer named choice's text ignored)
       name at most one, and when it has both they are the same choice ("blotter (e)" with
       ``(e) blotter``; "inkwell (e)" is rejected);
    4. that choice is ``gold``;
    5. no earlier answer statement names another choice (by letter or text).  Mentioning other
       choices elsewhere, e.g. to rule them out, is allowed.
    """
    marker = _CORRECT_MARKER.search(text)
    if marker:
        return f"copies the hint marker {marker.group()}"
    spans = _answer_spans(text)
    if not spans:
        return "no 'the answer is' statement"
    named = [_named_choices(s, choices) for s in spans]
    letters, texts = named[-1]
    if len(letters) > 1 or len(texts) > 1:
        return f"the final answer names several choices: {spans[-1].strip()!r}"
    if letters and texts and letters != texts:
        (li,), (ti,) = letters, texts
        return f"the final answer's text {choices[ti]!r} and letter ({chr(97 + li)}) name different choices"
    final = letters or texts
    if not final:
        return f"the final answer names no choice: {spans[-1].strip()!r}"
    (fi,) = final
    if _norm(choices[fi]) != _norm(gold):
        return f"the final answer is {choices[fi]!r}, not the gold {gold!r}"
    for span, (ls, ts) in zip(spans[:-1], named[:-1], strict=True):
        other = (ls | ts) - {fi}
        if other:
            return f"an earlier answer statement names {choices[min(other)]!r}: {span.strip()!r}"
    return None
