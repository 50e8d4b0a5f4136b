"""Kill -9 a generation run at random points, resume, and compare with an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from thoughtsource.testing.fault_server import run_fault_server

REPO = Path(__file__).resolve().parents[2]
N_SAMPLES = 30  # x 2 triggers = 60 CoTs + 60 answers = 120 completions


def _signature(prompt: Any, messages: Any, max_tokens: int) -> str:
    return json.dumps([prompt, messages, max_tokens], sort_keys=True)


def _stored_signatures(db: Path) -> set[str]:
    """The requests whose completions are committed in the store (read like another process would)."""
    if not db.exists():
        return set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = con.execute("SELECT request FROM completions").fetchall()
    except sqlite3.OperationalError:  # the table does not exist yet
        return set()
    finally:
        con.close()
    out = set()
    for (raw,) in rows:
        r = json.loads(raw)
        out.add(_signature(r["prompt"], r["messages"], r["params"]["max_tokens"]))
    return out


def _server_signature(body: dict[str, Any]) -> str:
    return _signature(body.get("prompt"), body.get("messages"), body["max_tokens"])


def _command(src: Path, url: str, db: Path, out: Path) -> list[str]:
    """The loaded path (``--split``/``--n-samples`` select from the file), or, for a file of exactly the samples, the
    streamed one (every sample: read, generated for and written a chunk at a time)."""
    select = [] if src.name == "selected.json" else ["--split", "train", "--n-samples", str(N_SAMPLES)]
    return [sys.executable, "-m", "thoughtsource", "-q", "generate", "--file", str(src), *select, "--triggers",
            "kojima-01,none", "--backend", "openai", "--base-url", url, "--model", "fault-echo", "--concurrency", "8",
            "--db", str(db), "--out", str(out)]




@pytest.mark.slow
@pytest.mark.parametrize("path", ["loaded", "streamed"])
def test_sigkill_at_random_points_then_resume(examples_dir: Path, tmp_path: Path, path: str, without_dates: Any):
    src = examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if path == "streamed":  # the same 30 samples as a file of their own: generated for and written as they are read
        from thoughtsource.collection import Collection

        Collection.load(src).select(split="train", number_samples=N_SAMPLES, seed=0).dump(tmp_path / "selected.json")
        src = tmp_path / "selected.json"
    seed = int(os.environ.get("THOUGHTSOURCE_CRASH_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    total = 2 * N_SAMPLES * 2
    thresholds = sorted(rng.sample(range(3, total - 10), 3))
    db, out = tmp_path / "crash.sqlite", tmp_path / "crash.json"
    with run_fault_server(latency_s=0.15, latency_jitter_s=0.1) as server:
        kills: list[tuple[float, set[str]]] = []
        for threshold in thresholds:
            proc = subprocess.Popen(_command(src, server.base_url, db, out), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 120
            while len(_stored_signatures(db)) < threshold + rng.randint(0, 3):
                assert proc.poll() is None, f"run ended before it was killed (seed {seed}): {proc.stderr.read().decode()[-2000:]}"
                assert time.monotonic() < deadline, f"no progress (seed {seed})"
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stderr.close()
            kills.append((time.monotonic(), _stored_signatures(db)))  # taken after the process is gone
        assert not out.exists()
        done = subprocess.run(_command(src, server.base_url, db, out), env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        requests = server.requests
        # a finished run, re-run, makes zero calls
        again = subprocess.run(_command(src, server.base_url, db, tmp_path / "again.json"), env=env, capture_output=True,
                               text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == len(requests)

        # an uninterrupted run on a fresh store
        ref_db, ref_out = tmp_path / "ref.sqlite", tmp_path / "ref.json"
        ref = subprocess.run(_command(src, server.base_url, ref_db, ref_out), env=env, capture_output=True, text=True, timeout=300)
        assert ref.returncode == 0, ref.stderr

    # no request for a completion that was already committed when a run was killed
    for i, (killed_at, committed) in enumerate(kills):
        later = [r for r in requests if r.time > killed_at and _server_signature(r.body) in committed]
        assert later == [], f"kill {i} (seed {seed}): {len(later)} requests for completions already in the store"
    # each completion was answered once, except the ones in flight when a run was killed (≤ concurrency per kill)
    answered = [_server_signature(r.body) for r in requests if r.outcome == "ok"]
    assert len(set(answered)) == total
    assert len(answered) - total <= 8 * len(kills), f"seed {seed}"
    # the resumed output equals an uninterrupted run (dates aside), and so does the re-run's
    assert without_dates(out) == without_dates(ref_out)
    assert without_dates(tmp_path / "again.json") == without_dates(ref_out)
    assert len(_stored_signatures(db)) == total
