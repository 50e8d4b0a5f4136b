"""The login throttle against a live server: simultaneous guesses, guesses across names, and the real user.

Every attempt is reserved before the password check, so simultaneous wrong passwords cannot all slip through
a check made before any of them failed; a stranger's failures do not lock the real user out on another client.
"""

from __future__ import annotations

import asyncio
import re
import threading

import httpx
import pytest

from thoughtsource.web import auth
from thoughtsource.web.auth import LoginThrottle

from .conftest import PASSWORD, add_user, live_server

TOKEN_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The user names that reached the password check (auth.authenticate), in order."""
    seen: list[str] = []
    lock = threading.Lock()
    real = auth.authenticate

    def counting(db, name, password):
        with lock:
            seen.append(name)
        return real(db, name, password)

    monkeypatch.setattr(auth, "authenticate", counting)
    return seen


async def _attempt(base: str, name: str, password: str, local_address: str = "127.0.0.1") -> int:
    transport = httpx.AsyncHTTPTransport(local_address=local_address)
    async with httpx.AsyncClient(base_url=base, transport=transport, timeout=120) as client:
        token = TOKEN_RE.search((await client.get("/login")).text).group(1)
        r = await client.post("/login", data={"name": name, "password": password, "csrf_token": token})
        return r.status_code


async def _burst(base: str, names: list[str], password: str) -> list[int]:
    return await asyncio.gather(*(_attempt(base, n, password) for n in names))


@pytest.mark.slow
def test_concurrent_wrong_logins_are_limited_and_the_real_user_still_gets_in(make_app, counted) -> None:
    app = make_app()
    add_user(app, "alice")
    app.state.throttle = LoginThrottle(limit=10, client_limit=30, name_limit=100)
    with live_server(app) as base:
        codes = asyncio.run(_burst(base, ["alice"] * 40, "wrong password!"))
        assert len(counted) <= 10, len(counted)
        assert codes.count(401) == len(counted) and codes.count(429) == 40 - len(counted)
        # the same name spelled differently is the same bucket
        assert asyncio.run(_attempt(base, " ALICE ", "wrong password!")) == 429
        # the real user, from another client (another loopback address), logs in with the right password
        n = len(counted)
        assert asyncio.run(_attempt(base, "alice", PASSWORD, local_address="127.0.0.2")) == 303
        assert len(counted) == n + 1


@pytest.mark.slow
def test_guessing_across_many_names_from_one_client_is_limited(make_app, counted) -> None:
    app = make_app()
    add_user(app, "alice")
    app.state.throttle = LoginThrottle(limit=10, client_limit=30, name_limit=100)
    names = [f"user{i}" for i in range(40)]
    with live_server(app) as base:
        codes = asyncio.run(_burst(base, names, "wrong password!"))
        assert len(counted) <= 30 and codes.count(429) >= 10, (len(counted), codes)
        # the guessing client is locked out for every name; alice, elsewhere, is not
        assert asyncio.run(_attempt(base, "alice", PASSWORD)) == 429
        assert asyncio.run(_attempt(base, "alice", PASSWORD, local_address="127.0.0.2")) == 303


def test_a_device_that_logged_in_before_skips_the_per_name_bucket() -> None:
    t = LoginThrottle(limit=10, client_limit=30, name_limit=3, fresh_limit=2)
    for i in range(4):  # strangers on two addresses fill the per-name bucket
        t.failed(t.reserve("alice", f"10.0.0.{i % 2}"))
    with pytest.raises(auth.TooManyAttempts):  # a guessing address is stopped by the full per-name bucket
        t.reserve("alice", "10.0.0.0")
    t.succeeded(t.reserve("alice", "10.0.0.0", trusted_device=True))  # the same address with the device cookie


def test_a_full_per_name_bucket_leaves_a_new_client_a_few_tries() -> None:
    """Issue 23: 100 wrong tries from 10 addresses locked the real user out of every browser without the device
    cookie.  A full per-name bucket now stops the addresses that guessed; a new one gets ``fresh_limit`` tries."""
    t = LoginThrottle()  # the defaults of serve: 10 per (name, client), 100 per name, 3 for a new client
    for i in range(100):
        t.failed(t.reserve("alice", f"10.0.0.{i % 10}"))
    for i in range(10):
        with pytest.raises(auth.TooManyAttempts):
            t.reserve("alice", f"10.0.0.{i}")
    for _ in range(2):  # the real user mistypes twice on a new browser, then gets it right
        t.failed(t.reserve("alice", "10.0.1.1"))
    t.succeeded(t.reserve("alice", "10.0.1.1"))
    for _ in range(3):  # a new address that only guesses gets 3 tries
        t.failed(t.reserve("alice", "10.0.1.2"))
    with pytest.raises(auth.TooManyAttempts):
        t.reserve("alice", "10.0.1.2")
