"""Benchmark: all statistics and plots for every available dataset, and the n-gram overlap against a baseline.

    PYTHONPATH=src python benchmarks/bench_stats.py [--data-dir ../shared/data] [--embedded]

Datasets: every registered dataset, with the splits whose raw files lie in ``--data-dir``, plus OpenBookQA's
ThoughtSource example file (loading is timed apart; the converted Parquet cache is warmed first).  Ours: ``compute_stats`` (counts, lengths of
5 fields, vocabulary, hashed 3-gram sets, pairwise overlap coefficient + Jaccard for questions and
reference CoTs) plus the four figures.  Baseline: the published approach to the overlap, i.e. pure-Python
sets of n-gram strings per dataset and ``len(a & b)`` / ``len(a | b)`` per pair, with the same tokens;
the ratio compares it with our overlap step (tokenize + hash + pairs) and the two must agree exactly.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_available(data_dir: Path):
    from thoughtsource import datasets as registry
    from thoughtsource.collection import Collection

    data = {}
    for name in registry.names():
        splits = registry.available_splits(name, data_dir)
        if splits:
            data[name] = registry.load(name, splits=splits, data_dir=data_dir, download=False)
    # OpenBookQA has no raw files here, only ThoughtSource's 100 annotated test questions (as in docs/stats.md)
    obqa = data_dir / "thoughtsource_examples" / "annotated" / "annotated_ob_davinci.json"
    if "open_book_qa" not in data and obqa.exists():
        data.update(Collection.load(obqa).data)
    return Collection(data=dict(sorted(data.items())))


def field_texts(collection, field: str) -> dict[str, list[str]]:
    get = (lambda x: x.question) if field == "question" else (lambda x: " ".join(x.cot))
    return {d: [t for xs in sp.values() for x in xs if (t := get(x)).strip()] for d, sp in collection}


class Timer:
    """Wall-clock and process CPU seconds of a block (CPU time is the steadier number on a shared machine)."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu

    def __str__(self) -> str:
        return f"{self.wall:.2f} s wall / {self.cpu:.2f} s CPU"


Result = dict[str, dict[tuple[str, str], tuple[int, float, float]]]


def baseline_overlap(collection, n: int = 3) -> tuple[Result, Timer, Timer]:
    """Published approach: a set of joined n-gram strings per dataset, Python set operations per pair."""
    from thoughtsource.reporting.stats import WordTokenizer

    tok = WordTokenizer()
    with Timer() as t_tok:
        tokens = {f: {d: [tok.tokenize(t) for t in texts] for d, texts in field_texts(collection, f).items()} for f in ("question", "cot")}
    out: Result = {}
    with Timer() as t_sets:
        for field, per_dataset in tokens.items():
            sets = {}
            for d, docs in per_dataset.items():
                grams: set[str] = set()
                for toks in docs:
                    for i in range(len(toks) - n + 1):
                        grams.add("_".join(toks[i : i + n]))
                sets[d] = grams
            res = {}
            for a, b in combinations(sorted(sets), 2):
                inter = len(sets[a] & sets[b])
                union = len(sets[a] | sets[b])
                small = min(len(sets[a]), len(sets[b]))
                res[(a, b)] = (inter, inter / small if small else float("nan"), inter / union if union else float("nan"))
            out[field] = res
    return out, t_tok, t_sets


def ours_overlap(collection, n: int = 3) -> tuple[Result, Timer, Timer]:
    """Ours: tokens hashed to uint64 (as compute_stats does once for the lengths), then hashed n-gram sets and pairs."""
    from thoughtsource.reporting.stats import WordTokenizer, ngram_hashes, pairwise_overlap

    tok = WordTokenizer()
    with Timer() as t_tok:
        encoded = {f: {d: tok.encode(texts) for d, texts in field_texts(collection, f).items()} for f in ("question", "cot")}
    out: Result = {}
    with Timer() as t_sets:
        for field, per_dataset in encoded.items():
            sets = {d: ngram_hashes(h, lengths, n) for d, (h, lengths) in sorted(per_dataset.items())}
            pairs = pairwise_overlap(sets)
            out[field] = {
                (r.dataset_a, r.dataset_b): (int(r.intersection), r.overlap_coefficient, r.jaccard)
                for r in pairs.itertuples() if r.dataset_a != r.dataset_b
            }
    return out, t_tok, t_sets


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("THOUGHTSOURCE_DATA") or os.environ.get("THOUGHTSOURCE_SHARED_DATA") or REPO.parent / "shared" / "data"))
    ap.add_argument("--embedded", action="store_true", help="also time the statistics with the embedded model's tokenizer")
    args = ap.parse_args()

    from thoughtsource.reporting import stats, stats_plots

    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPU(s), Python {platform.python_version()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    load_available(args.data_dir)  # warm the converted-dataset cache
    t = time.perf_counter()
    collection = load_available(args.data_dir)
    t_load = time.perf_counter() - t
    print(f"datasets: {', '.join(collection.names)} ({len(collection):,} samples); load from the converted cache {t_load:.2f} s")

    with Timer() as t_all:
        with Timer() as t_stats:
            report = stats.compute_stats(collection, progress=False)
        with tempfile.TemporaryDirectory() as tmp, Timer() as t_plots:
            stats_plots.write_all(report, tmp)
            (Path(tmp) / "stats.md").write_text(stats.render_markdown(report))
    print(f"ours, all statistics (word tokenizer): {t_stats}  ({', '.join(f'{k} {v:.2f}' for k, v in report.timings.items())})")
    print(f"ours, 4 figures + stats.md: {t_plots}")
    print(f"ours, statistics + figures for every available dataset: {t_all} (+ load {t_load:.2f} s); target < 120 s")

    base, b_tok, b_sets = baseline_overlap(collection)
    ours, o_tok, o_sets = ours_overlap(collection)
    worst = 0.0
    for field in base:
        for key, (inter, oc, jac) in base[field].items():
            o_inter, o_oc, o_jac = ours[field][key]
            if inter != o_inter:
                raise SystemExit(f"mismatch {field} {key}: baseline {inter} vs ours {o_inter}")
            for x, y in ((oc, o_oc), (jac, o_jac)):
                if x == x and y == y:  # skip NaN (an empty set)
                    worst = max(worst, abs(x - y))
    n_pairs = len(base["question"])
    print(f"3-gram overlap of questions + reference CoTs, {n_pairs} dataset pairs per field (same word tokens in both):")
    print(f"  baseline, Python string n-gram sets: tokenize {b_tok}; sets + pairs {b_sets}")
    print(f"  ours, hashed numpy n-gram sets:      tokenize+hash {o_tok}; sets + pairs {o_sets}")
    print(f"  ratio baseline/ours, sets + pairs: {b_sets.wall / o_sets.wall:.1f}x wall, {b_sets.cpu / o_sets.cpu:.1f}x CPU; "
          f"end to end: {(b_tok.wall + b_sets.wall) / (o_tok.wall + o_sets.wall):.1f}x wall, "
          f"{(b_tok.cpu + b_sets.cpu) / (o_tok.cpu + o_sets.cpu):.1f}x CPU")
    print(f"  identical intersections for every pair; max |difference| of the coefficients {worst:.1e}")

    if args.embedded:
        with Timer() as t_emb:
            emb = stats.compute_stats(collection, tokenizer="embedded", progress=False)
        print(f"ours, all statistics (embedded SmolLM2 tokenizer): {t_emb} "
              f"({', '.join(f'{k} {v:.2f}' for k, v in emb.timings.items())})")


if __name__ == "__main__":
    main()
