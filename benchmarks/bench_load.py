"""Loading every available dataset: cold conversion from raw files vs. warm load from the converted cache.

Baseline = cold (empty THOUGHTSOURCE_CACHE: sha256 verification of the raw files, conversion, Parquet write);
ours = warm (verification remembered by (path, size, mtime), samples read from the Parquet cache).  Prints
per dataset the records, seconds and records/s of both, and the ratio.  Target: cold conversion of all
available datasets < 60 s on a 2-core machine.

    PYTHONPATH=src python benchmarks/bench_load.py [--data-dir ../shared/data] [--repeat 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def machine() -> str:
    mem = ""
    try:
        kb = int(next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal")).split()[1])
        mem = f", {kb / 2**20:.0f} GB"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{os.cpu_count()}-core {platform.machine()} {platform.processor() or ''}{mem}, Python {platform.python_version()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("THOUGHTSOURCE_DATA", REPO.parent / "shared" / "data")))
    ap.add_argument("--repeat", type=int, default=3, help="warm loads per dataset (the best is reported)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)

    with tempfile.TemporaryDirectory(prefix="ts_bench_cache_") as cache:
        os.environ["THOUGHTSOURCE_CACHE"] = cache  # cold = empty cache
        os.environ["THOUGHTSOURCE_OFFLINE"] = "1"
        import pyarrow.parquet  # noqa: F401  (import time is not conversion time)

        from thoughtsource import datasets

        print(f"machine: {machine()}")
        print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
        print(f"data dir: {args.data_dir}")
        print(
            f"{'dataset':<16} {'splits':<24} {'records':>8} {'cold s':>8} {'cold rec/s':>11} {'warm s':>8} {'warm rec/s':>11} {'ratio':>7}"
        )
        total_cold = total_warm = 0.0
        total_n = 0
        for name in datasets.names():
            splits = datasets.available_splits(name, args.data_dir)
            if not splits:
                print(f"{name:<16} (no raw files present)")
                continue
            t = time.perf_counter()
            data = datasets.load(name, splits, data_dir=args.data_dir)
            cold = time.perf_counter() - t
            warm = float("inf")
            for _ in range(args.repeat):
                t = time.perf_counter()
                again = datasets.load(name, splits, data_dir=args.data_dir)
                warm = min(warm, time.perf_counter() - t)
            n = sum(len(v) for v in data.values())
            assert n == sum(len(v) for v in again.values())
            total_cold += cold
            total_warm += warm
            total_n += n
            print(
                f"{name:<16} {','.join(splits):<24} {n:>8} {cold:>8.2f} {n / cold:>11.0f} {warm:>8.3f} {n / warm:>11.0f} {cold / warm:>6.1f}x"
            )
        print(
            f"{'all':<16} {'':<24} {total_n:>8} {total_cold:>8.2f} {total_n / total_cold:>11.0f} {total_warm:>8.3f} "
            f"{total_n / total_warm:>11.0f} {total_cold / total_warm:>6.1f}x"
        )
        print(
            f"baseline (cold, all available datasets): {total_cold:.2f} s; ours (warm): {total_warm:.2f} s; "
            f"ratio {total_cold / total_warm:.1f}x; target cold < 60 s: {'met' if total_cold < 60 else 'NOT met'}"
        )


if __name__ == "__main__":
    main()
