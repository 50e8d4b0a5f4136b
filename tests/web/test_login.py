"""Issue 42, finding 6: log-in against a live server, as an attacker who has read ``auth.py`` would try it.

* a flood of wrong checks for a name does not turn away its owner's browser (device cookie) with a 503;
* a 503 (no password checked) never clears a throttle bucket;
* the Host check takes a host and an optional port, nothing else;
* ``serve --allowed-hosts`` refuses what is not a host at start, with one line.

Counted, never timed: the attackers' password checks are held (a wrapped ``auth.authenticate``) until the log-in
under test has been queued or refused, and the queue's own counts say when that is.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from .conftest import CSRF_FIELD_RE, PASSWORD, add_user, live_server

WRONG = "a wrong password!"


def _hold_wrong_guesses(monkeypatch: pytest.MonkeyPatch, gate: threading.Event) -> None:
    """A fresh password queue with serve's bounds, whose wrong-password checks wait for ``gate`` and then fail
    (as argon2 would, without its cost); the right password is checked for real."""
    from thoughtsource.web import auth

    real = auth.authenticate

    def held(db, name, password):
        if password == WRONG:
            gate.wait(120)
            raise auth.NotAuthenticated("wrong user name or password")
        return real(db, name, password)

    monkeypatch.setattr(auth, "authenticate", held)
    monkeypatch.setattr(auth, "password_queue", auth.PasswordQueue())


def _client(base: str, address: str, cookies: httpx.Cookies | None = None) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=120, cookies=cookies,
                        transport=httpx.HTTPTransport(local_address=address))


def _try(client: httpx.Client, name: str, password: str) -> int:
    token = CSRF_FIELD_RE.search(client.get("/login").text).group(1)
    return client.post("/login", data={"name": name, "password": password, "csrf_token": token}).status_code


def _until(done: Callable[[], bool], thread: threading.Thread | None = None) -> None:
    """Wait (in 0.05 s steps, at most 2 minutes) until ``done()`` (or ``thread`` has ended)."""
    for _ in range(2400):
        if done() or (thread is not None and not thread.is_alive()):
            return
        threading.Event().wait(0.05)
    raise AssertionError("the queue never reached the expected state")


def _flood(base: str, guesses: list[tuple[str, str]], codes: list[int]) -> list[threading.Thread]:
    """One thread per (address, name) guess of WRONG; the status codes are appended to ``codes``."""
    def one(address: str, name: str) -> None:
        with _client(base, address) as c:
            codes.append(_try(c, name, WRONG))

    threads = [threading.Thread(target=one, args=g) for g in guesses]
    for t in threads:
        t.start()
    return threads


@pytest.mark.slow
def test_a_browser_with_the_device_cookie_logs_in_while_its_name_is_flooded(make_app, monkeypatch) -> None:
    """70 wrong checks for alice from 7 fresh addresses (10 each, the (name, address) limit) fill her name's queue
    (64 waiting).  Before: her right password from her own browser answered 503.  Now: 303."""
    from thoughtsource.web import auth

    gate = threading.Event()
    _hold_wrong_guesses(monkeypatch, gate)
    app = make_app()
    add_user(app, "alice")
    codes: list[int] = []
    with live_server(app) as base:
        with _client(base, "127.0.0.1") as browser:
            assert _try(browser, "alice", PASSWORD) == 303  # her browser now holds the device cookie
            browser.cookies.delete(auth.SESSION_COOKIE)
            flood = _flood(base, [(f"127.0.0.{10 + i // 10}", "alice") for i in range(70)], codes)
            _until(lambda: auth.password_queue.waiting >= auth.MAX_WAITING_PER_NAME)
            got: list[int] = []
            mine = threading.Thread(target=lambda: got.append(_try(browser, "Alice", PASSWORD)))
            mine.start()
            _until(lambda: auth.password_queue.waiting > auth.MAX_WAITING_PER_NAME, mine)
            gate.set()
            mine.join(120)
        for t in flood:
            t.join(120)
    assert got == [303]
    assert 503 in codes and set(codes) <= {401, 503}  # the name's bound still holds for the strangers


@pytest.mark.slow
def test_a_503_never_clears_a_throttle_bucket(make_app, monkeypatch) -> None:
    """An address with 9 wrong guesses for alice fills its own queue (64 waiting checks for other names), so its
    10th guess for alice answers 503 (no password checked).  Before, that 503 cleared its (alice, address) bucket as
    a success does: the address then had 10 more guesses.  Now it has one: 401, then 429."""
    from thoughtsource.web import auth

    gate = threading.Event()
    _hold_wrong_guesses(monkeypatch, gate)
    app = make_app()
    add_user(app, "alice")
    me = "127.0.0.3"
    codes: list[int] = []
    with live_server(app) as base, _client(base, me) as c:
        gate.set()
        assert [_try(c, "alice", WRONG) for _ in range(9)] == [401] * 9
        gate.clear()
        flood = _flood(base, [(me, f"user{i // 10}") for i in range(70)], codes)
        _until(lambda: auth.password_queue.waiting >= auth.MAX_WAITING_PER_CLIENT)
        assert _try(c, "alice", WRONG) == 503
        gate.set()
        for t in flood:
            t.join(120)
        assert [_try(c, "alice", WRONG) for _ in range(2)] == [401, 429]
        assert _try(c, "alice", PASSWORD) == 429  # the bucket is full: not even the right password is checked


def test_the_host_check_takes_a_host_and_an_optional_port_only(make_app) -> None:
    app = make_app(allowed_hosts=["127.0.0.1", "localhost"])
    with live_server(app) as url:
        port = int(url.rsplit(":", 1)[1])
        tries = {f"127.0.0.1:{port}": 200, "127.0.0.1": 200, f"LOCALHOST:{port}": 200,
                 f"127.0.0.1:{port}@evil.example": 400, "127.0.0.1@evil.example": 400,
                 f"evil.example@127.0.0.1:{port}": 400, f"127.0.0.1:{port}/evil.example": 400,
                 f"127.0.0.1:{port}:80": 400, "127.0.0.1:99999": 400, "127.0.0.1:": 400,
                 f"127.0.0.1 :{port}": 400, "127.0.0.1\tevil.example": 400, f"[::1]:{port}@evil": 400}
        got = {}
        for host, _ in tries.items():
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.putrequest("GET", "/login", skip_host=True)
            conn.putheader("Host", host)
            conn.endheaders()
            got[host] = conn.getresponse().status
            conn.close()
    assert got == tries


def test_serve_refuses_a_url_as_an_allowed_host_at_start_with_one_line(tmp_path: Path, examples_dir: Path) -> None:
    env = {**os.environ, "COLUMNS": "400", "PYTHONPATH": os.pathsep.join(["src", os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "thoughtsource", "serve", str(examples_dir / "annotated" / "annotated_set.json"),
                        "--db", str(tmp_path / "a.sqlite"), "--port", "0", "--allowed-hosts", "localhost,http://annotate.example.org"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "--allowed-hosts" in lines[0] and "'http://annotate.example.org' is not a host name" in lines[0]
    assert not (tmp_path / "a.sqlite").exists()  # refused before anything was opened


def test_trusted_checks_go_first_but_cannot_starve_the_others() -> None:
    """An account holder with her device cookie who keeps logging in (4 checks waiting, the bound) is taken first
    only twice in a row; then bob's check, waiting from another address, runs."""
    from thoughtsource.web.auth import PasswordQueue, ServerBusy

    release = threading.Event()
    order: list[str] = []
    q = PasswordQueue(workers=1, per_client=10, per_name=2, total=20)
    first = q.submit("10.0.0.9", lambda: release.wait(60), "x")
    q.submit("10.0.0.2", lambda: order.append("bob"), "bob")
    done = [q.submit("10.0.0.1", lambda: order.append("mallory"), "mallory", trusted=True) for _ in range(4)]
    with pytest.raises(ServerBusy, match="for this user name"):
        q.submit("10.0.0.1", lambda: None, "mallory", trusted=True)
    release.set()
    assert first.result(60) is True and [f.result(60) for f in done] == [None] * 4
    assert order[:3] == ["mallory", "mallory", "bob"]
