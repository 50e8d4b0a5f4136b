"""A model that cannot be found is one clear error line, before any work: never a transformers traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_in_process import run_cli
from thoughtsource.embedded import check_model_source
from thoughtsource.errors import ModelError

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}


def test_sources_that_pass_and_that_are_refused(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "weights.safetensors").write_bytes(b"x")
    for ok in ("embedded", "SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M", "gpt2", str(tmp_path / "model")):
        check_model_source(ok)
    refused = {
        str(tmp_path / "missing"): "no such model folder",
        "./runs/iter_1/checkpoint": "no such model folder",
        "~/no/such/model": "no such model folder",
        str(tmp_path / "empty"): "no config.json",
        str(tmp_path / "weights.safetensors"): "is a file",
    }
    for source, message in refused.items():
        with pytest.raises(ModelError, match=message) as e:
            check_model_source(source)
        assert str(e.value).startswith(source)


@pytest.mark.slow
def test_load_model_turns_transformers_errors_into_one_line(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text('{"hello": 1}')  # no model_type: not a model transformers knows
    # a subprocess: huggingface_hub reads HF_HUB_OFFLINE when it is imported
    code = (
        "import sys\nfrom thoughtsource.embedded import load_model\nfrom thoughtsource.errors import ModelError\n"
        "for source in sys.argv[1:]:\n"
        "    try:\n        load_model(source)\n    except ModelError as e:\n        print(str(e).replace(chr(10), ' | '))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "no-such-org/no-such-model", str(tmp_path / "bad")],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and all(" | " not in line for line in lines), lines  # one line each
    assert lines[0].startswith("cannot load model 'no-such-org/no-such-model': ")
    assert lines[1].startswith(f"cannot load model '{tmp_path / 'bad'}': ")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=ENV)


def test_star_run_with_a_missing_model_folder_fails_before_making_the_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    r = _cli("star", "run", "--model", str(tmp_path / "nope"), "--out", str(out))
    assert r.returncode == 1, r.stderr
    assert (
        r.stderr.strip()
        == f"error: {tmp_path / 'nope'}: no such model folder (a model is 'embedded', a transformers model folder or a hub id)"
    )
    assert not out.exists()


def test_generate_with_a_folder_that_holds_no_model(tmp_path: Path, examples_dir: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out.json"
    r = _cli(
        "generate",
        "--file",
        str(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"),
        "--n-samples",
        "1",
        "--backend",
        "transformers",
        "--model",
        str(tmp_path / "empty"),
        "--out",
        str(out),
    )
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and f"{tmp_path / 'empty'}: not a transformers model folder" in r.stderr
    assert not out.exists()
