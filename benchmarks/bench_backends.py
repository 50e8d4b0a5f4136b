"""Batching in the local backends: the embedded SmolLM2 generating CoTs for real GSM8K questions.

1. ``transformers`` backend: one request at a time (batch_size=1) vs left-padded batches (batch_size=N).
2. ``serve-model`` server: one HTTP client at a time vs N concurrent clients whose requests the server
   gathers into batched generate calls.

Usage: PYTHONPATH=src python benchmarks/bench_backends.py [--n 16] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

from thoughtsource.backends import Request, get_backend
from thoughtsource.backends.server import run_model_server
from thoughtsource.backends.transformers_local import TransformersBackend
from thoughtsource.embedded import load_model

DATA = Path(os.environ.get("THOUGHTSOURCE_DATA") or os.environ.get("THOUGHTSOURCE_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def requests(n: int, max_tokens: int) -> list[Request]:
    lines = (DATA / "gsm8k" / "test.jsonl").read_text().splitlines()[:n]
    return [
        Request(messages=({"role": "user", "content": json.loads(line)["question"] + "\nLet's think step by step."},),
                max_tokens=max_tokens)
        for line in lines
    ]


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    model, tok = load_model("embedded")
    reqs = requests(args.n, args.max_tokens)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"workload: {args.n} GSM8K zero-shot CoT requests, greedy, max_tokens={args.max_tokens}, embedded SmolLM2-135M")

    one = TransformersBackend.from_loaded(model, tok, name="embedded", batch_size=1)
    many = TransformersBackend.from_loaded(model, tok, name="embedded", batch_size=args.n)
    many.complete_sync(reqs[:2])  # warm-up
    t_one, out_one = timed(lambda: [one.complete_sync([r])[0] for r in reqs])
    t_many, out_many = timed(lambda: many.complete_sync(reqs))
    same = sum(a.text == b.text for a, b in zip(out_one, out_many, strict=True))  # type: ignore[arg-type]
    print(f"transformers  one-by-one: {t_one:7.2f} s ({args.n / t_one:.2f} req/s)")
    print(f"transformers  batch={args.n}:   {t_many:7.2f} s ({args.n / t_many:.2f} req/s)  "
          f"speed-up {t_one / t_many:.1f}x, identical greedy texts {same}/{args.n}")

    server_backend = TransformersBackend.from_loaded(model, tok, name="embedded", batch_size=args.n)
    with run_model_server(server_backend, served_model_name="smollm2") as server:
        seq = get_backend("openai", model="smollm2", base_url=server.base_url, concurrency=1)
        par = get_backend("openai", model="smollm2", base_url=server.base_url, concurrency=args.n)
        t_seq, _ = timed(lambda: asyncio.run(seq.complete(reqs)))
        t_par, _ = timed(lambda: asyncio.run(par.complete(reqs)))
    print(f"serve-model   1 client:    {t_seq:7.2f} s ({args.n / t_seq:.2f} req/s)")
    print(f"serve-model   {args.n} clients:   {t_par:7.2f} s ({args.n / t_par:.2f} req/s)  speed-up {t_seq / t_par:.1f}x")


if __name__ == "__main__":
    main()
