"""serve-model loads its model at start and fails at start; the openai backend asks serve-model's port; --version."""

from __future__ import annotations

import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cli_in_process import run_cli
from thoughtsource.backends.openai_compat import OpenAIOptions
from thoughtsource.listen import MODEL_SERVER_PORT


@pytest.mark.slow
def test_a_model_that_cannot_load_fails_serve_model_at_start(tmp_path: Path) -> None:
    """It used to report 'serving' and answer 500 to every request; now: one error line and exit 1, never 'serving'."""
    pytest.importorskip("fastapi")
    pytest.importorskip("transformers")
    model = tmp_path / "broken"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))  # no tokenizer, no weights
    try:
        p = subprocess.run([sys.executable, "-m", "thoughtsource", "serve-model", "--model", str(model), "--port", "0"],
                           capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"serve-model kept running with a model that cannot load: {e.stderr!r}")
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith(f"error: cannot load model '{model}'") and "serving" not in p.stderr


def test_the_openai_backend_defaults_to_serve_models_port() -> None:
    from thoughtsource.backends.server import serve
    from thoughtsource.cli.model_server import serve_model

    assert MODEL_SERVER_PORT == 8001  # not 8000, the annotator's (thoughtsource serve)
    assert OpenAIOptions(model="m").base_url == [f"http://127.0.0.1:{MODEL_SERVER_PORT}/v1"]
    assert inspect.signature(serve_model).parameters["port"].default.default == MODEL_SERVER_PORT
    assert inspect.signature(serve).parameters["port"].default == MODEL_SERVER_PORT


def test_version() -> None:
    import importlib.metadata

    p = run_cli("--version")
    assert p.returncode == 0 and p.stdout == f"thoughtsource {importlib.metadata.version('thoughtsource')}\n" and p.stderr == ""


@pytest.mark.slow
def test_shutdown_stops_the_requests_in_flight_with_a_clean_error(tmp_path):
    """Issue 45, finding 9: on SIGTERM the server finished every generation first, with no limit (933 s with two long
    requests).  Now, --shutdown-timeout seconds later, a streamed request ends with an error event and [DONE], a plain
    one with a 503, and the server exits, without a traceback."""
    import threading

    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["src", os.environ.get("PYTHONPATH", "")])}
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "thoughtsource", "serve-model", "--port", "0", "--served-model-name",
                                 "smol", "--shutdown-timeout", "1"], stdout=fh, stderr=subprocess.STDOUT, env=env)
    try:
        url = None
        while url is None and proc.poll() is None:
            m = re.search(r"(http://127\.0\.0\.1:\d+)/v1", log.read_text())
            url = m.group(1) if m else time.sleep(0.2)
        assert url, log.read_text()
        while True:
            try:
                httpx.get(url + "/health")
                break
            except httpx.ConnectError:
                time.sleep(0.1)
        # both join serve-model's running batch (continuous batching); the greedy story runs far past the 1 s limit
        long = {"model": "smol", "messages": [{"role": "user", "content": "Tell a long story about a dragon."}],
                "max_tokens": 1500, "temperature": 0}
        answers: dict[str, object] = {}

        def plain() -> None:
            answers["plain"] = httpx.post(url + "/v1/chat/completions", json=long, timeout=900)

        def streamed() -> None:
            events = answers["events"] = []
            with httpx.stream("POST", url + "/v1/chat/completions", json={**long, "stream": True}, timeout=900) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        events.append(line[6:])

        threads = [threading.Thread(target=plain), threading.Thread(target=streamed)]
        for t in threads:
            t.start()
        while "thoughtsource_queue_length 2" not in httpx.get(url + "/metrics").text or len(answers.get("events", [])) < 3:
            time.sleep(0.2)  # both requests are with the model, and the stream has begun
        proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(timeout=900)
        # it exits: uvicorn raises the signal again once shut down, so the code is SIGTERM's (a service manager sees it)
        assert proc.wait(timeout=300) in (0, -signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    plain_answer = answers["plain"]
    assert isinstance(plain_answer, httpx.Response) and plain_answer.status_code == 503, plain_answer
    assert plain_answer.json()["error"]["code"] == "server_shutting_down"
    events = answers["events"]
    assert isinstance(events, list) and events[-1] == "[DONE]"
    assert json.loads(events[-2])["error"]["code"] == "server_shutting_down"
    assert "Traceback" not in log.read_text(), log.read_text()


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", ""])
def test_threads_takes_a_count_or_auto_and_refuses_anything_else(value: str) -> None:
    r = run_cli("serve-model", "--threads", value, "--port", "0")
    assert r.returncode == 2 and "a number of threads (1 or more) or auto" in r.stderr, r.stderr


def test_threads_auto_and_continuous_batching_are_what_serve_model_asks_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """auto (the default) is passed on as measured threads; --mode auto means continuous batching on every device."""
    import thoughtsource.backends.server as server

    made: dict = {}

    def capture(model: str, **options) -> None:
        made.update(options, model=model)
        raise SystemExit(0)

    monkeypatch.setattr(server, "make_backend", capture)
    for args, threads, mode in ([], "auto", "continuous"), (["--threads", "3", "--mode", "prefix"], 3, "prefix"):
        made.clear()
        run_cli("serve-model", "--port", "0", *args)
        assert (made["threads"], made["mode"], made["device"]) == (threads, mode, None), made
