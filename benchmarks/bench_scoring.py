"""Benchmark: scoring answers, ours against the published ThoughtSource library's ``is_correct``.

The published library (OpenBioLink/ThoughtSource, ``libs/cot/cot/evaluate.py``; not on PyPI) scores an answer with
``is_correct(type_, pred, gold, choices)``: bool and multiple-choice answers only.  Per call it sorts every
answer-extraction fragment by length and strips the ones the prediction starts with, lowercases, then for a
multiple-choice answer builds and runs a whole-word regex per choice (and a plain substring scan per choice),
else a regex of filler words, a letters-only pass and a whole-word regex per letter; for a bool answer a whole-word
regex per yes/no/true/false; finally a first-word match.  ``published_is_correct`` below re-implements those
steps, in that order, with the same regular expressions, so that its cost can be measured here (the library
itself cannot be installed: it needs its own package and the ``datasets`` cache layout).

The answers are real: every bool and multiple-choice answer of the ThoughtSource model runs (GPT-4, GPT-3.5,
Flan-T5, Cohere) and of the Kojima et al. zero-shot-CoT logs, each with its sample's gold answer and choices.
Ours, per answer and without any memo: ``extract(text, type, mode="strict", choices)`` then
``is_correct(value, type, gold)``; the verdicts are checked against ``evaluate_frame`` (the library's scoring path,
with its memo) and against the full rules without the bare-answer shortcut (``extract(..., shortcut=False)``),
so the speed-up changes no verdict.  ``published_is_correct``'s verdicts are counted next to ours
(they differ where the published rules mis-read an answer; docs/evaluation.md).

Usage: ``PYTHONPATH=src python benchmarks/bench_scoring.py [REPEAT]`` (default 3: each side's best of 3 runs).
"""

from __future__ import annotations

import os
import platform
import re
import string
import sys
import time
from pathlib import Path
from typing import Any

from thoughtsource.collection import Collection
from thoughtsource.datasets.cot_logs import log_to_samples, read_kojima_log_file
from thoughtsource.evaluate import evaluate_frame
from thoughtsource.extract import extract, is_correct, sample_gold
from thoughtsource.prompts import load_fragments

