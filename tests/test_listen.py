"""Issue 42, finding 3: every connection ``serve`` and ``serve-model`` accept has ``TCP_NODELAY``.

Without it, uvicorn's two writes of a response (head, then body) met Nagle's algorithm and the body waited ~40 ms
for the client's delayed ACK on every request of a keep-alive connection.  The tests look at the option on the
server's own accepted socket, in the real server process, through ``pidfd_getfd`` (Linux 5.6+): no timing.  The
latency itself is measured in ``benchmarks/bench_keepalive.py``.
"""

from __future__ import annotations

import ctypes
import http.client
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from thoughtsource.listen import bind

SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture (the unified syscall table)


def server_side_nodelay(pid: int, client: socket.socket) -> int:
    """TCP_NODELAY of the socket that process ``pid`` accepted for ``client`` (its peer is ``client``'s address)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):
        pytest.skip("reads another process's socket through pidfd_getfd (Linux only)")
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, int(name), 0)
            if fd < 0:
                err = ctypes.get_errno()
                if err in (1, 38):  # EPERM (ptrace policy), ENOSYS (old kernel)
                    pytest.skip(f"pidfd_getfd is not allowed here: {os.strerror(err)}")
                continue  # the descriptor closed meanwhile
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.close(fd)
                continue
            with socket.socket(fileno=fd) as s:
                try:
                    if s.getpeername() == client.getsockname():
                        return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                except OSError:
                    pass  # the listening socket, a UNIX socket, ...
    finally:
        os.close(pidfd)
    raise AssertionError("the server holds no socket connected to this client")


@contextmanager
def started(args: list[str], url_re: str, timeout: float = 180) -> Iterator[tuple[subprocess.Popen, str, int]]:
    """A ``thoughtsource`` command started as its own process; yields it, and the host and port it says it serves."""
    env = {**os.environ, "COLUMNS": "300", "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                                                           os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "thoughtsource", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        found = None
        seen = []
        while found is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            seen.append(line)
            found = re.search(url_re, line)
        assert found, "".join(seen)
        yield proc, "127.0.0.1", int(found.group(1))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def keep_alive_requests(host: str, port: int, path: str, n: int = 3) -> http.client.HTTPConnection:
    """``n`` GETs of ``path`` on one connection (it is retried while the server is still starting)."""
    for _ in range(200):
        conn = http.client.HTTPConnection(host, port, timeout=60)
        try:
            conn.connect()
            break
        except ConnectionRefusedError:
            time.sleep(0.05)
    first = conn.sock
    for _ in range(n):
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        assert r.status in (200, 303), r.status
        assert conn.sock is first, "the server closed the keep-alive connection"
    return conn


def test_the_listening_socket_is_tcp_and_its_connections_have_nodelay() -> None:
    with bind("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP
        sock.listen()
        with socket.create_connection(sock.getsockname()):
            accepted, _ = sock.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


@pytest.mark.slow
def test_serve_sets_nodelay_on_a_keep_alive_connection(examples_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    data = examples_dir / "annotated" / "annotated_set.json"
    with started(["serve", str(data), "--db", str(tmp_path / "a.sqlite"), "--port", "0"],
                 r"on http://127\.0\.0\.1:(\d+)") as (proc, host, port):
        conn = keep_alive_requests(host, port, "/login")
        assert server_side_nodelay(proc.pid, conn.sock) == 1
        conn.close()


@pytest.mark.slow
def test_serve_model_sets_nodelay_on_a_keep_alive_connection() -> None:
    pytest.importorskip("fastapi")
    with started(["serve-model", "--port", "0", "--served-model-name", "smol"],
                 r"http://127\.0\.0\.1:(\d+)/v1") as (proc, host, port):
        conn = keep_alive_requests(host, port, "/v1/models")
        assert server_side_nodelay(proc.pid, conn.sock) == 1
        conn.close()
