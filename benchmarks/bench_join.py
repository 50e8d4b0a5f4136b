"""A short request sent while a long one decodes: serve-model with continuous batching (joins the running batch) beside
mode prefix (the CPU default before issue 45: a batch decodes to its end before the next starts).

    PYTHONPATH=src python benchmarks/bench_join.py [--long 300] [--short 4] [--rounds 3]

For each mode, a real server (``run_model_server``: serve-model's app, uvicorn in a thread, embedded SmolLM2, one torch
thread) answers over HTTP (``/v1/chat/completions``, greedy):

* solo: the short request alone (median of ``--rounds``);
* behind: the long request is sent, and 1 s later the short one; the short one's latency (median of ``--rounds``).

Prints, per mode, solo, behind and behind / solo (issue 45's target: within 3x for continuous), and the ratio of the
two modes' behind latencies.  No assertions; both modes run in the same process, one after the other.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import threading
import time

import httpx

ESSAY = ("Write a long, detailed essay about the history of Rome, from its founding to the fall of the Western "
         "Empire.")


def ask(client: httpx.Client, content: str, max_tokens: int) -> tuple[float, int]:
    t = time.perf_counter()
    r = client.post("/chat/completions", json={"model": "smol", "messages": [{"role": "user", "content": content}],
                                               "max_tokens": max_tokens, "temperature": 0})
    r.raise_for_status()
    return time.perf_counter() - t, r.json()["usage"]["completion_tokens"]


def measure(mode: str, long: int, short: int, rounds: int) -> dict[str, float]:
    from thoughtsource.backends.server import run_model_server
    from thoughtsource.backends.transformers_local import TransformersBackend

    backend = TransformersBackend("embedded", device="cpu", mode=mode, threads=1)
    with run_model_server(backend, served_model_name="smol") as server, \
            httpx.Client(base_url=server.base_url, timeout=600) as client:
        ask(client, "What is 2+2?", short)  # warm-up
        solo = [ask(client, "What is 2+2?", short)[0] for _ in range(rounds)]
        behind, long_tokens = [], []
        for _ in range(rounds):
            out: dict[str, tuple[float, int]] = {}

            def send_long(out: dict[str, tuple[float, int]] = out) -> None:
                with httpx.Client(base_url=server.base_url, timeout=600) as other:
                    out["long"] = ask(other, ESSAY, long)

            t = threading.Thread(target=send_long)
            t.start()
            time.sleep(1.0)
            behind.append(ask(client, "What is 2+2?", short)[0])
            t.join()
            long_tokens.append(out["long"][1])
    return {"solo": statistics.median(solo), "behind": statistics.median(behind), "long_tokens": min(long_tokens)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--long", type=int, default=300)
    ap.add_argument("--short", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}")
    rows = {mode: measure(mode, args.long, args.short, args.rounds) for mode in ("prefix", "continuous")}
    print(f"{'mode':<11} {'solo s':>8} {'behind s':>9} {'behind/solo':>12} {'long tokens':>12}")
    for mode, r in rows.items():
        print(f"{mode:<11} {r['solo']:8.3f} {r['behind']:9.3f} {r['behind'] / r['solo']:12.2f} {r['long_tokens']:12.0f}")
    print(f"prefix behind / continuous behind: {rows['prefix']['behind'] / rows['continuous']['behind']:.1f}x")


if __name__ == "__main__":
    main()
