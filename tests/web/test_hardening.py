"""Issue 23, "the annotator under attack and at scale": each probe of the adversarial pass, against a live uvicorn
on 127.0.0.1 with real HTTP clients (httpx, raw sockets).  No test depends on timing: they count, and check status
codes and what is stored."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from thoughtsource.web.routes import blind_order

from .conftest import PASSWORD, add_user, first_multi_cot_sample, live_server, page_data

TOKEN_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def http_login(base: str, name: str, local_address: str = "127.0.0.1") -> tuple[httpx.Client, str]:
    """An httpx client logged in as ``name`` on the live server, and its CSRF token."""
    client = httpx.Client(base_url=base, timeout=120, transport=httpx.HTTPTransport(local_address=local_address))
    token = TOKEN_RE.search(client.get("/login").text).group(1)
    r = client.post("/login", data={"name": name, "password": PASSWORD, "csrf_token": token, "next": "/samples"})
    assert r.status_code == 303, r.text
    return client, TOKEN_RE.search(client.get("/samples").text).group(1)


@pytest.fixture
def annotator_server(make_app) -> Iterator[tuple[object, str]]:
    app = make_app(blind=True)
    add_user(app, "alice")
    add_user(app, "root", "admin")
    with live_server(app) as base:
        yield app, base


# --------------------------------------------------------------------------- 1. blind review and the similarity API
def test_the_similarity_api_numbers_cots_as_the_blind_page_does(annotator_server, served) -> None:
    """The page renumbered the similarity data, the API returned it in file order (file position → model)."""
    app, base = annotator_server
    it = first_multi_cot_sample(served)
    path = f"/sample/{it.dataset}/{it.split}/{it.sample.id}"
    client, _ = http_login(base, "alice")
    with closing(client):
        order = blind_order(app, app.state.db.user("alice"), it)
        assert order != sorted(order)  # the shuffle moves CoTs, so file order differs from the shown order
        on_page = page_data(client.get(path).text)["similarity"]
        api = client.get("/api/similarity" + path[len("/sample"):]).json()
        assert api == on_page
    # the admin (not blind) gets the file order from both; alice's is its shuffle
    root, _ = http_login(base, "root")
    with closing(root):
        in_file_order = root.get("/api/similarity" + path[len("/sample"):]).json()
        assert in_file_order == page_data(root.get(path).text)["similarity"]
    assert api["sentences"] == [in_file_order["sentences"][i] for i in order] != in_file_order["sentences"]


# --------------------------------------------------------------------------- 7. adjudicate: an empty value clears
def test_adjudicate_with_an_empty_value_clears_the_final_label(annotator_server, served) -> None:
    app, base = annotator_server
    it = first_multi_cot_sample(served)
    ref = {"dataset": it.dataset, "split": it.split, "sample_id": it.sample.id, "cot_id": it.sample.generated_cot[0].id,
           "key": "Too verbose"}
    root, csrf = http_login(base, "root")
    with closing(root):
        assert root.post("/adjudicate", data={**ref, "value": "true", "csrf_token": csrf}).status_code == 303
        assert [r.value for r in app.state.db.adjudications()] == [True]
        r = root.post("/adjudicate", data={**ref, "value": "", "csrf_token": csrf})
        assert r.status_code == 303, r.text  # was 422: FastAPI reads an empty form field as a missing one
        assert app.state.db.adjudications() == []


# --------------------------------------------------------------------------- 2. the client address cannot be spoofed
def _checked_names(monkeypatch: pytest.MonkeyPatch, hold_attackers_until: threading.Event | None = None) -> list[str]:
    """Wrap ``auth.authenticate``: the user names that reached the password check, in order.  With
    ``hold_attackers_until``, the attacker's checks (names ``user...``) wait for that event, so that they occupy
    the password pool while other log-ins queue."""
    from thoughtsource.web import auth

    seen: list[str] = []
    lock = threading.Lock()
    real = auth.authenticate

    def counting(db, name, password):
        with lock:
            seen.append(name)
        if hold_attackers_until is not None and name.startswith("user"):
            hold_attackers_until.wait(120)
        return real(db, name, password)

    monkeypatch.setattr(auth, "authenticate", counting)
    return seen


def alice_after_attackers(base: str, attackers: list[threading.Thread], order: list[str], gate: threading.Event) -> list[int]:
    """Start the attackers (whose checks ``_checked_names`` holds until ``gate``), wait until every one of their
    checks has started or is queued, queue alice's right password from 127.0.0.2, open the gate, and return the
    status of alice's log-in.  Bounded in count, never timed."""
    from thoughtsource.web import auth

    n, queue = len(attackers), auth.password_queue
    for t in attackers:
        t.start()
    for _ in range(2400):
        if len(order) + queue.waiting >= n:
            break
        attackers[0].join(0.05)
    assert len(order) + queue.waiting == n
    got: list[int] = []
    alice = threading.Thread(target=lambda: got.append(_guess(base, "alice", PASSWORD, local_address="127.0.0.2")))
    alice.start()
    for _ in range(2400):
        if len(order) + queue.waiting > n:
            break
        alice.join(0.05)
    gate.set()
    alice.join(120)
    for t in attackers:
        t.join(120)
    return got


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The user names that reached the password check (auth.authenticate), in order."""
    return _checked_names(monkeypatch)


def _guess(base: str, name: str, password: str, headers: dict[str, str] | None = None,
           local_address: str = "127.0.0.1") -> int:
    with httpx.Client(base_url=base, timeout=120, transport=httpx.HTTPTransport(local_address=local_address)) as c:
        token = TOKEN_RE.search(c.get("/login").text).group(1)
        return c.post("/login", data={"name": name, "password": password, "csrf_token": token},
                      headers=headers or {}).status_code


@pytest.mark.parametrize("trusted", [False, True])
def test_x_forwarded_for_is_trusted_only_from_forwarded_allow_ips(make_app, counted, trusted: bool) -> None:
    """uvicorn trusted X-Forwarded-For from loopback by default: a new header on each try, and all 40 wrong passwords
    reached the check (the limit is 10).  Now only ``serve --forwarded-allow-ips`` makes it count."""
    from thoughtsource.web.auth import LoginThrottle

    app = make_app()
    add_user(app, "alice")
    app.state.throttle = LoginThrottle(limit=10, client_limit=100, name_limit=100)
    with live_server(app, forwarded_allow_ips="127.0.0.1" if trusted else None) as base:
        codes = [_guess(base, "alice", "wrong password!", {"X-Forwarded-For": f"10.0.0.{i}"}) for i in range(12)]
    if trusted:  # behind a proxy we trust, each forwarded address is its own client
        assert codes == [401] * 12 and len(counted) == 12
    else:
        assert codes == [401] * 10 + [429] * 2 and len(counted) == 10


def _tries(base: str, name: str, passwords: list[str], local_address: str) -> list[int]:
    """Log-in attempts in order from one browser (one cookie jar, one client address); the status of each."""
    codes = []
    with httpx.Client(base_url=base, timeout=120, transport=httpx.HTTPTransport(local_address=local_address)) as c:
        page = c.get("/login").text
        for password in passwords:
            r = c.post("/login", data={"name": name, "password": password, "csrf_token": TOKEN_RE.search(page).group(1)})
            codes.append(r.status_code)
            page = r.text  # a refused attempt renders the form again, with a new token
    return codes


@pytest.mark.slow
def test_wrong_tries_from_ten_addresses_do_not_lock_the_real_user_out(make_app, monkeypatch) -> None:
    """100 wrong tries from 10 addresses filled the per-name bucket and locked the real user out of every browser
    without the device cookie (429 on the right password).  serve's throttle (the defaults), real clients on 12
    loopback addresses; wrong passwords are refused without argon2 (counted), the right one is really checked."""
    from thoughtsource.web import auth

    checked: list[str] = []
    real = auth.authenticate

    def fast(db, name, password):
        checked.append(name)
        if password != PASSWORD:
            raise auth.NotAuthenticated("wrong user name or password")
        return real(db, name, password)

    monkeypatch.setattr(auth, "authenticate", fast)
    app = make_app()
    add_user(app, "alice")
    assert isinstance(app.state.throttle, auth.LoginThrottle)  # as serve makes it
    with live_server(app) as base:
        for i in range(10):  # 10 per address is the (name, client) limit: the 11th is refused unchecked
            assert _tries(base, "alice", ["wrong password!"] * 11, f"127.0.0.{i + 2}") == [401] * 10 + [429]
        assert len(checked) == 100
        # every guessing address stays locked out, even with the right password
        assert _tries(base, "alice", [PASSWORD], "127.0.0.2") == [429]
        # the real user on a new browser (no device cookie): one typo, then in (was 429: locked out for 15 minutes)
        assert _tries(base, "alice", ["wrong password!", PASSWORD], "127.0.0.20") == [401, 303]
        # a new address that only guesses gets 3 tries once the name is under attack
        assert _tries(base, "alice", ["wrong password!"] * 4, "127.0.0.21") == [401, 401, 401, 429]
    assert len(checked) == 100 + 2 + 3


def test_a_client_past_its_password_queue_bound_gets_503_and_another_still_logs_in(make_app, monkeypatch) -> None:
    """Queued checks are bounded per client address: past the bound that address gets 503 at once (nothing queued),
    while a log-in from another address is still queued and succeeds.  (Bound 3 here; serve's is 64.)"""
    from thoughtsource.web import auth
    from thoughtsource.web.auth import LoginThrottle, PasswordQueue

    gate = threading.Event()
    started = _checked_names(monkeypatch, hold_attackers_until=gate)
    queue = PasswordQueue(workers=1, per_client=3, total=50)
    monkeypatch.setattr(auth, "password_queue", queue)
    app = make_app()
    add_user(app, "alice")
    app.state.throttle = LoginThrottle(limit=10, client_limit=100, name_limit=100)
    with live_server(app) as base:
        codes: dict[int, int] = {}
        attackers = [threading.Thread(target=lambda i=i: codes.__setitem__(i, _guess(base, f"user{i}", "wrong password!")))
                     for i in range(4)]
        for t in attackers:
            t.start()
        for _ in range(2400):  # bounded in count: one check running, three queued
            if len(started) == 1 and queue.waiting == 3:
                break
            attackers[0].join(0.05)
        assert (len(started), queue.waiting) == (1, 3)
        assert _guess(base, "user9", "wrong password!") == 503  # the fifth from this address: refused, not queued
        assert queue.waiting == 3
        got: list[int] = []
        alice = threading.Thread(target=lambda: got.append(_guess(base, "alice", PASSWORD, local_address="127.0.0.2")))
        alice.start()
        for _ in range(2400):
            if queue.waiting == 4:
                break
            alice.join(0.05)
        gate.set()
        alice.join(120)
        for t in attackers:
            t.join(120)
    assert got == [303] and sorted(codes.values()) == [401] * 4
    assert "user9" not in started and started.index("alice") <= 2, started  # alice after at most one queued check


# --------------------------------------------------------------------------- 4-7. uploads
def _sample(sid: str, question: str = "Which?", cot_id: str = "c1") -> dict:
    return {"id": sid, "question": question, "type": "multiplechoice", "choices": ["a", "b"], "answer": ["a"],
            "generated_cot": [{"id": cot_id, "cot": "It is a.", "model": {"name": "m"}, "answers": []}]}


@pytest.fixture
def small_server(make_app, tmp_path: Path) -> Iterator[tuple[object, str, Path]]:
    """A server of one small file, an admin 'root'; yields (app, base URL, the base file)."""
    base_file = tmp_path / "base.json"
    base_file.write_text(json.dumps({"d": {"test": [_sample("s1"), _sample("s2")]}}))
    app = make_app(files=[base_file])
    add_user(app, "root", "admin")
    with live_server(app) as base:
        yield app, base, base_file


def _upload(client: httpx.Client, csrf: str, name: str, content: bytes) -> str:
    """Upload; returns the text of the page the redirect leads to."""
    r = client.post("/admin/upload", data={"csrf_token": csrf}, files={"file": (name, content, "application/json")})
    assert r.status_code == 303, (r.status_code, r.text[:300])
    return client.get(r.headers["location"]).text


def _stored(app) -> list[str]:
    folder = app.state.settings.upload_dir
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_long_upload_name_keeps_its_suffix_and_is_served_after_a_restart(small_server, make_app) -> None:
    """A name over 120 characters was cut after the suffix check: stored without .json, served until the next
    restart, then silently dropped, orphaning its annotations.  Upload, annotate, restart, export."""
    app, base, base_file = small_server
    root, csrf = http_login(base, "root")
    with closing(root):
        page = _upload(root, csrf, "x" * 200 + ".JSON", json.dumps({"d": {"test": [_sample("new")]}}).encode())
        r = root.put("/api/annotation", headers={"X-CSRF-Token": csrf},
                     json={"dataset": "d", "split": "test", "sample_id": "new", "cot_id": "c1", "key": "Too verbose",
                           "value": True})
        assert r.status_code == 200, r.text
    [name] = _stored(app)
    assert name.endswith(".json") and len(name) <= 120 and f"added {name}" in page
    restarted = make_app(files=[base_file])  # the start-up scan of upload_dir finds it again
    assert ("d", "test", "new") in restarted.state.data.index
    with live_server(restarted) as base2:
        again, _ = http_login(base2, "root")
        with closing(again):
            exported = again.get("/export").json()
    [new] = [x for x in exported["d"]["test"] if x["id"] == "new"]
    assert [(a["author"], a["key"], a["value"]) for a in new["generated_cot"][0]["annotations"]] == \
        [("root", "Too verbose", True)]


def test_uploads_are_validated_and_merged_before_anything_is_stored(small_server) -> None:
    app, base, _ = small_server
    root, csrf = http_login(base, "root")
    with closing(root):
        # nested 10,000 levels: a bare 500 before
        deep = '{"d": {"test": [{"id": "x", "question": "q", "type": "text", "answer": ["a"], "extra": ' \
               + "[" * 10_000 + "]" * 10_000 + "}]}}"
        assert "nested more than 100 levels deep" in _upload(root, csrf, "deep.json", deep.encode())
        # the same sample id twice in the file: only the first would have been served
        dup = {"d": {"test": [_sample("n1"), _sample("n1", "Another question?")]}}
        assert "duplicate sample id" in _upload(root, csrf, "dup.json", json.dumps(dup).encode())
        # a served sample id reused for another question: its CoTs would have been added to the served sample
        clash = {"d": {"test": [_sample("s1", "A different question?", cot_id="c9")]}}
        page = _upload(root, csrf, "clash.json", json.dumps(clash).encode())
        assert "conflict(s) with the served data" in page and "field &#39;question&#39; differs" in page
        assert _stored(app) == [] and len(app.state.data.items) == 2
        assert len(app.state.data.item("d", "test", "s1").sample.generated_cot) == 1
        # another model's run of the same questions is merged, and the page says so
        run = {"d": {"test": [_sample("s1", cot_id="other-model"), _sample("s3")]}}
        page = _upload(root, csrf, "run.json", json.dumps(run).encode())
        assert "added run.json: 2 samples, 1 of them already served (their CoTs were added), 2 new CoTs" in page
        assert _stored(app) == ["run.json"]
        assert [c.id for c in app.state.data.item("d", "test", "s1").sample.generated_cot] == ["c1", "other-model"]


def test_a_second_upload_during_a_long_merge_is_refused_and_the_server_keeps_serving(small_server, monkeypatch) -> None:
    """A long merge held the upload lock: other uploads queued behind it.  Now a second upload is refused with a
    message at once, and pages are served meanwhile (the merge runs off the event loop)."""

    from thoughtsource.web.data import ServedData

    app, base, _ = small_server
    merging, release = threading.Event(), threading.Event()
    real = ServedData.with_file

    def slow(self, path, collection, cancel=None):
        merging.set()
        release.wait(120)
        return real(self, path, collection, cancel=cancel)

    monkeypatch.setattr(ServedData, "with_file", slow)
    root, csrf = http_login(base, "root")
    other, csrf2 = http_login(base, "root")
    with closing(root), closing(other):
        first: list[str] = []
        sender = threading.Thread(target=lambda: first.append(
            _upload(root, csrf, "slow.json", json.dumps({"d": {"test": [_sample("s3")]}}).encode())))
        sender.start()
        assert merging.wait(120)
        page = _upload(other, csrf2, "second.json", json.dumps({"d": {"test": [_sample("s4")]}}).encode())
        assert "another upload is being processed" in page
        assert other.get("/samples").status_code == 200  # served during the merge
        release.set()
        sender.join(120)
    assert "added slow.json" in first[0] and _stored(app) == ["slow.json"]
    assert ("d", "test", "s3") in app.state.data.index and ("d", "test", "s4") not in app.state.data.index


def test_a_restart_removes_the_temp_folder_of_an_interrupted_upload(small_server, make_app) -> None:
    """An upload's private temp folder (``uploads/.upload-*``) outlives a process killed mid-upload; the next start
    removes it and serves only stored files."""
    app, _, base_file = small_server
    tmp = app.state.settings.upload_dir / ".upload-x1y2"
    tmp.mkdir(parents=True)
    (tmp / "half.json").write_text(json.dumps({"d": {"test": [_sample("half")]}}))
    restarted = make_app(files=[base_file])
    assert not tmp.exists() and ("d", "test", "half") not in restarted.state.data.index


SERVE_SCRIPT = """
import socket, sys
from pathlib import Path
from thoughtsource.collection import Collection
from thoughtsource.web.app import ServeSettings, create_app, make_server
from thoughtsource.web.auth import hash_password

base, db, marker = (Path(a) for a in sys.argv[1:4])
real = Collection.merge

def watched(self, other, *, cancel=None):
    if cancel is not None:  # the upload's merge: say so, and stay in it until the shutdown sets the event
        marker.write_text("merging")
        while not cancel.wait(0.05):
            pass
    return real(self, other, cancel=cancel)  # the real merge sees the event set and stops

Collection.merge = watched
app = create_app(ServeSettings(files=[base], db=db, secret_dir=db.parent))
app.state.db.add_user("root", hash_password(sys.argv[4]), "admin")
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
print(sock.getsockname()[1], flush=True)
make_server(app).run(sockets=[sock])
"""


def test_sigterm_stops_the_server_during_an_upload_merge_and_nothing_is_stored(tmp_path: Path) -> None:
    """A long merge held the server past SIGTERM, and the file was already stored, so a restart merged it again."""
    import signal
    import subprocess
    import sys

    base_file = tmp_path / "base.json"
    base_file.write_text(json.dumps({"d": {"test": [_sample("s1")]}}))
    marker = tmp_path / "merging"
    proc = subprocess.Popen([sys.executable, "-c", SERVE_SCRIPT, str(base_file), str(tmp_path / "a.sqlite"), str(marker),
                             PASSWORD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        root, csrf = http_login(f"http://127.0.0.1:{port}", "root")
        answer: list[object] = []

        def send() -> None:
            try:
                r = root.post("/admin/upload", data={"csrf_token": csrf},
                              files={"file": ("run.json", json.dumps({"d": {"test": [_sample("s2")]}}).encode())})
                answer.append(r)
            except httpx.HTTPError as e:
                answer.append(e)

        sender = threading.Thread(target=send)
        sender.start()
        for _ in range(1200):  # bounded in count: the upload reaches its merge
            if marker.exists() or proc.poll() is not None:
                break
            sender.join(0.1)
        assert marker.exists(), proc.stderr.read() if proc.poll() is not None else "no merge started"
        proc.send_signal(signal.SIGTERM)
        # a generous bound on a loaded machine (the old server never returned); uvicorn re-raises the signal after its
        # graceful shutdown, hence -SIGTERM
        assert proc.wait(timeout=120) in (0, -signal.SIGTERM)
        sender.join(120)
        root.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    uploads = tmp_path / "uploads"
    assert not uploads.exists() or [p.name for p in uploads.iterdir()] == []  # nothing stored, no temp folder left
    [r] = answer  # the upload was answered before the server went: it was stopped, not killed
    assert isinstance(r, httpx.Response) and r.status_code == 303, r
    assert "shutting down" in proc.stderr.read()  # logged: "upload of run.json stopped: the server is shutting down"


# --------------------------------------------------------------------------- 3. request bodies are bounded
def _raw(base: str, head: str, chunks: list[bytes] = (), chunked: bool = False) -> tuple[int, int]:
    """Send a request's head, then body chunks while the server has not answered; returns (status, bytes sent).
    A server that waits for a body it will refuse never answers: the socket timeout ends the test."""
    import select

    host, port = base.removeprefix("http://").split(":")
    sent = 0
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(head.encode())
        for chunk in chunks:
            if select.select([s], [], [], 0.05)[0]:
                break  # answered: stop sending
            try:
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        try:
            status = s.recv(4096).split(b" ", 2)[1]
        except ConnectionResetError:  # closed with unread body bytes before we read the answer
            return -1, sent
        return int(status), sent


def _head(method: str, path: str, headers: dict[str, str]) -> str:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"


def test_an_anonymous_body_is_refused_from_its_headers(annotator_server) -> None:
    """One anonymous 200 MiB PUT /api/annotation added ~570 MiB to the server before its 401: now the 401 comes
    without one byte of the body being sent (the old server waited for it)."""
    _, base = annotator_server
    for path in ("/api/annotation", "/admin/upload", "/adjudicate"):
        head = _head("PUT" if path.startswith("/api") else "POST", path,
                     {"Content-Type": "application/json", "Content-Length": str(200 * 2**20), "X-CSRF-Token": "x"})
        assert _raw(base, head) == (401, 0), path
    # the log-in form is the one anonymous body, and a small one
    head = _head("POST", "/login", {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": str(2**20)})
    assert _raw(base, head) == (413, 0)


def test_bodies_are_capped_per_route_declared_or_streamed(annotator_server) -> None:
    _, base = annotator_server
    alice, csrf = http_login(base, "alice")
    cookie = "; ".join(f"{k}={v}" for k, v in alice.cookies.items())
    alice.close()
    auth = {"Cookie": cookie, "X-CSRF-Token": csrf, "Content-Type": "application/json"}
    # declared: refused before the body is sent; an annotator's upload limit is not an admin's 512 MiB
    for path, size in (("/api/annotation", 2**20), ("/api/steps", 2**20), ("/admin/upload", 2**20)):
        method = "PUT" if path.startswith("/api") else "POST"
        assert _raw(base, _head(method, path, {**auth, "Content-Length": str(size)})) == (413, 0), path
    # streamed without a length: counted as it arrives, refused past the limit (256 KiB here), never read to the end
    chunks = [b"x" * 65536] * 64  # 4 MiB; the old server read all of it, then answered 422 (not JSON)
    status, sent = _raw(base, _head("PUT", "/api/annotation", {**auth, "Transfer-Encoding": "chunked"}), chunks, True)
    assert status in (413, -1) and sent < 4 * 2**20, (status, sent)
    # a normal save still works
    it_ok = httpx.put(f"{base}/api/annotation", headers={"Cookie": cookie, "X-CSRF-Token": csrf},
                      json={"dataset": "x", "split": "y", "sample_id": "z", "cot_id": "c", "key": "Too verbose",
                            "value": True})
    assert it_ok.status_code == 404  # past the limits and the CSRF check: an unknown sample


# --------------------------------------------------------------------------- 2. password checks queue per client
@pytest.mark.slow
def test_a_client_queueing_password_checks_does_not_stall_another_clients_login(make_app, monkeypatch) -> None:
    """40 queued checks of one client delayed another user's right password by 11.6 s (one FIFO, one thread).  Now the
    queues are per client and taken in turn: counted, alice's check runs right after the one in progress."""
    from thoughtsource.web import auth
    from thoughtsource.web.auth import LoginThrottle

    gate = threading.Event()
    order = _checked_names(monkeypatch, hold_attackers_until=gate)  # the attacker's checks hold the pool
    app = make_app()
    add_user(app, "alice")
    app.state.throttle = LoginThrottle(limit=10, client_limit=100, name_limit=100)
    n = 20

    with live_server(app) as base:
        attackers = [threading.Thread(target=_guess, args=(base, f"user{i}", "wrong password!")) for i in range(n)]
        got = alice_after_attackers(base, attackers, order, gate)
    assert got == [303]
    # FIFO put alice 21st; in turns she is at most one attacker check behind the ones that were running
    assert order.index("alice") <= auth.VERIFY_CONCURRENCY + 1, order


def test_the_password_queue_bounds_each_client() -> None:

    from thoughtsource.web.auth import PasswordQueue, ServerBusy

    release = threading.Event()
    q = PasswordQueue(workers=1, per_client=2, total=10)
    running = q.submit("10.0.0.1", lambda: release.wait(60))  # takes the one worker
    for _ in range(2):
        q.submit("10.0.0.1", lambda: True)
    with pytest.raises(ServerBusy, match="from this address"):
        q.submit("10.0.0.1", lambda: True)
    other = q.submit("10.0.0.2", lambda: "ok")  # another address still gets in
    release.set()
    assert running.result(60) is True and other.result(60) == "ok" and q.waiting == 0


# --------------------------------------------------------------------------- 7. messages by id, not by text
def test_admin_pages_show_messages_by_server_issued_id_only(annotator_server, served) -> None:
    """``?error=`` and ``?notice=`` put any text on the admin pages (escaped, but a spoofed message all the same)."""
    app, base = annotator_server
    add_user(app, "root2", "admin")
    spoof = "Your password expired: mail it to evil@example.com"
    root, csrf = http_login(base, "root")
    other, _ = http_login(base, "root2")
    with closing(root), closing(other):
        for page in ("/admin/data", "/admin/users", "/adjudicate"):
            for q in ("error", "notice", "msg"):
                r = root.get(f"{page}?{q}={spoof.replace(' ', '%20')}")
                assert r.status_code == 200 and "evil@example.com" not in r.text, (page, q)
        r = root.post("/admin/blind", data={"on": "true", "csrf_token": csrf})
        assert r.status_code == 303 and re.fullmatch(r"/admin/data\?msg=[\w-]+", r.headers["location"])
        assert "blind review on" in root.get(r.headers["location"]).text
        assert "blind review on" not in other.get(r.headers["location"]).text  # another admin: the id is not theirs
