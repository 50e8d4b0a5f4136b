"""Per-request latency of the annotator on one keep-alive connection, beside a new connection for each request.

    PYTHONPATH=src python benchmarks/bench_keepalive.py [--requests 200] [--rounds 3]

Issue 42, finding 3: ``listen.bind`` made its socket with protocol 0, so asyncio never set ``TCP_NODELAY`` on the
connections it accepted; uvicorn writes a response's head and body apart, and on a keep-alive connection the body
waited for the client's delayed ACK (~40 ms).  A new connection per request hid it (the handshake's ACKs).

Two real servers (``web.app.make_server``, as ``serve`` runs it, uvicorn in threads of this process on 127.0.0.1)
serve the example model runs: one on the socket ``listen.bind`` makes now (``IPPROTO_TCP``, ``TCP_NODELAY``), the
baseline on a socket made as before (protocol 0).  For each, ``--requests`` GETs of a static file and of the log-in
page, on one keep-alive connection and with a new connection each time; the cells alternate ``--rounds`` times so
both servers see the same load.  Prints the median and p95 per request and the ratio baseline / ours.  No assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import platform
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILE = ROOT.parent / "shared/data/thoughtsource_examples/annotated/annotated_set.json"
PATHS = {"static file": "/static/app.css", "log-in page": "/login"}


def old_socket() -> socket.socket:
    """The listening socket as ``listen.bind`` made it before issue 42: protocol 0, no TCP_NODELAY."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextlib.contextmanager
def running(app: object, sock: socket.socket) -> Iterator[int]:
    from thoughtsource.web.app import make_server

    server = make_server(app, lifespan="off", timeout_keep_alive=60)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def timed(port: int, path: str, n: int, keep_alive: bool) -> list[float]:
    out = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(n):
        if not keep_alive:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        t = time.perf_counter()
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        out.append(time.perf_counter() - t)
        assert r.status == 200, r.status
        if not keep_alive:
            conn.close()
    conn.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--file", type=Path, default=DEFAULT_FILE)
    args = ap.parse_args()

    from thoughtsource.listen import bind
    from thoughtsource.web.app import ServeSettings, create_app

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["THOUGHTSOURCE_HOME"] = tmp
        app = create_app(ServeSettings(files=[args.file], db=Path(tmp) / "a.sqlite", secret_dir=Path(tmp),
                                       allowed_hosts=None))
        times: dict[tuple[str, str, str], list[float]] = {}
        with running(app, bind("127.0.0.1", 0)) as ours, running(app, old_socket()) as baseline:
            for _ in range(args.rounds):
                for server, port in (("baseline", baseline), ("ours", ours)):
                    for what, path in PATHS.items():
                        for conn, keep in (("keep-alive", True), ("new connection", False)):
                            times.setdefault((server, what, conn), []).extend(
                                timed(port, path, args.requests // args.rounds, keep))
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("command:", " ".join([sys.executable.rsplit("/", 1)[-1], *sys.argv]))
    print(f"{'request':<14} {'connection':<15} {'baseline p50 / p95 (ms)':>26} {'ours p50 / p95 (ms)':>22} {'p50 ratio':>10}")
    for what in PATHS:
        for conn in ("keep-alive", "new connection"):
            b, o = times[("baseline", what, conn)], times[("ours", what, conn)]
            bp, op = statistics.median(b), statistics.median(o)
            bq, oq = statistics.quantiles(b, n=20)[-1], statistics.quantiles(o, n=20)[-1]
            print(f"{what:<14} {conn:<15} {bp * 1e3:>12.2f} / {bq * 1e3:<11.2f} {op * 1e3:>10.2f} / {oq * 1e3:<9.2f} "
                  f"{bp / op:>9.1f}x")


if __name__ == "__main__":
    main()
