"""Generation throughput: ThoughtSource-style sequential calls vs ours, against one local server.

The server (``thoughtsource.testing.fault_server``) answers every request after 200 ms, like a
remote model API.  Both sides generate the same two-stage requests (CoT, then answer extraction)
for the same WorldTree samples, in the same run, each with a fresh completion store:

* baseline: the published ThoughtSource generator's loop: one request at a time, then
  ``time.sleep(api_time_interval)`` with the paper's ``api_time_interval = 1.0`` s;
* ours: :func:`thoughtsource.generation.generate` at the default concurrency (``GenerateConfig``),
  ``--n`` self-consistency samples per prompt (temperature 0.7), so there are enough requests to
  keep that many in flight.

``--sweep 8,16,...`` instead measures ours at each concurrency: calls/s and client CPU ms per call
(``time.process_time`` of this process; the server runs in its own), once with the backend's
default connection pools and once with one httpx client holding every connection (``pool_size=0``,
the code before the fix), next to the ideal ``concurrency / latency``.

    python benchmarks/bench_generate.py [--samples 100] [--n 4] [--baseline-samples 4] [--latency 0.2]
    python benchmarks/bench_generate.py --sweep 8,16,32,64,128,256
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
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
from thoughtsource.generation import GenerateConfig, generate
from thoughtsource.generation.plan import plan_units
from thoughtsource.prompts import load_fragments
from thoughtsource.prompts.build import answer_prompt

DATA = Path(os.environ.get("THOUGHTSOURCE_DATA") or os.environ.get("THOUGHTSOURCE_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
SOURCE = DATA / "thoughtsource_examples" / "tests_unit_data" / "worldtree_100_dataset.json"
CONFIG = {"instruction_keys": ["qa-01"], "cot_trigger_keys": ["kojima-01"], "answer_extraction_keys": ["kojima-A-D"],
          "backend": "openai", "model": "fault-echo", "max_tokens": 128}
DEFAULT_CONCURRENCY = GenerateConfig.model_fields["concurrency"].default


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
    units = plan_units(collection, cfg, fragments, backend.cache_identity())
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


def ours(collection: Collection, url: str, db: Path, concurrency: int, n: int, pool_size: int | None = None) -> tuple[int, float, float]:
    """(calls, seconds, client CPU seconds) of one generate() run on a fresh store."""
    options = {} if pool_size is None else {"pool_size": pool_size}
    sampling = {"n": n, "temperature": 0.7} if n > 1 else {}
    t0, c0 = time.perf_counter(), time.process_time()
    report = generate(collection, CONFIG, base_urls=[url], concurrency=concurrency, store=db, progress=False,
                      backend_options=options, **sampling)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert report.errors == 0 and report.cached == 0
    return report.called, elapsed, cpu


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, {platform.platform()}"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def sweep(full: Collection, url: str, levels: list[int], samples: int, latency: float) -> None:
    """calls/s and client CPU ms/call per concurrency, default pools vs one client, as a Markdown table."""
    print("| in flight | ideal calls/s | calls | ours: calls/s | ours: CPU ms/call | one client: calls/s | one client: CPU ms/call | load (1/5/15 min) |")
    print("|---|---|---|---|---|---|---|---|")
    collection = full.select(split="train", number_samples=samples, seed=2)
    for c in levels:
        n = max(1, math.ceil(4 * c / samples))  # >= 4 x concurrency CoT requests: in flight stays at c
        row = []
        for pool_size in (None, 0):
            with tempfile.TemporaryDirectory() as tmp:
                calls, s, cpu = ours(collection, url, Path(tmp) / "bench.sqlite", c, n, pool_size)
            row.append((calls, s, cpu))
        (calls, s, cpu), (calls0, s0, cpu0) = row
        print(f"| {c} | {c / latency:.0f} | {calls} | {calls / s:.1f} | {1000 * cpu / calls:.2f} | {calls0 / s0:.1f} | "
              f"{1000 * cpu0 / calls0:.2f} | {load()} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100, help="samples for ours")
    ap.add_argument("--n", type=int, default=4, help="self-consistency CoTs per prompt for ours (2 requests each)")
    ap.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="ours: requests in flight")
    ap.add_argument("--baseline-samples", type=int, default=4, help="samples for the sequential baseline")
    ap.add_argument("--latency", type=float, default=0.2, help="server latency per request (s)")
    ap.add_argument("--interval", type=float, default=1.0, help="baseline sleep after each call (api_time_interval)")
    ap.add_argument("--sweep", default="", help="comma-separated concurrencies: print the table instead")
    args = ap.parse_args()

    full = Collection.from_json(SOURCE)
    print(f"machine: {machine()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"server: thoughtsource.testing.fault_server in its own process, {args.latency * 1000:.0f} ms latency per request")
    print(f"load average before: {load()}")
    with server_process(args.latency) as url, tempfile.TemporaryDirectory() as tmp:
        if args.sweep:
            sweep(full, url, [int(c) for c in args.sweep.split(",")], args.samples, args.latency)
            return
        base_calls, base_s = baseline(full.select(split="train", number_samples=args.baseline_samples, seed=1), url, args.interval)
        our_calls, our_s, our_cpu = ours(full.select(split="train", number_samples=args.samples, seed=2), url,
                                         Path(tmp) / "bench.sqlite", args.concurrency, args.n)
    base_rate, our_rate = base_calls / base_s, our_calls / our_s
    print(f"baseline (sequential + {args.interval:g} s sleep): {base_calls} calls in {base_s:.2f} s = {base_rate:.3f} calls/s")
    print(f"ours (concurrency {args.concurrency}, n={args.n}, store): {our_calls} calls in {our_s:.2f} s = {our_rate:.1f} calls/s "
          f"(ideal {args.concurrency / args.latency:.0f}), client CPU {1000 * our_cpu / our_calls:.2f} ms/call")
    print(f"load average after: {load()}")
    print(f"throughput ratio: {our_rate / base_rate:.1f}x")


if __name__ == "__main__":
    main()
