"""No request body gets a 5xx from a real ``serve-model`` process: hostile bodies by name, then seeded random ones.

Each body goes to ``/v1/chat/completions``, ``/v1/completions`` or ``/tokenize`` of one ``serve-model`` process (the
embedded model, ``--max-tokens 2``); the answer must be below 500, a 4xx must be OpenAI's error object, and the server's
log must gain no traceback.  The named cases are the ones found so far (an empty prompt: 500 "cannot reshape tensor of 0
elements"; a lone surrogate escape: 500 with a traceback logged twice); the random ones mutate every field of a valid
body (empty and huge strings, surrogates, nulls, wrong types, out-of-range numbers), seeded, so a failure repeats.
Split into several tests of a bounded number of bodies each (each well under the suite's timeout on a loaded machine).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

MODEL = "fuzzed"
SURROGATE = "bad \ud800 surrogate"  # what json.loads makes of "bad \\ud800 surrogate"


class Server:
    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log, self.read = url, log, 0

    def new_log(self) -> str:
        """The server's log since the last call."""
        text = self.log.read_text(errors="replace")
        new, self.read = text[self.read:], len(text)
        return new

    def post(self, path: str, body: Any, stream: bool = False) -> httpx.Response:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()  # json.dumps writes \ud800 as its escape
        headers = {"content-type": "application/json"}
        if stream:
            with httpx.stream("POST", self.url + path, content=data, headers=headers, timeout=300) as r:
                r.read()
                return r
        return httpx.post(self.url + path, content=data, headers=headers, timeout=300)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pytest.importorskip("fastapi")
    pytest.importorskip("transformers")
    log = tmp_path_factory.mktemp("serve-model") / "server.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["src", os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "thoughtsource", "serve-model", "--port", "0", "--served-model-name",
                                 MODEL, "--max-tokens", "2"], stdout=fh, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        url = None
        deadline = time.monotonic() + 300
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            m = re.search(r"(http://127\.0\.0\.1:\d+)/v1", log.read_text())
            url = m.group(1) if m else None
            time.sleep(0.2)
        assert url, f"serve-model did not start: {log.read_text()}"
        while True:
            try:
                httpx.get(url + "/health", timeout=5)
                break
            except httpx.ConnectError:
                time.sleep(0.1)
        yield Server(url, log)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _check(server: Server, path: str, body: Any, stream: bool = False) -> httpx.Response:
    r = server.post(path, body, stream=stream)
    log = server.new_log()
    shown = repr(body)[:300]
    assert r.status_code < 500, f"{path} {shown}: {r.status_code} {r.text[:500]}"
    assert "Traceback" not in log, f"{path} {shown}: the server logged a traceback:\n{log}"
    if r.status_code >= 400:
        error = r.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"], r.text
    elif stream:
        assert r.text.rstrip().endswith("data: [DONE]") and '"error"' not in r.text, r.text[-500:]
    return r


CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1, "temperature": 0}
TEXT = {"model": MODEL, "prompt": "Hi", "max_tokens": 1, "temperature": 0}
NAMED: list[Any] = [
    pytest.param("/v1/completions", {**TEXT, "prompt": ""}, False, "prompt", id="empty-prompt"),
    pytest.param("/v1/completions", {**TEXT, "prompt": ""}, True, "prompt", id="empty-prompt-streamed"),
    pytest.param("/v1/completions", {**TEXT, "prompt": ["Hi", ""]}, False, "prompt", id="empty-prompt-in-a-list"),
    pytest.param("/v1/completions", {**TEXT, "prompt": SURROGATE}, False, "prompt", id="surrogate-prompt"),
    pytest.param("/v1/completions", {**TEXT, "prompt": SURROGATE}, True, "prompt", id="surrogate-prompt-streamed"),
    pytest.param("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": SURROGATE}]}, False, "messages",
                 id="surrogate-chat"),
    pytest.param("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": SURROGATE}]}, True, "messages",
                 id="surrogate-chat-streamed"),
    pytest.param("/v1/chat/completions", {**CHAT, "model": SURROGATE}, False, "model", id="surrogate-model-name"),
    pytest.param("/v1/chat/completions", {**CHAT, SURROGATE: 1}, False, None, id="surrogate-field-name"),
    pytest.param("/v1/completions", {**TEXT, "stop": [SURROGATE]}, False, "stop", id="surrogate-stop"),
    pytest.param("/tokenize", {"prompt": SURROGATE}, False, "prompt", id="surrogate-tokenize"),
]


