"""Benchmark: all statistics and plots for every available dataset, and the n-gram overlap against a baseline.

    PYTHONPATH=src python benchmarks/bench_stats.py [--data-dir ../shared/data] [--embedded]

Datasets: every registered dataset, with the splits whose raw files lie in ``--data-dir`` (loading is
timed apart; the converted Parquet cache is warmed first).  Ours: ``compute_stats`` (counts, lengths of
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
    return Collection(data=data)


def field_texts(collection, field: str) -> dict[str, list[str]]:
    get = (lambda x: x.question) if field == "question" else (lambda x: " ".join(x.cot))
    return {d: [t for xs in sp.values() for x in xs if (t := get(x)).strip()] for d, sp in collection}


def baseline_overlap(collection, n: int = 3) -> dict[str, dict[tuple[str, str], tuple[int, float, float]]]:
    """Published approach: a set of joined n-gram strings per dataset, Python set operations per pair."""
    from thoughtsource.stats import WordTokenizer

    tok = WordTokenizer()
    out = {}
    for field in ("question", "cot"):
        sets = {}
        for d, texts in field_texts(collection, field).items():
            grams: set[str] = set()
            for t in texts:
                toks = tok.tokenize(t)
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
    return out


def ours_overlap(collection, n: int = 3) -> dict[str, dict[tuple[str, str], tuple[int, float, float]]]:
    from thoughtsource.stats import WordTokenizer, ngram_hashes, pairwise_overlap

    tok = WordTokenizer()
    out = {}
    for field in ("question", "cot"):
        sets = {d: ngram_hashes(*tok.encode(texts), n) for d, texts in field_texts(collection, field).items()}
        pairs = pairwise_overlap(dict(sorted(sets.items())))
        out[field] = {
            (r.dataset_a, r.dataset_b): (int(r.intersection), r.overlap_coefficient, r.jaccard)
            for r in pairs.itertuples() if r.dataset_a != r.dataset_b
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("THOUGHTSOURCE_SHARED_DATA", REPO.parent / "shared" / "data")))
    ap.add_argument("--embedded", action="store_true", help="also time the statistics with the embedded model's tokenizer")
    args = ap.parse_args()

    from thoughtsource import stats, stats_plots

    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPU(s), Python {platform.python_version()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    load_available(args.data_dir)  # warm the converted-dataset cache
    t = time.perf_counter()
    collection = load_available(args.data_dir)
    t_load = time.perf_counter() - t
    print(f"datasets: {', '.join(collection.names)} ({len(collection):,} samples); load from the converted cache {t_load:.2f} s")

    t = time.perf_counter()
    report = stats.compute_stats(collection, progress=False)
    t_stats = time.perf_counter() - t
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        stats_plots.write_all(report, tmp)
        t_plots = time.perf_counter() - t
        t = time.perf_counter()
        (Path(tmp) / "stats.md").write_text(stats.render_markdown(report))
        t_md = time.perf_counter() - t
    total = t_stats + t_plots + t_md
    print(f"ours, all statistics (word tokenizer): {t_stats:.2f} s  ({', '.join(f'{k} {v:.2f}' for k, v in report.timings.items())})")
    print(f"ours, 4 figures: {t_plots:.2f} s; stats.md: {t_md:.2f} s; total {total:.2f} s (+ load {t_load:.2f} s)")

    t = time.perf_counter()
    base = baseline_overlap(collection)
    t_base = time.perf_counter() - t
    t = time.perf_counter()
    ours = ours_overlap(collection)
    t_ours = time.perf_counter() - t
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
    print(f"3-gram overlap of questions + reference CoTs, {n_pairs} dataset pairs:")
    print(f"  baseline (Python string sets): {t_base:.2f} s")
    print(f"  ours (hashed numpy sets):      {t_ours:.2f} s")
    print(f"  ratio baseline/ours: {t_base / t_ours:.1f}x; identical intersections, max |difference| of coefficients {worst:.1e}")

    if args.embedded:
        t = time.perf_counter()
        emb = stats.compute_stats(collection, tokenizer="embedded", progress=False)
        print(f"ours, all statistics (embedded SmolLM2 tokenizer): {time.perf_counter() - t:.2f} s "
              f"({', '.join(f'{k} {v:.2f}' for k, v in emb.timings.items())})")


if __name__ == "__main__":
    main()