DATA = Path(os.environ.get("THOUGHTSOURCE_DATA") or os.environ.get("THOUGHTSOURCE_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
EXTRACTIONS = [str(v) for v in load_fragments().answer_extractions.values()]
FILLERS = ["both", "and", "either", "or", "most", "then", "maybe", "the", "answer", "is", "correct", "choice", "choices",
           "option", "options", "probably", "likely", "arguably", "hypothetically", "tentatively", "relatively",
           "certainly", "possibly", "perhaps", "potentially", "plausibly", "feasibly", "credibly", "reportedly"]


def _whole_word(value: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE) is not None


def _same(pred: str, gold: str, table: dict[str, str]) -> bool:
    """The published compare step: a letter or a choice text, either side."""
    pred, gold = pred.lower(), gold.lower()
    if pred in table:
        pred = table[pred]
    if gold in table:
        gold = table[gold]
    return pred == gold


def published_is_correct(type_: str, pred: str, gold: str, choices: list[str] | None = None) -> bool | None:
    """The published ``is_correct`` step by step (see the module docstring)."""
    if pred == "":
        return False
    for prefix in sorted(EXTRACTIONS, key=len, reverse=True):  # sorted again on every call, as published
        if pred.startswith(prefix):
            pred = pred[len(prefix):]
    pred, gold = pred.lower(), gold.lower()
    lowered = [c.lower() for c in choices] if choices else []
    if type_ not in ("bool", "multiplechoice"):
        return None
    if type_ == "multiplechoice":
        table = dict(zip(string.ascii_lowercase, lowered, strict=False))
        keys, raw = list(table), list(table.values())
        values = [re.escape(v) for v in raw]
        _ = set(keys) & {v.lower() for v in table.values()}  # the published ambiguity check
    else:
        table = {"yes": "true", "no": "false"}
        keys, values = list(table), list(table.values())
        raw = values
    if pred in raw or pred in keys or pred in values:
        return _same(pred, gold, table)
    if type_ == "multiplechoice":
        hits = [v for v in raw if len(v) <= len(pred) and _whole_word(v, pred)]
        _ = [v for v in raw if len(v) <= len(pred) and v.lower() in pred.lower()]  # the published second scan
        if len(hits) == 1:
            return _same(hits[0], gold, table)
        if len(hits) > 1:
            return False
        text = re.sub(r"(?<!\w){}(?!\w)".format("|".join(FILLERS)), " ", pred)
        letters = list(re.sub(r"[^a-zA-Z]", "", text))
        if len(letters) == 1:
            if letters[0] in keys:
                return _same(letters[0], gold, table)
        elif len(letters) > 1:
            found = [k for k in keys if _whole_word(k, pred)]
            if sorted(found) == sorted(letters):
                return False
    if type_ == "bool":
        hits = [v for v in keys + values if len(v) <= len(pred) and _whole_word(v, pred)]
        if len(hits) == 1:
            return _same(hits[0], gold, table)
    m = re.search(r"\w+", pred)
    if m and m.group() in keys + raw:
        return _same(m.group(), gold, table)
    return False


def answers() -> tuple[Collection, list[tuple[str, str, Any, list[str], str, str]]]:
    """(collection, rows): every bool / multiple-choice answer: (type, text, our gold, choices, published gold, source)."""
    data: dict[str, dict[str, list[Any]]] = {}
    for path in sorted((DATA / "kojima_logs").glob("*_zero_shot_cot.log")):
        log = read_kojima_log_file(path)
        data.setdefault(log.dataset, {}).setdefault("test", []).extend(log_to_samples(log))
    for path in sorted((DATA / "thoughtsource_examples" / "model_runs").glob("*.json")):
        for name, splits in Collection.load(path).data.items():
            for split, xs in splits.items():
                data.setdefault(f"{name}@{path.stem[:30]}", {}).setdefault(split, []).extend(xs)
    keep = {d: {s: [x for x in xs if x.type in ("bool", "multiplechoice") and x.answer] for s, xs in sp.items()}
            for d, sp in data.items()}
    c = Collection(data=keep)
    rows = []
    for _, _, x in c.samples():
        gold = sample_gold(x)
        for cot in x.generated_cot:
            for a in cot.answers:
                text, source = (a.answer, "extraction") if a.answer and a.answer.strip() else (cot.cot, "cot")
                rows.append((x.type, text, gold, list(x.choices), x.answer[0], source))
    return c, rows


def ours(rows: list[tuple[str, str, Any, list[str], str, str]]) -> list[bool]:
    out = []
    for t, text, gold, choices, _, source in rows:
        e = extract(text, t, mode="strict", choices=choices, source=source)  # type: ignore[arg-type]
        out.append(is_correct(e.value, t, gold))
    return out


def full_rules(rows: list[tuple[str, str, Any, list[str], str, str]]) -> list[bool]:
    """Ours without the bare-answer shortcut: the verdicts the shortcut must not change."""
    return [is_correct(extract(text, t, mode="strict", choices=choices, source=source, shortcut=False).value, t, gold)  # type: ignore[arg-type]
            for t, text, gold, choices, _, source in rows]


def published(rows: list[tuple[str, str, Any, list[str], str, str]]) -> list[bool | None]:
    return [published_is_correct(t, text, pub_gold, choices or None) for t, text, _, choices, pub_gold, _ in rows]


def best_cpu(fn: Any, arg: Any, repeat: int) -> tuple[Any, float, float]:
    """(result, best CPU seconds, its wall seconds) over ``repeat`` runs: the machine is shared."""
    best = (None, float("inf"), 0.0)
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        out = fn(arg)
        cpu, wall = time.process_time() - c, time.perf_counter() - w
        if cpu < best[1]:
            best = (out, cpu, wall)
    return best


def main() -> None:
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    c, rows = answers()
    n = len(rows)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"command: PYTHONPATH=src python benchmarks/bench_scoring.py {repeat}")
    kinds = {t: sum(1 for r in rows if r[0] == t) for t in ("bool", "multiplechoice")}
    print(f"{n} answers ({kinds['bool']} bool, {kinds['multiplechoice']} multiple choice)")
    ours(rows[:200]), published(rows[:200])  # warm-up: lazy imports, compiled-pattern caches
    mine, cpu_ours, wall_ours = best_cpu(ours, rows, repeat)
    theirs, cpu_pub, wall_pub = best_cpu(published, rows, repeat)
    frame = evaluate_frame(c, modes=("strict",))
    assert mine == frame.answers["correct"].tolist(), "per-answer scoring differs from evaluate_frame"
    full, cpu_full, wall_full = best_cpu(full_rules, rows, repeat)
    assert mine == full, "the bare-answer shortcut changed a verdict"
    agree = sum(1 for a, b in zip(mine, theirs, strict=True) if a == bool(b))
    print(f"published is_correct: CPU {cpu_pub:.3f} s (wall {wall_pub:.3f} s), {n / cpu_pub:,.0f} answers/CPU-s, "
          f"{sum(bool(v) for v in theirs)} correct")
    print(f"ours (extract + is_correct): CPU {cpu_ours:.3f} s (wall {wall_ours:.3f} s), {n / cpu_ours:,.0f} answers/CPU-s, "
          f"{sum(mine)} correct; verdicts identical to evaluate_frame's and to the full rules'")
    print(f"ours without the bare-answer shortcut: CPU {cpu_full:.3f} s (wall {wall_full:.3f} s), "
          f"ratio published/that {cpu_pub / cpu_full:.1f}x")
    print(f"verdicts agreeing with the published ones: {agree} of {n}")
    print(f"ratio published/ours (CPU): {cpu_pub / cpu_ours:.1f}x")


if __name__ == "__main__":
    main()
