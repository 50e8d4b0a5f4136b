"""Benchmark: evaluate 100,000 generated CoTs (both modes) vs a naive per-CoT loop.

The CoTs are real: the zero-shot-CoT logs of Kojima et al. (9,706 CoTs with their extraction
outputs, 12 datasets, all five-type code paths but collection) and the ThoughtSource model runs
(GPT-4, GPT-3.5, Flan-T5, Cohere; 4,014 answers), replicated as distinct samples up to N.

- ours: ``thoughtsource.evaluate.evaluate_frame`` (strict + flexible, accuracy table, Wilson intervals),
  once with its default per-call memo of identical texts and once with ``memo=False`` (every text
  extracted again; the honest number when texts do not repeat);
- baseline: the naive loop that the published evaluation style amounts to: per answer, re-validate
  its sample with pydantic from the dict form, build that sample's choice patterns with ``re.compile``,
  extract with the same rules, append a dict row, then one DataFrame + groupby at the end.

Usage: ``PYTHONPATH=src python benchmarks/bench_evaluate.py [N]`` (default 100000).
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
from pathlib import Path

from thoughtsource.collection import Collection
from thoughtsource.datasets.cot_logs import log_to_samples, read_kojima_log_file
from thoughtsource.evaluate import evaluate_frame
from thoughtsource.extract import extract, is_correct, sample_gold
from thoughtsource.schema import Sample
from thoughtsource.statistics import wilson_interval

DATA = Path(os.environ.get("THOUGHTSOURCE_DATA") or os.environ.get("THOUGHTSOURCE_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def base_samples() -> list[tuple[str, Sample]]:
    out: list[tuple[str, Sample]] = []
    for path in sorted((DATA / "kojima_logs").glob("*_zero_shot_cot.log")):
        log = read_kojima_log_file(path)
        out.extend((log.dataset, s) for s in log_to_samples(log))
    for path in sorted((DATA / "thoughtsource_examples" / "model_runs").glob("*.json")):
        for name, splits in Collection.load(path).data.items():
            for xs in splits.values():
                out.extend((name, x) for x in xs)
    return out


def build(n_cots: int) -> Collection:
    base = base_samples()
    data: dict[str, dict[str, list[Sample]]] = {}
    count = rep = 0
    while count < n_cots:
        for name, s in base:
            if count >= n_cots:
                break
            cots = s.generated_cot[: n_cots - count]
            x = s.model_copy(update={"id": f"{s.id}-r{rep}", "generated_cot": cots})
            data.setdefault(name, {}).setdefault("test", []).append(x)
            count += sum(len(c.answers) for c in cots)
        rep += 1
    return Collection(data=data)


def naive(collection: Collection) -> dict[str, float]:
    """Per answer: pydantic re-validation of the sample, per-sample regex compilation, dict rows, pandas at the end."""
    import pandas as pd

    rows = []
    for d, s, sample in collection.samples():
        raw = sample.to_dict()
        for ci in range(len(raw["generated_cot"])):
            for ai in range(len(raw["generated_cot"][ci]["answers"])):
                x = Sample.model_validate(json.loads(json.dumps(raw)))  # what a dict-in, dict-out loop re-does per answer
                cot = x.generated_cot[ci]
                ans = cot.answers[ai]
                letters = re.compile(r"\b(" + "|".join(chr(65 + i) for i in range(max(1, len(x.choices)))) + r")\b")
                texts = re.compile("|".join(re.escape(c) for c in x.choices) or "$^", re.I)
                letters.search(ans.answer or "")
                texts.search(ans.answer or "")
                text, source = (ans.answer, "extraction") if ans.answer and ans.answer.strip() else (cot.cot, "cot")
                gold = sample_gold(x)
                for mode in ("strict", "flexible"):
                    e = extract(text, x.type, mode=mode, choices=x.choices, source=source)  # type: ignore[arg-type]
                    rows.append(
                        {
                            "dataset": d,
                            "split": s,
                            "trigger": cot.cot_trigger,
                            "mode": mode,
                            "ok": is_correct(e.value, x.type, gold),
                        }
                    )
    df = pd.DataFrame(rows)
    g = df.groupby(["dataset", "split", "trigger", "mode"])["ok"].agg(["sum", "size"])
    return {str(k): wilson_interval(int(v["sum"]), int(v["size"]))[0] for k, v in g.iterrows()}


def timed(fn, *args, **kw):  # type: ignore[no-untyped-def]
    """(result, wall seconds, CPU seconds of this process): the machine is shared, so both are printed."""
    w, c = time.perf_counter(), time.process_time()
    out = fn(*args, **kw)
    return out, time.perf_counter() - w, time.process_time() - c


def main() -> None:
    import pandas  # noqa: F401  (imported before timing: both sides use it)

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    t0 = time.perf_counter()
    c = build(n)
    n_answers = sum(1 for _, _, x in c.samples() for _ in x.iter_answers())
    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"command: PYTHONPATH=src python benchmarks/bench_evaluate.py {n}")
    print(f"built {n_answers} generated CoTs in {len(c)} samples ({time.perf_counter() - t0:.1f} s, not timed)")

    evaluate_frame(build(200))  # warm-up: lazy imports, caches of compiled patterns
    r, ours, ours_cpu = timed(evaluate_frame, c)
    r2, nomemo, nomemo_cpu = timed(evaluate_frame, c, memo=False)
    assert r.accuracy.equals(r2.accuracy)
    _, base, base_cpu = timed(naive, c)
    print(
        f"ours (evaluate_frame, strict+flexible, memo):       wall {ours:6.2f} s, CPU {ours_cpu:6.2f} s ({n_answers / ours_cpu:,.0f} CoTs/CPU-s)"
    )
    print(
        f"ours (evaluate_frame, strict+flexible, no memo):    wall {nomemo:6.2f} s, CPU {nomemo_cpu:6.2f} s ({n_answers / nomemo_cpu:,.0f} CoTs/CPU-s)"
    )
    print(
        f"baseline (naive per-answer validate + compile loop): wall {base:6.2f} s, CPU {base_cpu:6.2f} s ({n_answers / base_cpu:,.0f} CoTs/CPU-s)"
    )
    print(f"ratio baseline/ours (CPU): {base_cpu / ours_cpu:.1f}x (memo), {base_cpu / nomemo_cpu:.1f}x (no memo)")


if __name__ == "__main__":
    main()
