"""serve-model loads its model at start and fails at start; the openai backend asks serve-model's port; --version."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

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
