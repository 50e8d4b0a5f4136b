"""Annotation-save latency of the annotator while 60 people log in at once, next to the latency without them.

    PYTHONPATH=src python benchmarks/bench_web.py [--saves 200] [--logins 60] [--files FILE ...]

A real server (uvicorn in a subprocess, 127.0.0.1, a free port) serves the example model runs.  One logged-in
annotator saves annotations one after another (PUT /api/annotation) and we take the p50/p95 of those saves:

1. alone;
2. while ``--logins`` clients log in at the same moment (each one real argon2id verification; the clients run
   in their own process and the saves go on until the last log-in is through): ours, where
   the password check runs on its own small thread pool (``auth.VERIFY_CONCURRENCY`` threads), off the
   request workers;
3. the same burst against the first version (``--no-baseline`` skips it): the password check on the shared
   request workers behind a 4-slot semaphore, which is what made a save take seconds during a login burst.

Phases 1 and 2 alternate ``--rounds`` times (default 3) and are pooled, so that both see the same load of a
shared machine.  It prints the machine, the command, the numbers and the ratios (target: p95 with logins within 2x of p95
without).  No assertions; the bounded loops stop after ``--saves`` saves or 120 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

PASSWORD = "correct horse battery"
TOKEN_RE = re.compile(r'name="csrf_token" value="([^"]+)"')
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILES = sorted((ROOT.parent / "shared/data/thoughtsource_examples/model_runs").glob("*.json"))

SERVER = r"""
import os, sys, threading, uvicorn
from pathlib import Path
from thoughtsource.web.app import ServeSettings, create_app
from thoughtsource.web import auth
if os.environ.get("BENCH_BASELINE") == "1":
    # the first version: the whole log-in ran on the shared request workers, at most 4 verifications at once
    from starlette.concurrency import run_in_threadpool
    slots = threading.BoundedSemaphore(4)
    def old(db, name, password):
        with slots:
            return auth.authenticate(db, name, password)
    async def on_workers(db, name, password, client="unknown"):
        return await run_in_threadpool(old, db, name, password)
    auth.authenticate_async = on_workers
