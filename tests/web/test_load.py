"""Bounded load test on localhost: 50 annotators, each logged in on its own, each saving 20 annotations at once."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import re
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from thoughtsource.cli import app as cli_app
from thoughtsource.web.auth import hash_password

from .conftest import PASSWORD, live_server

log = logging.getLogger(__name__)

N_CLIENTS = 50
N_EACH = 20
LABELS = ["Incorrect reasoning", "Insufficient knowledge", "Incorrect reading comprehension", "Too verbose"]


async def _annotator(base: str, name: str, targets: list[dict]) -> int:
    async with httpx.AsyncClient(base_url=base, timeout=60, follow_redirects=True) as client:
        r = await client.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', r.text).group(1)
        r = await client.post("/login", data={"name": name, "password": PASSWORD, "csrf_token": token})
        assert r.status_code == 200 and str(r.url).endswith("/samples"), r.text[:300]
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', r.text).group(1)
        saved = 0
        for k, target in enumerate(targets):
            if k % 2 == 0:
                body = {**target, "key": "comment", "value": f"{name} note {k} <ok> & \"quoted\""}
            else:
                body = {**target, "key": LABELS[k % 4], "value": True}
            r = await client.put("/api/annotation", json=body, headers={"X-CSRF-Token": csrf})
            assert r.status_code == 200, r.text
            saved += 1
        return saved


@pytest.mark.slow
def test_fifty_concurrent_annotators_lose_nothing(make_app, served, tmp_path: Path) -> None:
    app = make_app()
    shared_hash = hash_password(PASSWORD)  # one argon2 hash for all: the test is about the server, not hashing
    names = [f"annotator{i:02d}" for i in range(N_CLIENTS)]
    for name in names:
        app.state.db.add_user(name, shared_hash, "annotator")
    cots = [{"dataset": it.dataset, "split": it.split, "sample_id": it.sample.id, "cot_id": c.id}
            for it in served.items for c in it.sample.generated_cot]
    # overlapping targets: annotator i works on CoTs 7*i .. 7*i+19, so neighbours share CoTs
    plan = {name: cots[7 * i : 7 * i + N_EACH] for i, name in enumerate(names)}

    async def run_all(base: str) -> list[int]:
        return await asyncio.gather(*(_annotator(base, n, plan[n]) for n in names))

    with live_server(app) as base:
        t = time.perf_counter()
        saved = asyncio.run(run_all(base))
        elapsed = time.perf_counter() - t
    log.info("50 annotators x 20 saves: %.1f s including 50 logins (%.0f saves/s)", elapsed, 1000 / elapsed)
    assert sum(saved) == N_CLIENTS * N_EACH
    db = app.state.db
    assert db.count() == N_CLIENTS * N_EACH
    per = collections.Counter(r.annotator for r in db.annotations())
    assert set(per.values()) == {N_EACH} and len(per) == N_CLIENTS

    out = tmp_path / "annotated.json"
    runner = CliRunner()
    args = ["annotations", "export", *map(str, served.files), "--db", str(db.path), "--out", str(out)]
    r = runner.invoke(cli_app, args)
    assert r.exit_code == 0, r.output
    exported = json.loads(out.read_text())
    found = collections.Counter()
    comments = set()
    for splits in exported.values():
        for xs in splits.values():
            for x in xs:
                for c in x["generated_cot"]:
                    for a in c["annotations"]:
                        found[a["author"]] += 1
                        assert set(a) == {"author", "date", "key", "value"}
                        if a["key"] == "comment":
                            comments.add(a["value"])
    assert sum(found.values()) == N_CLIENTS * N_EACH and set(found) == set(names)
    assert len(comments) == N_CLIENTS * N_EACH // 2
    assert 'annotator07 note 4 <ok> & "quoted"' in comments
