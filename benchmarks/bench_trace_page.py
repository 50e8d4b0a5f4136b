"""The sample page of three 20 KB reasoning traces: its page data and the server time of a first view (issue 42).

    PYTHONPATH=src python benchmarks/bench_trace_page.py [--samples 3] [--chars 20000] [--views 5] [--browser]

A ThoughtSource file of ``--samples`` MATH-500 problems, each with three reasoning traces of ``--chars`` characters
(``thoughtsource.testing.traces``: inline ``<think>`` blocks, one cut off), is served by the real app in this process
(``create_app``; requests through Starlette's TestClient, so the times are the server's, without a network).  A
logged-in annotator opens each sample once: that *first view* computes the sample's sentence similarity (cached per
app after it; scikit-learn is imported before timing, as in a running server), then views it ``--views`` times more
(*warm*: the page alone).  Printed per sample and as medians:

* the size of ``#page-data`` in bytes, split into its ``similarity`` part and the rest (so that the numbers mean the
  same before and after the similarity keeps fewer pairs), and the HTML of the page;
* the server time of the first view, of a warm view, and their difference (the similarity computation), and the
  time the page spends cutting the traces into thinking and answer (``web.traces.trace_parts``, part of every view);
* the ratios to the targets: page data at most 150 KB, a first view at most 0.3 s.

``--browser``: Chromium (Playwright, /usr/bin/chromium) also loads the first sample at 1440 and 390 px wide and
prints the page height as served (thoughts folded, long parts collapsed) beside the same page with everything
unfolded and shown, which is what the page looked like before (every CoT in full).  No assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PASSWORD = "correct horse battery"
PAGE_DATA_RE = re.compile(r'<script type="application/json" id="page-data">(.*?)</script>', re.S)
TOKEN_RE = re.compile(r'name="csrf_token" value="([^"]+)"')
TARGET_BYTES = 150_000
TARGET_FIRST_S = 0.3


def _login(app: Any) -> Any:
    from fastapi.testclient import TestClient

    from thoughtsource.web.auth import hash_password

    app.state.db.add_user("alice", hash_password(PASSWORD), "annotator")
    client = TestClient(app)
    token = TOKEN_RE.search(client.get("/login").text).group(1)  # type: ignore[union-attr]
    r = client.post("/login", data={"name": "alice", "password": PASSWORD, "csrf_token": token, "next": "/samples"},
                    follow_redirects=False)
    assert r.status_code == 303, r.text
    return client


def _view(client: Any, url: str) -> tuple[float, str]:
    t = time.perf_counter()
    r = client.get(url)
    dt = time.perf_counter() - t
    r.raise_for_status()
    return dt, r.text


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def measure(path: Path, db: Path, views: int) -> list[dict[str, Any]]:
    from jinja2.utils import htmlsafe_json_dumps

    from thoughtsource.web.app import ServeSettings, create_app
    from thoughtsource.web.data import ServedData
    from thoughtsource.web.similarity import pairwise
    from thoughtsource.web.traces import trace_parts

    data = ServedData.load([path])
    app = create_app(ServeSettings(files=[path], db=db), data=data)
    client = _login(app)
    t = time.perf_counter()
    pairwise(["Warm up the imports.", "Warm up the imports."])
    print(f"scikit-learn import and a first tiny similarity (not counted below): {time.perf_counter() - t:.2f} s")
    rows = []
    for it in data.items:
        url = f"/sample/{it.dataset}/{it.split}/{it.sample.id}"
        first, html = _view(client, url)
        warm = statistics.median(_view(client, url)[0] for _ in range(views))
        texts = [c.cot or "" for c in it.sample.generated_cot]
        parts = statistics.median(_timed(lambda ts=texts: [trace_parts(t) for t in ts]) for _ in range(views))
        raw = PAGE_DATA_RE.search(html).group(1)  # type: ignore[union-attr]
        pd = json.loads(raw)
        # the similarity's share, written as the template writes the page data (jinja's tojson)
        sim = len(str(htmlsafe_json_dumps(pd["similarity"])).encode())
        rows.append({"sample": it.sample.id, "trace_chars": [len(c.cot or "") for c in it.sample.generated_cot],
                     "page_data": len(raw.encode()), "similarity": sim, "pairs": len(pd["similarity"]["pairs"]),
                     "html": len(html.encode()), "first_s": first, "warm_s": warm, "parts_s": parts})
    return rows


def browser_heights(path: Path, db: Path) -> dict[str, tuple[int, int]]:
    """Page heights in px at 1440 and 390 px wide: as served, and with every thought unfolded and every part shown."""
    import socket
    import threading

    from playwright.sync_api import sync_playwright

    from thoughtsource.web.app import ServeSettings, create_app, make_server
    from thoughtsource.web.auth import hash_password
    from thoughtsource.web.data import ServedData

    data = ServedData.load([path])
    app = create_app(ServeSettings(files=[path], db=db), data=data)
    app.state.db.add_user("bob", hash_password(PASSWORD), "annotator")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = make_server(app, None, lifespan="off")
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    it = data.items[0]
    out = {}
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox", "--disable-gpu"])
            for width in (1440, 390):
                page = b.new_page(viewport={"width": width, "height": 900})
                page.goto(base + "/login")
                page.fill('input[name="name"]', "bob")
                page.fill('input[name="password"]', PASSWORD)
                page.click('button[type="submit"]')
                page.wait_for_url(re.compile(r".*/samples$"))
                page.goto(base + f"/sample/{it.dataset}/{it.split}/{it.sample.id}")
                served = page.evaluate("document.documentElement.scrollHeight")
                page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; });"
                              "document.querySelectorAll('.part.collapsed').forEach((p) => p.classList.remove('collapsed'))")
                out[f"{width} px"] = (served, page.evaluate("document.documentElement.scrollHeight"))
                page.close()
            b.close()
    finally:
        server.should_exit = True
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=3, help="MATH-500 problems, three traces each (default 3)")
    ap.add_argument("--chars", type=int, default=20_000, help="characters per trace (default 20000)")
    ap.add_argument("--views", type=int, default=5, help="warm views per sample (median; default 5)")
    ap.add_argument("--browser", action="store_true", help="also the page height in Chromium, folded and unfolded")
    args = ap.parse_args()

    from thoughtsource.testing.traces import write_long_traces

    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {' / '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("command: " + " ".join(["python", "benchmarks/bench_trace_page.py", *sys.argv[1:]]))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_long_traces(DATA, Path(tmp) / "traces.json", samples=args.samples, trace_chars=args.chars)
        rows = measure(path, Path(tmp) / "a.sqlite", args.views)
        print(f"\n{'sample':<12} {'trace chars':>20} {'page data':>10} {'similarity':>10} {'pairs':>7} {'rest':>7} "
              f"{'html':>9} {'first s':>8} {'warm s':>7} {'sim s':>6} {'parts s':>7}")
        for r in rows:
            print(f"{r['sample']:<12} {'/'.join(map(str, r['trace_chars'])):>20} {r['page_data']:>10,} {r['similarity']:>10,} "
                  f"{r['pairs']:>7,} {r['page_data'] - r['similarity']:>7,} {r['html']:>9,} {r['first_s']:>8.3f} "
                  f"{r['warm_s']:>7.3f} {r['first_s'] - r['warm_s']:>6.3f} {r['parts_s']:>7.3f}")
        med = {k: statistics.median(r[k] for r in rows) for k in ("page_data", "similarity", "html", "first_s", "warm_s", "parts_s")}
        print(f"\nmedian page data {med['page_data']:,.0f} B (similarity {med['similarity']:,.0f} B, the rest "
              f"{med['page_data'] - med['similarity']:,.0f} B); html {med['html']:,.0f} B")
        print(f"median first view {med['first_s']:.3f} s, warm view {med['warm_s']:.3f} s "
              f"(the similarity: {med['first_s'] - med['warm_s']:.3f} s; "
              f"the traces cut into parts, in the warm view: {med['parts_s']:.3f} s)")
        print(f"ratio page data / target {TARGET_BYTES:,} B: {med['page_data'] / TARGET_BYTES:.2f}x "
              f"(without the similarity: {(med['page_data'] - med['similarity']) / TARGET_BYTES:.3f}x)")
        print(f"ratio first view / target {TARGET_FIRST_S} s: {med['first_s'] / TARGET_FIRST_S:.2f}x "
              f"(warm view: {med['warm_s'] / TARGET_FIRST_S:.2f}x)")
        if args.browser:
            print("\npage height in Chromium, as served (folded, collapsed) / everything shown (the page before):")
            for width, (served, shown) in browser_heights(path, Path(tmp) / "b.sqlite").items():
                print(f"  {width}: {served:,} px / {shown:,} px = {served / shown:.2f}x")


if __name__ == "__main__":
    main()
