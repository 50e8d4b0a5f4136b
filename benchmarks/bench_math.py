"""Benchmark: scoring LaTeX answers of MATH-500, ours (the ``math`` answer type) against math-verify called directly.

A corpus of answer pairs is built from the 500 gold answers of MATH-500 (``../shared/data/math500/test.jsonl``), one
category per way an answer can be written differently (equivalent: the verdict must be right) or be a different
answer (not equivalent: the verdict must be wrong):

- ``dfrac``: ``\\frac`` written ``\\dfrac`` (and back); equivalent
- ``decimal-fraction``: ``\\frac{1}{2}`` as ``0.5``, an integer n as ``\\frac{2n}{2}``; equivalent
- ``degrees``: ``90^\\circ`` as ``90``, a geometry integer n as ``n^\\circ``; equivalent
- ``text``: ``\\text{Evelyn}`` as ``Evelyn``, ``\\text{(C)}`` as ``(C)``; equivalent
- ``thousands``: ``10,\\!080`` as ``10080``; equivalent
- ``reordered-set``: a list of solutions (``1,-2``) reversed; equivalent
- ``interval-spacing``: an interval with other spacing and ``\\left``/``\\right``; equivalent
- ``reordered-tuple``: an ordered tuple or interval reversed; not equivalent
- ``interval-bounds``: an interval's brackets flipped open/closed; not equivalent
- ``wrong-value``: an integer n as n+1, a fraction a/b as (a+1)/b; not equivalent
- ``think-block-right`` / ``think-block-wrong``: an integer answer after a thought that boxed another number
  (equivalent), a wrong answer after a thought that boxed the right one (not equivalent)

Each prediction is written as a reasoning model writes it, ``The final answer is $\\boxed{PRED}$.``.  Ours:
``extract(text, "math", source="cot")`` then ``is_correct(value, "math", gold)``.  math-verify directly, as its README
shows: ``verify(parse("$" + gold + "$"), parse(text))``.  Counts of right verdicts per category, side by side, and the
CPU time of each.

Usage: ``PYTHONPATH=src python benchmarks/bench_math.py``
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from collections.abc import Iterator
from pathlib import Path

from thoughtsource.extract import extract, gold_value, is_correct

DATA = Path(os.environ.get("THOUGHTSOURCE_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")

_INT = re.compile(r"-?\d+")
_FRAC = re.compile(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")
_INTERVAL = re.compile(r"(\\left)?([\[(])\s*([^,\[\]()]+?)\s*,\s*([^,\[\]()]+?)\s*(\\right)?([\])])")
_TUPLE = re.compile(r"\((-?\d+(?:,-?\d+)+)\)")


def pairs(answers: list[str]) -> Iterator[tuple[str, str, str, bool]]:
    """(category, gold, prediction, equivalent) for every applicable rewrite of every gold answer."""
    for g in answers:
        if "\\frac" in g:
            yield "dfrac", g, g.replace("\\frac", "\\dfrac"), True
        if "\\dfrac" in g:
            yield "dfrac", g, g.replace("\\dfrac", "\\frac"), True
        m = _FRAC.fullmatch(g)
        if m:
            a, b = int(m.group(2)), int(m.group(3))
            if b and all(p in (2, 5) for p in _factors(b)):
                yield "decimal-fraction", g, f"{m.group(1)}{a / b:g}", True
            yield "wrong-value", g, f"{m.group(1)}\\frac{{{a + 1}}}{{{b}}}", False
        if _INT.fullmatch(g):
            n = int(g)
            yield "decimal-fraction", g, f"\\frac{{{2 * n}}}{{2}}", True
            yield "wrong-value", g, str(n + 1), False
        if "^\\circ" in g:
            yield "degrees", g, g.replace("^\\circ", ""), True
        if "\\text{ degrees}" in g:
            yield "degrees", g, g.replace("\\text{ degrees}", "").replace("\\frac{270}7", "\\frac{270}{7}"), True
        t = re.fullmatch(r"\\text\{(.+)\}", g)
        if t:
            yield "text", g, t.group(1), True
        if ",\\!" in g or re.fullmatch(r"\d{1,3}(,\d{3})+", g):
            yield "thousands", g, g.replace(",\\!", "").replace(" ", "").replace(",", ""), True
        if re.fullmatch(r"-?[\d\s]+(,\s*-?\d+)+", g) and not re.fullmatch(r"\d{1,3}(,\d{3})+", g):
            yield "reordered-set", g, ",".join(reversed([x.strip() for x in g.split(",")])), True
        iv = _INTERVAL.fullmatch(g)
        # an interval, not a point: mixed brackets, an infinite bound or a union ("(2,4)" may be either)
        if iv and not (iv.group(2) + iv.group(6) in ("[)", "(]", "[]") or "infty" in g or "\\cup" in g):
            iv = None
        if iv:
            lo, hi, left, right = iv.group(3), iv.group(4), iv.group(2), iv.group(6)
            yield "interval-spacing", g, f"\\left{left} {lo} , {hi} \\right{right}", True
            flipped = {"(": "[", "[": "("}[left] if "infty" not in lo else left
            flipped_r = {")": "]", "]": ")"}[right] if "infty" not in hi else right
            if (flipped, flipped_r) != (left, right):
                yield "interval-bounds", g, f"{flipped}{lo}, {hi}{flipped_r}", False
            yield "reordered-tuple", g, f"{left}{hi}, {lo}{right}", False
        tu = _TUPLE.fullmatch(g)
        if tu and not iv:
            yield "reordered-tuple", g, "(" + ",".join(reversed(tu.group(1).split(","))) + ")", False
        if _INT.fullmatch(g):  # a reasoning model's output: a boxed guess inside the thought, the answer after it
            n = int(g)
            yield "think-block-right", g, f"<think>Maybe \\boxed{{{n + 1}}}? No.</think>", True
            yield "think-block-wrong", g, f"<think>So \\boxed{{{n}}}... no, wait.</think>~{n + 1}", False


def _factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def _output(pred: str) -> str:
    """The model output of a prediction: "The final answer is $\\boxed{PRED}$.", after its thought if it has one."""
    if pred.startswith("<think>"):
        thought, _, final = pred.partition("</think>")
        answer = final.lstrip("~") or re.search(r"\\boxed\{(-?\d+)\}", thought).group(1)  # type: ignore[union-attr]
        if not final:  # the thought boxed n + 1; the answer is the gold n
            answer = str(int(answer) - 1)
        return f"{thought}</think> The final answer is $\\boxed{{{answer}}}$."
    return f"The final answer is $\\boxed{{{pred}}}$."


def ours(corpus: list[tuple[str, str, str, bool]]) -> list[bool]:
    out = []
    for _, gold, pred, _ in corpus:
        text = _output(pred)
        out.append(is_correct(extract(text, "math", source="cot").value, "math", gold_value("math", [gold])))
    return out


def math_verify_direct(corpus: list[tuple[str, str, str, bool]]) -> list[bool]:
    from math_verify import parse, verify

    out = []
    for _, gold, pred, _ in corpus:
        text = _output(pred)
        out.append(bool(verify(parse(f"${gold}$"), parse(text))))
    return out


def main() -> None:
    answers = [json.loads(line)["answer"] for line in (DATA / "math500" / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    corpus = list(pairs(answers))
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print("command: PYTHONPATH=src python benchmarks/bench_math.py")
    import math_verify  # noqa: F401 - imported before timing

    c = time.process_time()
    mine = ours(corpus)
    cpu_ours = time.process_time() - c
    c = time.process_time()
    theirs = math_verify_direct(corpus)
    cpu_theirs = time.process_time() - c
    cats = sorted({k for k, *_ in corpus})
    print(f"{len(corpus)} pairs from {len(answers)} MATH-500 answers")
    print("| category | equivalent | pairs | ours right | math-verify right |")
    print("|---|---|---:|---:|---:|")
    worse = []
    for k in cats:
        idx = [i for i, (kk, *_) in enumerate(corpus) if kk == k]
        eq = corpus[idx[0]][3]
        a = sum(mine[i] == corpus[i][3] for i in idx)
        b = sum(theirs[i] == corpus[i][3] for i in idx)
        print(f"| {k} | {'yes' if eq else 'no'} | {len(idx)} | {a} | {b} |")
        if a < b:
            worse.append(k)
    total_a = sum(m == x[3] for m, x in zip(mine, corpus, strict=True))
    total_b = sum(t == x[3] for t, x in zip(theirs, corpus, strict=True))
    print(f"| all | | {len(corpus)} | {total_a} | {total_b} |")
    print(f"CPU: ours {cpu_ours:.2f} s, math-verify directly {cpu_theirs:.2f} s")
    for i, (k, g, p, eq) in enumerate(corpus):
        if mine[i] != eq or theirs[i] != eq:
            print(f"  {k}: gold {g!r} pred {p!r} equivalent={eq}: ours {mine[i]}, math-verify {theirs[i]}")
    assert not worse, f"ours is worse than math-verify on {worse}"


if __name__ == "__main__":
    main()
