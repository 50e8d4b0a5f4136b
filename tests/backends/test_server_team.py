"""serve-model as a team runs it (issue 45, finding 7): an API key, /health, /version and Prometheus /metrics."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def keyed():
    from thoughtsource.backends.mock import MockBackend
    from thoughtsource.backends.server import run_model_server

    with run_model_server(MockBackend(), served_model_name="mock", api_key="s3cret-key") as handle:
        yield handle


def test_a_wrong_or_missing_key_is_a_401(keyed):
    root = keyed.base_url.removesuffix("/v1")
    body = {"model": "mock", "prompt": "Hi", "max_tokens": 2}
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-key"},
                    {"Authorization": "Bearer s3cret-key-and-more"}, {"Authorization": "Basic s3cret-key"}):
        for method, path in (("POST", "/v1/completions"), ("GET", "/v1/models"), ("POST", "/tokenize"), ("GET", "/metrics"),
                             ("GET", "/version"), ("GET", "/no/such/route")):
            r = httpx.request(method, root + path, json=body, headers=headers, timeout=30)
            assert r.status_code == 401, (headers, path, r.text)
            assert r.json()["error"]["type"] == "authentication_error" and "s3cret" not in r.text
    ok = httpx.post(root + "/v1/completions", json=body, headers={"Authorization": "Bearer s3cret-key"}, timeout=30)
    assert ok.status_code == 200, ok.text
    assert httpx.get(root + "/health", timeout=30).json() == {"status": "ok"}  # probes need no key


def test_the_openai_client_with_and_without_the_key(keyed):
    openai = pytest.importorskip("openai")
    with openai.OpenAI(base_url=keyed.base_url, api_key="nope", max_retries=0) as bad, pytest.raises(openai.AuthenticationError):
        bad.models.list()
    with openai.OpenAI(base_url=keyed.base_url, api_key="s3cret-key", max_retries=0) as good:
        assert [m.id for m in good.models.list()] == ["mock"]


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_version_and_metrics(keyed):
    root, auth = keyed.base_url.removesuffix("/v1"), {"Authorization": "Bearer s3cret-key"}
    assert httpx.get(root + "/version", headers=auth).json() == {"version": importlib.metadata.version("thoughtsource")}
    before = _samples(httpx.get(root + "/metrics", headers=auth).text)
    for _ in range(3):
        httpx.post(root + "/v1/completions", json={"model": "mock", "prompt": "Hi", "max_tokens": 2}, headers=auth)
    httpx.post(root + "/v1/completions", json={"model": "mock", "prompt": ""}, headers=auth)
    r = httpx.get(root + "/metrics", headers=auth)
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    for kind in ("counter", "histogram", "gauge"):
        assert "# TYPE thoughtsource_" in r.text and f" {kind}\n" in r.text
    after = _samples(r.text)
    ok = 'thoughtsource_requests_total{path="/v1/completions",status="200"}'
    assert after[ok] - before.get(ok, 0) == 3
    assert after['thoughtsource_requests_total{path="/v1/completions",status="400"}'] >= 1
    count = 'thoughtsource_request_duration_seconds_count{path="/v1/completions"}'
    inf = 'thoughtsource_request_duration_seconds_bucket{path="/v1/completions",le="+Inf"}'
    assert after[count] == after[inf] >= 4
    buckets = [v for k, v in after.items() if k.startswith('thoughtsource_request_duration_seconds_bucket{path="/v1/completions"')]
    assert buckets == sorted(buckets)  # cumulative
    assert after["thoughtsource_queue_length"] == 0
    assert after["thoughtsource_generation_tokens_total"] > before.get("thoughtsource_generation_tokens_total", 0)
    httpx.get(root + "/some/probe/path", headers=auth)  # unknown paths share one label: the metric cannot be flooded
    assert 'path="/some/probe/path"' not in httpx.get(root + "/metrics", headers=auth).text


@pytest.mark.slow
@pytest.mark.parametrize(("host", "key", "warned"), [("0.0.0.0", None, True), ("0.0.0.0", "k", False), ("127.0.0.1", None, False)])
def test_listening_beyond_loopback_without_a_key_warns(tmp_path: Path, host: str, key: str | None, warned: bool) -> None:
    """The warning comes before the model loads: a model folder that cannot load ends the run at once."""
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "llama"}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["src", os.environ.get("PYTHONPATH", "")])}
    env.pop("THOUGHTSOURCE_API_KEY", None)
    if key is not None:
        env["THOUGHTSOURCE_API_KEY"] = key  # the environment variable is read as --api-key
    p = subprocess.run([sys.executable, "-m", "thoughtsource", "serve-model", "--model", str(broken), "--host", host,
                        "--port", "0"], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 1
    assert bool(re.search(rf"listening on {re.escape(host)} without an API key", p.stderr)) == warned, p.stderr
