"""Calculator-executed rationales (GSM8K's ``<<48/2=24>>``, Cobbe et al. 2021): the model writes an operation, the
calculator writes its result.

The format.  A rationale holds *annotations* ``<<expr=result>>``: the model writes ``<<48/2=``, the calculator
supplies ``24>>`` and decoding goes on.  The word problems' gold rationales (:func:`expression_rationale`) are one
annotation a line, innermost operation first, then the answer line::

    <<36-12=24>>
    <<24/6=4>>
    The answer is 4.

GSM8K's keep their prose around the annotations (``Natalia sold 48/2 = <<48/2=24>>24 clips in May.``).

The calculator (:func:`evaluate`) reads ``+ - * /``, unary signs, parentheses and decimal numbers (``12``, ``2.5``, ``.5``),
exactly (:class:`~fractions.Fraction`), and nothing else: no names, no ``**`` or ``^``, no ``%``, no implicit
products, no glued mixed numbers.  It refuses (None) an expression longer than :data:`MAX_CHARS` characters,
nested deeper than :data:`MAX_DEPTH`, with a number of more than :data:`MAX_DIGITS` digits, a division by zero,
and a result whose numerator or denominator has more than :data:`MAX_DIGITS` digits.  It never calls ``eval``.  A
result is printed by :func:`number_text`: integers without ``.0`` (``24``), terminating decimals as decimals
(``2.5``), other values as a fraction (``23/3``); an operand that is a fraction or negative is written in
parentheses (``(23/3)*3``), as :func:`operand_text` does.

Decoding (:class:`CalculatorBackend`): one text-level loop over any backend's ``complete(requests)``, so the
transformers engine (batched, CPU or GPU), vLLM and an OpenAI-compatible server (``serve-model``: stop sequence,
then the continuation asked for with prompt + text so far) give the same texts.  Each round asks every unfinished
row of the batch for a continuation with the request's stop strings and ``"="``.  A row that stopped at ``"="``
right after an open ``<<expr`` gets ``=result>>`` (or only ``=`` when the calculator refuses ``expr``) and goes on
in the next round; an ``"="`` outside an open ``<<`` is kept and the row goes on; a row that stopped otherwise (an
end token, a task stop string, its token budget) is done.  Which stop string fired comes from the completion's
``stop_reason`` (the transformers backend, ``serve-model`` and vLLM report it); a server that reports none is read
as having stopped at ``"="`` only where a ``<<`` is open.  The rounds are bounded (``max_rounds``), and the tokens
the model generates over all rounds by the request's ``max_tokens``.  The calculator is keyed in the completion
store's identity (``RunModels.identity``), so a run with it never reads completions made without it.

Cost: each round re-reads prompt + text so far (an engine with a prefix cache reuses the few-shot prefix); an engine
that cuts stop strings only after decoding (transformers' continuous batching, the CUDA default) decodes each round's
whole budget: the same texts, more tokens decoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, NamedTuple

from ..backends import Backend, Completion, Request

__all__ = [
    "CALCULATOR_VERSION",
    "Annotation",
    "CalculatorBackend",
    "evaluate",
    "expression_rationale",
    "find_annotations",
    "gold_rationale",
    "leaf_operands",
    "number_text",
    "open_expression",
    "operand_text",
]

#: bumped when the calculator's results or the decoding loop change (keys the completion store)
CALCULATOR_VERSION = 1
MAX_CHARS = 200
MAX_DEPTH = 16
MAX_DIGITS = 20
OPEN, CLOSE, EQUALS = "<<", ">>", "="

_TOKEN = re.compile(r"[ \t]*(?:(?P<num>[0-9]+(?:\.[0-9]+)?|\.[0-9]+)|(?P<op>[-+*/()]))")  # ASCII digits only


class _Refused(Exception):
    """Not an expression the calculator computes."""


def _tokens(expr: str) -> list[str]:
    out, pos = [], 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            if expr[pos:].strip(" \t"):
                raise _Refused
            break
        out.append(m.group("num") or m.group("op"))
        pos = m.end()
    return out


class _Parser:
    """expr := term (('+'|'-') term)* ; term := factor (('*'|'/') factor)* ; factor := ('-'|'+') factor | number | '(' expr ')'."""

    def __init__(self, toks: list[str]) -> None:
        self.toks, self.i, self.depth = toks, 0, 0
        self.leaves: list[Fraction | tuple[Fraction, Fraction]] = []

    def parse(self) -> Fraction:
        if not self.toks:
            raise _Refused
        v = self._expr()
        if self.i != len(self.toks):
            raise _Refused
        return v

    def _peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def _expr(self) -> Fraction:
        v = self._term()
        while (t := self._peek()) in ("+", "-"):
            self.i += 1
            rhs = self._term()
            v = v + rhs if t == "+" else v - rhs
            _check_size(v)
        return v

    def _term(self) -> Fraction:
        start = len(self.leaves)
        v = self._factor()
        while (t := self._peek()) in ("*", "/"):
            self.i += 1
            before = len(self.leaves)
            rhs = self._factor()
            if t == "/":
                if rhs == 0:
                    raise _Refused
                # "n/d" of two plain numbers is also one operand: a fraction as the calculator prints it
                if before == start + 1 == len(self.leaves) - 1 and all(isinstance(x, Fraction) for x in self.leaves[start:]):
                    a, b = self.leaves[start], self.leaves[before]
                    assert isinstance(a, Fraction) and isinstance(b, Fraction)
                    self.leaves[start:] = [(a, b)]
            v = v * rhs if t == "*" else v / rhs
            _check_size(v)
        return v

    def _factor(self) -> Fraction:
        t = self._peek()
        if t is None:
            raise _Refused
        self.i += 1
        if t in ("-", "+"):
            before = len(self.leaves)
            v = self._factor()
            if t == "-" and len(self.leaves) == before + 1 and isinstance(self.leaves[-1], Fraction):
                self.leaves[-1] = -self.leaves[-1]  # "(-15)": the operand is -15
            return -v if t == "-" else v
        if t == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _Refused
            v = self._expr()
            if self._peek() != ")":
                raise _Refused
            self.i += 1
            self.depth -= 1
            return v
        if t[0] in "0123456789.":
            if len(t) > MAX_DIGITS + 1:
                raise _Refused
            v = Fraction(t)
            self.leaves.append(v)
            return v
        raise _Refused


def _check_size(v: Fraction) -> None:
    if len(str(abs(v.numerator))) > MAX_DIGITS or len(str(v.denominator)) > MAX_DIGITS:
        raise _Refused


def _parsed(expr: str) -> tuple[Fraction, list[Fraction | tuple[Fraction, Fraction]]] | None:
    """(value, operands) of an expression, or None: refused."""
    if len(expr) > MAX_CHARS:
        return None
    try:
        p = _Parser(_tokens(expr))
        return p.parse(), p.leaves
    except (_Refused, RecursionError):
        return None


def evaluate(expr: str) -> Fraction | None:
    """The exact value of an arithmetic expression (see the module docstring); None: refused."""
    parsed = _parsed(expr)
    return None if parsed is None else parsed[0]


def leaf_operands(expr: str) -> list[Fraction | tuple[Fraction, Fraction]] | None:
    """The operands ``expr`` computes with, in order: each number, and ``(n, d)`` for a quotient of two numbers ``n/d``
    (one operand n/d, or the two operands n and d: the grounding check accepts either reading); None: refused."""
    parsed = _parsed(expr)
    return None if parsed is None else parsed[1]


def number_text(v: Fraction) -> str:
    """A result as the calculator prints it: ``24``, ``-3``, ``2.5``, ``0.125``, ``23/3``."""
    if v.denominator == 1:
        return str(v.numerator)
    d, twos, fives = v.denominator, 0, 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    if d != 1:
        return f"{v.numerator}/{v.denominator}"
    places = max(twos, fives)
    scaled = abs(v.numerator) * 10**places // v.denominator
    digits = str(scaled).rjust(places + 1, "0")
    return f"{'-' if v < 0 else ''}{digits[:-places]}.{digits[-places:]}"


def operand_text(v: Fraction) -> str:
    """A value as an operand of an expression: in parentheses when it is a fraction or negative (``(23/3)``, ``(-3)``)."""
    s = number_text(v)
    return f"({s})" if "/" in s or v < 0 else s


class Annotation(NamedTuple):
    """One ``<<expr=result>>`` of a rationale: the expression, the result as written, where it starts."""

    expr: str
    result: str
    start: int


_ANNOTATION = re.compile(r"<<([^<>=]*)=([^<>]*)>>")


def find_annotations(text: str) -> list[Annotation]:
    """Every closed ``<<expr=result>>`` of ``text``, in order."""
    return [Annotation(m.group(1), m.group(2), m.start()) for m in _ANNOTATION.finditer(text)]


def open_expression(text: str) -> str | None:
    """The expression of an annotation ``text`` ends inside (``"… <<48/2"`` → ``"48/2"``); None when no ``<<`` is open."""
    start = text.rfind(OPEN)
    if start < 0 or CLOSE in text[start:]:
        return None
    return text[start + len(OPEN):]


# --------------------------------------------------------------------------- gold rationales
def expression_rationale(expr: Any) -> tuple[list[str], Fraction]:
    """An equation tree (:class:`thoughtsource.datasets._parse.Op` nodes over Fractions) as annotation lines, innermost
    operation first (``( 36 - 12 ) / 6`` → ``<<36-12=24>>``, ``<<24/6=4>>``), and its value.  A bare number: no line."""
    lines: list[str] = []

    def walk(node: Any) -> Fraction:
        if isinstance(node, Fraction):
            return node
        a, b = walk(node.left), walk(node.right)
        text = f"{operand_text(a)}{node.op}{operand_text(b)}"
        value = evaluate(text)
        if value is None:
            raise ValueError(f"the calculator refuses {text!r}")
        lines.append(f"<<{text}={number_text(value)}>>")
        return value

    return lines, walk(expr)


def gold_rationale(equation: Any) -> tuple[str, Fraction | None]:
    """The calculator-format rationale of a dataset's equation (:func:`thoughtsource.datasets.equations`) and the value
    it executes to (the last operation's; None where the calculator refuses an operation, or there is none).

    An equation tree: :func:`expression_rationale`'s lines.  GSM8K's solution lines: as written, each annotation's
    result replaced by the calculator's (``<<10/3=3.33>>`` becomes ``<<10/3=10/3>>``; the prose after it stays)."""
    if not isinstance(equation, str):
        try:
            lines, value = expression_rationale(equation)
        except ValueError:
            return "", None
        return "\n".join(lines), value if lines else None
    values: list[Fraction] = []

    def execute(m: re.Match[str]) -> str:
        v = evaluate(m.group(1))
        if v is None:
            raise _Refused
        values.append(v)
        return f"<<{m.group(1)}={number_text(v)}>>"

    try:
        text = _ANNOTATION.sub(execute, equation)
    except _Refused:
        return equation, None
    return text, values[-1] if values else None


# --------------------------------------------------------------------------- decoding
_UNKNOWN = object()


def stop_reason(c: Completion) -> Any:
    """The stop string a completion stopped at (None: an end token or its length), or ``_UNKNOWN`` when the engine
    does not say (the transformers backend puts ``stop_reason`` in ``raw``; vLLM and serve-model in the choice)."""
    if c.finish_reason != "stop":
        return None
    raw = c.raw or {}
    if "stop_reason" in raw:
        return raw["stop_reason"]
    choices = raw.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict) and "stop_reason" in choices[0]:
        return choices[0]["stop_reason"]
    return _UNKNOWN