files = [Path(p) for p in os.environ["BENCH_FILES"].split(os.pathsep)]
app = create_app(ServeSettings(files=files, db=Path(os.environ["BENCH_DB"])))
uvicorn.run(app, host="127.0.0.1", port=int(os.environ["BENCH_PORT"]), log_level="warning")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(files: list[Path], db: Path, baseline: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "BENCH_FILES": os.pathsep.join(map(str, files)), "BENCH_DB": str(db), "BENCH_PORT": str(port),
           "BENCH_BASELINE": "1" if baseline else "0", "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-c", SERVER], env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(base + "/login", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not start")


async def login(client: httpx.AsyncClient, name: str) -> str:
    token = TOKEN_RE.search((await client.get("/login")).text).group(1)
    r = await client.post("/login", data={"name": name, "password": PASSWORD, "csrf_token": token})
    if r.status_code != 200:
        raise RuntimeError(f"log-in of {name} failed: {r.status_code}")
    return TOKEN_RE.search(r.text).group(1)


async def saves(client: httpx.AsyncClient, csrf: str, targets: list[dict], n: int, stop: asyncio.Event | None) -> list[float]:
    """Save one annotation after another; the latency of each in ms.  Stops after n saves, 120 s, or ``stop``."""
    out: list[float] = []
    t_end = time.perf_counter() + 120
    for k in range(n):
        if (stop is not None and stop.is_set()) or time.perf_counter() > t_end:
            break
        body = {**targets[k % len(targets)], "key": "Too verbose", "value": k % 2 == 0}
        t = time.perf_counter()
        r = await client.put("/api/annotation", json=body, headers={"X-CSRF-Token": csrf})
        out.append((time.perf_counter() - t) * 1000)
        if r.status_code != 200:
            raise RuntimeError(f"save failed: {r.status_code} {r.text[:200]}")
    return out


async def burst(base: str, names: list[str]) -> float:
    """``names`` log in at the same moment: every client fetches its form first, prints "ready", then all POST
    /login at once (→ 303).  Returns the seconds from the POSTs to the last one in."""
    clients = [httpx.AsyncClient(base_url=base, timeout=300) for _ in names]
    try:
        forms = await asyncio.gather(*(c.get("/login") for c in clients))
        tokens = [TOKEN_RE.search(f.text).group(1) for f in forms]
        print("ready", flush=True)

        async def one(c: httpx.AsyncClient, name: str, token: str) -> None:
            r = await c.post("/login", data={"name": name, "password": PASSWORD, "csrf_token": token})
            if r.status_code != 303:
                raise RuntimeError(f"log-in of {name} failed: {r.status_code}")

        t = time.perf_counter()
        await asyncio.gather(*(one(c, n, tok) for c, n, tok in zip(clients, names, tokens, strict=True)))
        return time.perf_counter() - t
    finally:
        for c in clients:
            await c.aclose()


async def measure(base: str, targets: list[dict], n_saves: int, names: list[str], rounds: int) -> dict[str, object]:
    """``rounds`` times: saves alone, then saves during a log-in burst, so both see the same (shared) machine.

    The burst runs in its own process, so its 60 clients do not share this event loop with the timed saves."""
    alone: list[float] = []
    during: list[float] = []
    login_s: list[float] = []
    async with httpx.AsyncClient(base_url=base, timeout=300, follow_redirects=True) as client:
        csrf = await login(client, "saver")
        await saves(client, csrf, targets, 20, None)  # warm-up
        for _ in range(rounds):
            alone += await saves(client, csrf, targets, n_saves // rounds, None)
            proc = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--burst-of", base, *names, stdout=asyncio.subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
            assert proc.stdout is not None
            if (await proc.stdout.readline()).strip() != b"ready":
                raise RuntimeError("the log-in burst did not start")
            stop = asyncio.Event()
            waiter = asyncio.ensure_future(proc.communicate())
            waiter.add_done_callback(lambda _, done=stop: done.set())
            # save until the last log-in is through (at most 20x the saves of a round, 120 s)
            during += await saves(client, csrf, targets, 20 * (n_saves // rounds), stop)
            out, _ = await waiter
            if proc.returncode != 0:
                raise RuntimeError("the log-in burst failed")
            login_s.append(float(out.decode().split()[-1]))
    return {"alone": alone, "during": during, "login_s": statistics.mean(login_s)}


def p(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1] if len(xs) > 1 else (xs[0] if xs else float("nan"))


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--burst-of":  # the burst process (see measure)
        print(f"{asyncio.run(burst(sys.argv[2], sys.argv[3:])):.3f}")
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--saves", type=int, default=200)
    ap.add_argument("--logins", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3, help="alternate alone / during a burst this many times")
    ap.add_argument("--files", nargs="*", type=Path, default=DEFAULT_FILES)
    ap.add_argument("--no-baseline", action="store_true", help="skip the first version's numbers")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from thoughtsource.web.auth import VERIFY_CONCURRENCY, hash_password
    from thoughtsource.web.data import ServedData
    from thoughtsource.web.db import AnnotationDB

    data = ServedData.load(args.files)
    targets = [{"dataset": it.dataset, "split": it.split, "sample_id": it.sample.id, "cot_id": c.id}
               for it in data.items[:50] for c in it.sample.generated_cot if c.id]
    names = [f"user{i:02d}" for i in range(args.logins)]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ["ours", *([] if args.no_baseline else ["baseline"])]:
            db = AnnotationDB(Path(tmp) / f"{variant}.sqlite")
            h = hash_password(PASSWORD)  # one hash for all: every log-in still runs one full verification
            for name in ["saver", *names]:
                db.add_user(name, h, "annotator")
            proc, base = start_server(args.files, db.path, baseline=variant == "baseline")
            try:
                results[variant] = asyncio.run(measure(base, targets, args.saves, names, args.rounds))
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    load = os.getloadavg()
    print(f"machine: {platform.machine()} {platform.system()}, {os.cpu_count()} cores, python {platform.python_version()}, "
          f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"password checks at once (ours): {VERIFY_CONCURRENCY}")
    ours = results["ours"]
    a, d = ours["alone"], ours["during"]
    print(f"saves alone:                        n={len(a):3d}  p50 {p(a, 50):7.1f} ms  p95 {p(a, 95):7.1f} ms")
    print(f"saves during {args.logins} logins (ours):     n={len(d):3d}  p50 {p(d, 50):7.1f} ms  p95 {p(d, 95):7.1f} ms"
          f"   ({args.logins} logins took {ours['login_s']:.1f} s on average)")
    print(f"ratio p95 during / alone (ours): {p(d, 95) / p(a, 95):.2f}x  (target <= 2x)")
    if "baseline" in results:
        b = results["baseline"]
        bd = b["during"]
        print(f"saves during {args.logins} logins (first version): n={len(bd):3d}  p50 {p(bd, 50):7.1f} ms  p95 {p(bd, 95):7.1f} ms"
              f"   ({args.logins} logins took {b['login_s']:.1f} s; its saves alone: p95 {p(b['alone'], 95):.1f} ms)")
        print(f"ratio p95 during / alone (first version): {p(bd, 95) / p(b['alone'], 95):.2f}x")


if __name__ == "__main__":
    main()
