"""Fixtures of the web tests: the real model-run files merged, an app per test, users, logged-in clients."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient

from thoughtsource.web.app import ServeSettings, create_app
from thoughtsource.web.auth import hash_password
from thoughtsource.web.data import ServedData

PASSWORD = "correct horse battery"
CSRF_FIELD_RE = re.compile(r'name="csrf_token" value="([^"]+)"')
PAGE_DATA_RE = re.compile(r'<script type="application/json" id="page-data">(.*?)</script>', re.S)

XSS_QUESTION = '<script>alert("q")</script> Which <img src=x onerror=alert(1)> is it?'


@pytest.fixture(scope="session")
def model_run_files(examples_dir: Path) -> list[Path]:
    files = sorted((examples_dir / "model_runs").glob("*.json"))
    assert len(files) == 4, files
    return files


@pytest.fixture(scope="session")
def served(model_run_files: list[Path]) -> ServedData:
    """GPT-4, GPT-3.5, Flan-T5 and Cohere CoTs merged (1302 samples); read-only, shared by the tests."""
    return ServedData.load(model_run_files)


@pytest.fixture
def xss_file(tmp_path: Path) -> Path:
    """A ThoughtSource file whose texts, ids and names carry script payloads."""
    sample = {
        "id": 'x"><script>alert(3)</script>',
        "question": XSS_QUESTION,
        "type": "multiplechoice",
        "choices": ["<img src=x onerror=alert(2)>", "plain"],
        "answer": ["plain"],
        "context": "<iframe src=javascript:alert(4)>",
        "cot": ["<b onmouseover=alert(5)>bold</b>"],
        "generated_cot": [
            {"id": "c1", "cot": "First </script><script>alert(6)</script>. It is plain.", "model": "{'name': '<svg onload=alert(7)>'}",
             "answers": [{"id": "a1", "answer": "<img src=y onerror=alert(8)>", "correct_answer": False}]},
            {"id": "c2", "cot": "It is plain. Nothing else.", "model": {"name": "m2"}, "answers": []},
        ],
    }
    path = tmp_path / "xss.json"
    path.write_text(json.dumps({"evil<ds>": {"test": [sample]}}))
    return path


@pytest.fixture
def make_app(tmp_path: Path, served: ServedData) -> Callable[..., object]:
    def make(data: ServedData | None = served, files: list[Path] | None = None, **kw: object):
        settings = ServeSettings(files=files or data.files, db=tmp_path / "annotations.sqlite", **kw)
        return create_app(settings, data=data if files is None else None)

    return make


@pytest.fixture
def app(make_app):
    return make_app()


@functools.cache
def _password_hash() -> str:
    """One real argon2id hash of PASSWORD for every test user (as tests/web/test_load.py does): a hash costs ~0.1-0.5 s
    and the tests add ~90 users; every login still verifies it with argon2."""
    return hash_password(PASSWORD)


def add_user(app, name: str, role: str = "annotator") -> None:
    app.state.db.add_user(name, _password_hash(), role)


def login(app, name: str) -> tuple[TestClient, str]:
    """A TestClient logged in as ``name``, and its CSRF token."""
    client = TestClient(app)
    r = client.get("/login")
    token = CSRF_FIELD_RE.search(r.text).group(1)
    r = client.post("/login", data={"name": name, "password": PASSWORD, "csrf_token": token, "next": "/samples"},
                    follow_redirects=False)
    assert r.status_code == 303, r.text
    page = client.get("/samples")
    assert page.status_code == 200
    return client, CSRF_FIELD_RE.search(page.text).group(1)


def page_data(html: str) -> dict:
    return json.loads(PAGE_DATA_RE.search(html).group(1))


def first_multi_cot_sample(served: ServedData):
    return next(it for it in served.items if len(it.sample.generated_cot) >= 7)


@contextlib.contextmanager
def live_server(app, forwarded_allow_ips: str | None = None) -> Iterator[str]:
    """Run ``app`` with uvicorn in a thread on 127.0.0.1, a free port, configured as ``serve`` does
    (``web.app.make_server``); yields the base URL."""
    import threading
    import time

    from thoughtsource.listen import bind
    from thoughtsource.web.app import make_server

    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = make_server(app, forwarded_allow_ips, lifespan="off", timeout_keep_alive=30)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()
