"""Benchmark: ``Collection.merge`` of two model runs over the same samples, against the old quadratic pattern.

    PYTHONPATH=src python benchmarks/bench_merge.py [--sizes 10000,100000,200000] [--baseline-sizes 2000,5000,10000]

Each size N merges two collections of N multiple-choice samples in one dataset and split, with the same sample
ids and one generated CoT each (a second model's run of the same questions: every sample of the second
collection is merged into its twin, the case of ``thoughtsource serve`` with several model-run files and of an
uploaded run).  Ours: ``Collection.merge`` (one id index per split).  Baseline: the same merge with the id index
rebuilt for every incoming sample, as before issue 23 (``{y.id: y for y in target}`` inside the loop), so
quadratic; it runs only at ``--baseline-sizes`` (at 200k it would take hours).  Both must give equal results.
Prints one row per size: wall seconds of ours, ours per 1,000 samples, and ours in CPU seconds of this process
(``time.process_time``: on a shared, loaded machine the wall time also counts the time other processes had the
cores, the CPU time does not), then the baseline's wall time and the ratio baseline / ours where both ran.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from thoughtsource import io  # noqa: E402
from thoughtsource.collection import Collection  # noqa: E402


def make(n: int, model: str) -> Collection:
    rows = [
        {
            "id": f"q{i}",
            "question": f"Question {i}: which one?",
            "type": "multiplechoice",
            "choices": ["alpha", "beta", "gamma"],
            "answer": ["beta"],
            "generated_cot": [{"id": f"{model}-{i}", "cot": f"Step one for {i}. So the answer is beta.",
                               "model": {"name": model},
                               "answers": [{"id": f"{model}-{i}-a", "answer": "beta", "correct_answer": True}]}],
        }
        for i in range(n)
    ]
    return Collection(data=io.parse_data({"bench": {"test": rows}}, warn=False))


def quadratic_merge(self: Collection, other: Collection) -> Collection:
    """The merge as it was before issue 23: the id index of the split rebuilt for every incoming sample.  (CoTs
    present in both are not merged field by field here: the benchmark's runs share no CoT id.)"""
    result = Collection(data=io.parse_data(io.data_to_obj(self.data), warn=False))
    for d, s, x in other.samples():
        target = result.data.setdefault(d, {}).setdefault(s, [])
        index = {y.id: y for y in target}
        mine = index.get(x.id)
        if mine is None:
            target.append(x.model_copy(deep=True))
            continue
        by_id = {c.id: c for c in mine.generated_cot}
        for cot in x.generated_cot:
            if cot.id not in by_id:
                mine.generated_cot.append(cot.model_copy(deep=True))
                by_id[cot.id] = mine.generated_cot[-1]
    return result


def timed(fn, *args) -> tuple[float, float, Collection]:
    """(wall seconds, CPU seconds of this process, result)."""
    t, c = time.perf_counter(), time.process_time()
    out = fn(*args)
    return time.perf_counter() - t, time.process_time() - c, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000,200000")
    ap.add_argument("--baseline-sizes", default="2000,5000,10000")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",") if x]
    base_sizes = [int(x) for x in args.baseline_sizes.split(",") if x]
    print(f"# {datetime.date.today()}  {platform.node()}  {platform.processor() or platform.machine()}  "
          f"{os.cpu_count()} cores  Python {platform.python_version()}")
    print(f"{'samples':>8} {'ours':>9} {'per 1k':>8} {'ours cpu':>9} {'baseline':>10} {'ratio':>8}")
    for n in sorted(set(sizes) | set(base_sizes)):
        a, b = make(n, "model-a"), make(n, "model-b")
        ours_s, ours_cpu, ours = timed(a.merge, b)
        assert len(ours) == n and all(len(x.generated_cot) == 2 for _, _, x in ours.samples())
        base = "-"
        ratio = "-"
        if n in base_sizes:
            base_s, _, old = timed(quadratic_merge, a, b)
            assert old == ours
            base, ratio = f"{base_s:9.2f}s", f"{base_s / ours_s:7.1f}x"
        print(f"{n:>8} {ours_s:8.2f}s {1000 * ours_s / n:7.3f}s {ours_cpu:8.2f}s {base:>10} {ratio:>8}", flush=True)


if __name__ == "__main__":
    main()