@pytest.mark.parametrize(("path", "body", "stream", "param"), NAMED)
def test_named_hostile_bodies_get_a_400_naming_the_field(server: Server, path: str, body: Any, stream: bool,
                                                         param: str | None) -> None:
    r = _check(server, path, body, stream=stream)
    assert r.status_code == 400, r.text  # streamed too: refused before the 200 and its first event
    assert r.json()["error"]["param"] == param, r.text


def test_a_refused_body_is_logged_once(server: Server) -> None:
    server.new_log()
    assert server.post("/v1/completions", {**TEXT, "prompt": SURROGATE}).status_code == 400
    time.sleep(0.5)  # the access line is written as the response goes out
    lines = [line for line in server.new_log().splitlines() if line.strip()]
    assert len(lines) == 1 and "400" in lines[0], lines


# ------------------------------------------------------------------------------------------------ random bodies
ODD: list[Any] = [None, "", "x" * 20_000, SURROGATE, "\x00", "\udcff", 0, -1, 1, 2**63, -(2**70), 1e308, -1e-320, 0.5,
                  True, False, [], [None], [""], [SURROGATE], {}, {"a": None}, [1, [2]], [[]], [-1], [2**40]]
FIELDS = ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop", "seed",
          "stream", "stream_options", "logprobs", "top_logprobs", "echo", "top_k", "min_p", "repetition_penalty",
          "min_tokens", "ignore_eos", "prompt_logprobs", "add_generation_prompt", "continue_final_message", "user",
          "guided_choice", "tools", "best_of", "logit_bias"]


def _mutated(base: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    body = json.loads(json.dumps(base))
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        if kind < 0.7:
            body[rng.choice(FIELDS)] = rng.choice(ODD)
        elif kind < 0.8 and body:
            body.pop(rng.choice(sorted(body)))
        elif "messages" in body:  # inside a message: its role, content, content parts
            body["messages"] = [rng.choice([
                {"role": rng.choice(["user", "assistant", "system", "tool", "", None, 3]), "content": rng.choice(ODD)},
                {"role": "user", "content": [{"type": rng.choice(["text", "image_url", "input_audio", None]),
                                              "text": rng.choice(ODD)}]},
                {"role": "assistant", "content": "The answer is"},
                rng.choice(ODD),
            ]) for _ in range(rng.randint(1, 3))]
        else:
            body["prompt"] = [rng.choice(ODD) for _ in range(rng.randint(1, 3))]
    for key in ("max_tokens", "max_completion_tokens", "n", "min_tokens", "prompt_logprobs", "logprobs", "top_logprobs"):
        # keep the generation small: a valid count is at most 2 (the huge and invalid ones stay, to be refused)
        if isinstance(body.get(key), int) and not isinstance(body[key], bool) and 2 < body[key] < 2**31:
            body[key] = 2
    return body


def _fuzz(server: Server, path: str, base: dict[str, Any], seed: int, count: int) -> None:
    rng = random.Random(seed)
    for _ in range(count):
        body = _mutated(base, rng)
        _check(server, path, body, stream=body.get("stream") is True)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_chat_bodies(server: Server, seed: int) -> None:
    _fuzz(server, "/v1/chat/completions", CHAT, seed, 40)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_completions_bodies(server: Server, seed: int) -> None:
    _fuzz(server, "/v1/completions", TEXT, seed, 40)


def test_random_tokenize_bodies_and_raw_bytes(server: Server) -> None:
    _fuzz(server, "/tokenize", {"prompt": "Hi", "add_special_tokens": True}, 7, 40)
    for raw in [b"", b"{", b"[]", b"null", b'"x"', b"\xff\xfe", b'{"model": "' + MODEL.encode() + b'", "prompt": "\xed\xa0\x80"}',
                json.dumps(TEXT).encode()[:-1]]:
        for path in ("/v1/completions", "/v1/chat/completions", "/tokenize"):
            _check(server, path, raw)
