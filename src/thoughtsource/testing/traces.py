"""Reasoning-model traces of realistic length for the sample page's tests and ``benchmarks/bench_trace_page.py``.

Built from MATH-500 (``math500/test.jsonl`` of the shared data): each model "thinks" about the problem by going
through its reference solution and then through the solutions of other problems, a few sentences at a time with the
connectives of R1-style thought ("Wait, let me check that again."), until the thought is about ``trace_chars``
characters long; then ``</think>`` and the reference solution as the final answer.  Each model draws a different
sequence of other solutions, so the three traces share some sentences (the problem's own solution) and not others,
as real traces of one problem do.  The last model is cut off mid-thought: a ``<think>`` that never closes.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

MODELS = ("deepseek-r1", "qwq-32b", "r1-distill-qwen-7b")
_CONNECTIVES = ("Wait, let me check that again.", "Hmm, so far so good.", "Let me verify this step.",
                "Okay, so that means the next part follows.", "But wait, is that right?", "Let me think about this differently.")
_SENT = re.compile(r"(?<=[.!?])\s+")


def math500(data_dir: Path) -> list[dict[str, Any]]:
    """The MATH-500 records (problem, solution, answer, subject, level) of the shared data folder."""
    with open(data_dir / "math500" / "test.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def thought(problems: list[dict[str, Any]], i: int, seed: int, trace_chars: int) -> str:
    """About ``trace_chars`` characters of thought on problem ``i``: its solution, then other solutions, in pieces."""
    rng = random.Random(seed)
    out = [f"Okay, so I need to solve this problem: {problems[i]['problem']}", problems[i]["solution"]]
    size = sum(len(t) for t in out)
    while size < trace_chars:
        other = problems[rng.randrange(len(problems))]["solution"]
        sents = [s for s in _SENT.split(other) if s.strip()]
        k = rng.randrange(max(1, len(sents) - 2))
        piece = " ".join(sents[k : k + rng.randint(2, 6)])
        for t in (rng.choice(_CONNECTIVES), piece):
            out.append(t)
            size += len(t) + 2
    return "\n\n".join(out)[:trace_chars]


def long_trace_collection(data_dir: Path, *, samples: int = 1, trace_chars: int = 20_000) -> dict[str, Any]:
    """A ThoughtSource collection ``{"math500": {"test": [...]}}`` of ``samples`` MATH-500 problems, each with one
    trace of about ``trace_chars`` characters from each of :data:`MODELS` (inline think tags)."""
    problems = math500(data_dir)
    out = []
    for i in range(samples):
        x = problems[i]
        cots = []
        for m, model in enumerate(MODELS):
            think = thought(problems, i, seed=1000 * i + m, trace_chars=trace_chars)
            cut_off = m == len(MODELS) - 1
            cot = f"<think>\n{think}" if cut_off else f"<think>\n{think}\n</think>\n\n{x['solution']}"
            cots.append({
                "id": f"{model}-{i}", "cot": cot, "model": {"name": model}, "cot_trigger": "kojima-01",
                "answers": [] if cut_off else [{"id": f"{model}-{i}-a", "answer": x["answer"], "correct_answer": True}],
                "annotations": [],
            })
        out.append({"id": f"math500-{i}", "question": x["problem"], "type": "math", "choices": [],
                    "answer": [x["answer"]], "cot": [], "generated_cot": cots})
    return {"math500": {"test": out}}


def write_long_traces(data_dir: Path, out: Path, **kw: Any) -> Path:
    """:func:`long_trace_collection` written to ``out`` as a ThoughtSource JSON file."""
    out.write_text(json.dumps(long_trace_collection(data_dir, **kw), ensure_ascii=False), encoding="utf-8")
    return out
