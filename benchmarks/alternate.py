"""Is one checkout slower than another?  A benchmark command run on each, alternating, in one run.

    python benchmarks/alternate.py --old /path/old --new /path/new --rounds 3 -- \\
        python benchmarks/bench_star.py --arms after --n 64 --n-test 8 --steps 2

Each round runs the command once with ``PYTHONPATH=OLD/src`` and once with ``PYTHONPATH=NEW/src`` (the order
swapped every round, so a machine that slows down or warms up over the run weighs on both alike), in that checkout's
folder (its own copy of the benchmark script), and records its wall time and the numbers it prints on lines that match
``--metric`` (a regular expression with one group; e.g. ``"= ([0-9.]+) calls/s"``).  Prints the median of each and
the ratio new / old.  Issue 44 asked for ``bench_generate`` and ``bench_star`` not slower after its moves.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run(tree: Path, command: list[str], metric: re.Pattern[str] | None) -> tuple[float, list[float]]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    start = time.perf_counter()
    p = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed on {tree} (exit {p.returncode}):\n{p.stderr[-3000:]}")
    values = [float(m.group(1)) for m in metric.finditer(p.stdout)] if metric else []
    return wall, values


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--metric", default="", help="regex with one group: a number the command prints (higher or lower)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if command and command[0] == "python":
        command[0] = sys.executable
    metric = re.compile(args.metric) if args.metric else None
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}; load {os.getloadavg()[0]:.2f}")
    print(f"command: {' '.join(command)}")
    walls: dict[str, list[float]] = {"old": [], "new": []}
    metrics: dict[str, list[float]] = {"old": [], "new": []}
    for k in range(args.rounds):
        order = ("old", "new") if k % 2 == 0 else ("new", "old")
        for side in order:
            wall, values = run(args.old if side == "old" else args.new, command, metric)
            walls[side].append(wall)
            metrics[side].extend(values)
            print(f"round {k + 1} {side}: {wall:.1f} s" + (f", metric {values}" if values else ""), flush=True)
    old, new = statistics.median(walls["old"]), statistics.median(walls["new"])
    print(f"wall median: old {old:.1f} s, new {new:.1f} s, new/old {new / old:.3f}")
    if metrics["old"] and metrics["new"]:
        mo, mn = statistics.median(metrics["old"]), statistics.median(metrics["new"])
        print(f"metric median: old {mo:g}, new {mn:g}, new/old {mn / mo:.3f}")
    print(f"load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