@dataclass
class _Row:
    request: Request
    text: str = ""
    prompt_tokens: int = 0
    tokens: int = 0
    rounds: int = 0
    results: int = 0
    refused: int = 0
    finish: str = ""
    done: bool = False
    latency_s: float = 0.0


class CalculatorBackend:
    """Any backend with the calculator in its decoding loop (see the module docstring)."""

    def __init__(self, inner: Backend, *, max_rounds: int = 24) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_rounds = max_rounds

    def cache_identity(self) -> dict[str, Any]:
        return {**self.inner.cache_identity(), "calculator": CALCULATOR_VERSION, "max_rounds": self.max_rounds}

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _round_request(self, row: _Row) -> Request:
        r = row.request
        stop = tuple(r.stop) if EQUALS in r.stop else (*r.stop, EQUALS)
        seed = r.seed if r.seed is None or row.rounds == 0 else r.seed + 1_000_003 * row.rounds
        return replace(r, prompt=r.prompt + row.text, max_tokens=r.max_tokens - row.tokens, stop=stop, seed=seed)

    def _step(self, row: _Row, c: Completion) -> None:
        """One round's completion of a row: its text added, then the calculator's result, or the row is done."""
        if row.rounds == 0:
            row.prompt_tokens = c.prompt_tokens
        row.rounds += 1
        row.text += c.text
        row.tokens += c.completion_tokens
        row.latency_s += c.latency_s
        row.finish = c.finish_reason
        reason = stop_reason(c)
        expr = open_expression(row.text)
        if reason is _UNKNOWN:  # the server does not say which stop string fired: "=" only inside an annotation
            reason = EQUALS if expr is not None else None
        if reason != EQUALS:
            row.done = True
            return
        row.text += EQUALS
        if expr is not None:
            value = evaluate(expr)
            if value is None:
                row.refused += 1
            else:
                row.text += number_text(value) + CLOSE
                row.results += 1
        if row.tokens >= row.request.max_tokens:
            row.done, row.finish = True, "length"
        elif row.rounds >= self.max_rounds:
            row.done, row.finish = True, "rounds"

    async def complete(self, requests: list[Request]) -> list[Completion]:
        for r in requests:
            if r.messages is not None or r.prompt_ids is not None:
                raise ValueError("the calculator continues plain-text prompts, not chat messages or token ids")
        rows = [_Row(r) for r in requests]
        while live := [row for row in rows if not row.done]:
            outs = await self.inner.complete([self._round_request(row) for row in live])
            for row, c in zip(live, outs, strict=True):
                self._step(row, c)
        return [Completion(text=row.text, prompt_tokens=row.prompt_tokens, completion_tokens=row.tokens,
                           finish_reason=row.finish, latency_s=row.latency_s,
                           raw={"calculator": {"rounds": row.rounds, "results": row.results, "refused": row.refused}})
                for row in rows]
