"""Generation throughput: ThoughtSource-style sequential calls vs ours, against one local server.

The server (``thoughtsource.testing.fault_server``) answers every request after 200 ms, like a
remote model API.  Both sides generate the same two-stage requests (CoT, then answer extraction)
for the same WorldTree samples, in the same run, each with a fresh completion store:

* baseline: the published ThoughtSource generator's loop: one request at a time, then
  ``time.sleep(api_time_interval)`` with the paper's ``api_time_interval = 1.0`` s;
* ours: :func:`thoughtsource.generate.generate` with ``concurrency=64``.

Both numbers are measured (the baseline on fewer samples: its rate does not depend on how many).

    python benchmarks/bench_generate.py [--baseline-samples 4] [--samples 100] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from thoughtsource.backends import get_backend
from thoughtsource.collection import Collection
from thoughtsource.generate import GenerateConfig, generate, plan
from thoughtsource.prompts import load_fragments
from thoughtsource.prompts.build import answer_prompt

DATA = Path(os.environ.get("THOUGHTSOURCE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SOURCE = DATA / "thoughtsource_examples" / "tests_unit_data" / "worldtree_100_dataset.json"
CONFIG = {"instruction_keys": ["qa-01"], "cot_trigger_keys": ["kojima-01"], "answer_extraction_keys": ["kojima-A-D"],
          "backend": "openai", "model": "fault-echo", "max_tokens": 128}


SERVER = """
import sys
from thoughtsource.testing.fault_server import run_fault_server
with run_fault_server(latency_s=float(sys.argv[1])) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
"""


@contextlib.contextmanager
def server_process(latency: float) -> Iterator[str]:
    """The fault server in its own process (as a real server would be), so it shares no GIL with the client."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def baseline(collection: Collection, url: str, interval: float) -> tuple[int, float]:
    """One request at a time + a fixed sleep after each, as ThoughtSource's generator did."""
    cfg = GenerateConfig.parse(CONFIG, base_urls=[url], concurrency=1)
    backend = get_backend("openai", model=cfg.model, base_url=[url], concurrency=1)
    fragments = load_fragments()
    units = plan(collection, cfg, fragments, backend.cache_identity())
    calls = 0

    async def run() -> None:
        nonlocal calls
        for u in units:
            (cot,) = await backend.complete([u.request])
            time.sleep(interval)
            calls += 1
            for ex in u.extractions:
                p = answer_prompt(u.prompt, cot.text, fragments, ex)
                await backend.complete([u.request.__class__(prompt=p.text, max_tokens=cfg.answer_max_tokens)])
                time.sleep(interval)
                calls += 1
        await backend.aclose()

    t0 = time.perf_counter()
    asyncio.run(run())
    return calls, time.perf_counter() - t0


def ours(collection: Collection, url: str, db: Path) -> tuple[int, float]:
    t0 = time.perf_counter()
    report = generate(collection, CONFIG, base_urls=[url], concurrency=64, store=db, progress=False)
    elapsed = time.perf_counter() - t0
    assert report.errors == 0 and report.cached == 0
    return report.called, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100, help="samples for ours (2 requests each)")
    ap.add_argument("--baseline-samples", type=int, default=4, help="samples for the sequential baseline")
    ap.add_argument("--latency", type=float, default=0.2, help="server latency per request (s)")
    ap.add_argument("--interval", type=float, default=1.0, help="baseline sleep after each call (api_time_interval)")
    args = ap.parse_args()

    full = Collection.from_json(SOURCE)
    with server_process(args.latency) as url, tempfile.TemporaryDirectory() as tmp:
        base_calls, base_s = baseline(full.select(split="train", number_samples=args.baseline_samples, seed=1), url, args.interval)
        our_calls, our_s = ours(full.select(split="train", number_samples=args.samples, seed=2), url, Path(tmp) / "bench.sqlite")
    base_rate, our_rate = base_calls / base_s, our_calls / our_s
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.platform()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"server: thoughtsource.testing.fault_server in its own process, {args.latency * 1000:.0f} ms latency per request")
    print(f"baseline (sequential + {args.interval:g} s sleep): {base_calls} calls in {base_s:.2f} s = {base_rate:.3f} calls/s")
    print(f"ours (concurrency 64, store):            {our_calls} calls in {our_s:.2f} s = {our_rate:.2f} calls/s")
    print(f"throughput ratio: {our_rate / base_rate:.1f}x")


if __name__ == "__main__":
    main()
