"""``thoughtsource serve-model``: the command line starts a real OpenAI-compatible server."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
from typer.testing import CliRunner

from thoughtsource.cli import app
from thoughtsource.errors import ThoughtSourceError


def test_port_in_use_is_a_one_line_error():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = CliRunner().invoke(app, ["serve-model", "--port", str(port)])
    assert isinstance(r.exception, ThoughtSourceError)
    assert f"cannot listen on 127.0.0.1:{port}" in str(r.exception)


@pytest.mark.slow
def test_serve_model_command_serves_the_embedded_model(tmp_path):
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": os.pathsep.join(["src", os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "thoughtsource", "serve-model", "--port", "0", "--served-model-name", "smol", "--max-tokens", "6"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        url = None
        deadline = time.monotonic() + 120
        assert proc.stderr is not None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
            m = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
            url = m.group(1) if m else None
        assert url, "the server did not report its URL"
        for _ in range(100):  # the URL is logged just before uvicorn starts accepting
            try:
                models = httpx.get(f"{url}/models").json()
                break
            except httpx.ConnectError:
                time.sleep(0.1)
        assert models["data"][0]["id"] == "smol"
        r = httpx.post(
            f"{url}/chat/completions",
            timeout=300,
            json={"model": "smol", "temperature": 0, "messages": [{"role": "user", "content": "What is 2 + 2?"}]},
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["choices"][0]["message"]["content"].strip()
        assert 0 < body["usage"]["completion_tokens"] <= 6  # --max-tokens is the default
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
