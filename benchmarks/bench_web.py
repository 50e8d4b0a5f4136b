"""Annotation saves per second: a connection per save (baseline) vs the annotator's per-thread connection.

    PYTHONPATH=src python benchmarks/bench_web.py [--saves 300]

Both write the same upsert into a WAL database with the same pragmas.  The baseline opens and closes a
connection for every save: closing the last connection of a WAL database checkpoints it (and truncates the
WAL), which is what made the first version of web/db.py slow under load.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from thoughtsource.web.db import BUSY_TIMEOUT_MS, AnnotationDB, CotRef, now


def baseline_save(path: Path, ref: CotRef, annotator: str, key: str, value: object) -> None:
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        t = now()
        conn.execute(
            "INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, split, sample_id, cot_id, annotator, key) "
            "DO UPDATE SET value = excluded.value, updated = excluded.updated",
            (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, key, json.dumps(value), t, t),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--saves", type=int, default=300)
    args = ap.parse_args()
    refs = [CotRef("commonsense_qa", "validation", f"s{i}", f"c{i}") for i in range(args.saves)]
    with tempfile.TemporaryDirectory() as tmp:
        base_db = AnnotationDB(Path(tmp) / "baseline.sqlite")
        base_db.close()
        t = time.perf_counter()
        for r in refs:
            baseline_save(base_db.path, r, "alice", "Too verbose", True)
        baseline = time.perf_counter() - t
        ours_db = AnnotationDB(Path(tmp) / "ours.sqlite")
        t = time.perf_counter()
        for r in refs:
            ours_db.upsert(r, "alice", "Too verbose", True)
        ours = time.perf_counter() - t
        assert base_db.count() == ours_db.count() == args.saves
    print(f"machine: {platform.machine()} {platform.system()}, python {platform.python_version()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"baseline (connection per save): {args.saves} saves in {baseline:.3f} s = {args.saves / baseline:,.0f} saves/s")
    print(f"ours (per-thread connection):   {args.saves} saves in {ours:.3f} s = {args.saves / ours:,.0f} saves/s")
    print(f"ratio: {baseline / ours:.1f}x faster")


if __name__ == "__main__":
    main()
