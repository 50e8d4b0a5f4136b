"""How the STaR loop loads a model: for training inside the launcher's sharding, for generation outside it.

Under ``accelerate launch`` with DeepSpeed ZeRO-3 (``zero3_init_flag``) or FSDP's RAM-efficient loading,
``from_pretrained`` does not give every process the whole model: ZeRO-3 keeps a live ``HfDeepSpeedConfig``
that sends every later load through ``zero.Init`` (partitioned parameters), and with
``FSDP_CPU_RAM_EFFICIENT_LOADING`` the processes other than local rank 0 get ``meta`` or uninitialised tensors
that FSDP would broadcast into, if FSDP wrapped the model afterwards.  That is right for the model the Trainer
wraps and wrong for everything else: a model that generates, or a checkpoint that is read back.

* :func:`outside_sharded_init` turns both off for one load and restores them after;
* :func:`load_for_generation` loads a folder that way, straight onto this process's device and dtype;
* :func:`weights_digest` is a cheap digest of the weights in memory: the ranks compare theirs (every rank must
  generate with the same weights) and the step's JSON records it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from typing import Any

from ..embedded import load_model
from ..errors import ThoughtSourceError

_FSDP_RAM_EFFICIENT = "FSDP_CPU_RAM_EFFICIENT_LOADING"
_DIGEST_CHUNK = 1 << 22


class WeightsError(ThoughtSourceError):
    """A model in memory does not hold real weights (meta tensors), or the ranks hold different ones."""


@contextlib.contextmanager
def outside_sharded_init() -> Iterator[None]:
    """Loads inside this block give this process the whole model: no ``zero.Init``, no FSDP meta loading.

    ZeRO-3: transformers asks ``is_deepspeed_zero3_enabled()``, which reads the module-level weak reference
    that ``HfDeepSpeedConfig`` sets; it is unset here and the same reference put back after (accelerate's
    ``zero3_init_context_manager`` does the same dance).  FSDP: transformers reads the environment variable.
    """
    from transformers.integrations import deepspeed as hf_deepspeed

    saved_ref = hf_deepspeed._hf_deepspeed_config_weak_ref  # transformers' only handle on the live config
    saved_env = os.environ.get(_FSDP_RAM_EFFICIENT)
    hf_deepspeed.unset_hf_deepspeed_config()
    os.environ[_FSDP_RAM_EFFICIENT] = "false"
    try:
        yield
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = saved_ref
        if saved_env is None:
            os.environ.pop(_FSDP_RAM_EFFICIENT, None)
        else:
            os.environ[_FSDP_RAM_EFFICIENT] = saved_env


def generation_placement(dtype: str = "auto") -> tuple[str, Any]:
    """(device, torch dtype) for generation: this process's GPU when there is one, else the CPU; ``auto`` = bf16
    on a GPU that has it (fp16 on one that does not), fp32 on the CPU."""
    import torch

    if torch.cuda.is_available():
        device = f"cuda:{torch.cuda.current_device()}"  # the rank's own GPU (accelerate set it), not always cuda:0
    else:
        device = "cpu"
    if dtype == "auto":
        if device == "cpu":
            return device, torch.float32
        return device, torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return device, getattr(torch, dtype)


def resolved_placement(dtype: str = "auto") -> dict[str, str]:
    """What generation will run on, as words: ``{"device": "cpu"|"cuda", "dtype": "float32"|...}`` (store keys)."""
    device, torch_dtype = generation_placement(dtype)
    return {"device": device.split(":")[0], "dtype": str(torch_dtype).removeprefix("torch.")}


def place_for_generation(model: Any, dtype: str = "auto") -> Any:
    """Move a model in memory to the generation device and dtype, in eval mode."""
    device, torch_dtype = generation_placement(dtype)
    return model.to(device=device, dtype=torch_dtype).eval()


def load_for_generation(path: str, dtype: str = "auto") -> tuple[Any, Any]:
    """(model, tokenizer) of a folder, whole in this process, on its generation device and dtype.

    Loaded outside any ZeRO-3/FSDP init (:func:`outside_sharded_init`) and straight onto the GPU where there is
    one (no second full copy in CPU RAM); a model with parameters left on ``meta`` is refused.
    """
    device, torch_dtype = generation_placement(dtype)
    kwargs: dict[str, Any] = {"dtype": torch_dtype}
    if device != "cpu":
        kwargs["device_map"] = {"": device}
    with outside_sharded_init():
        model, tok = load_model(path, **kwargs)
    check_materialized(model, path)
    return place_for_generation(model, dtype), tok


def check_materialized(model: Any, source: str) -> None:
    """Raise :class:`WeightsError` when a parameter or buffer of ``model`` has no data (``meta``)."""
    empty = [name for name, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if empty:
        raise WeightsError(f"{source}: loaded without data for {len(empty)} tensors (e.g. {empty[0]}): "
                           "the load ran inside a ZeRO-3/FSDP init")


def weights_digest(model: Any) -> str:
    """A digest of every parameter and buffer (name, shape, dtype, three integer checksums of the raw bits), on device.

    The bits are summed as integers (plain, squared, weighted by position; int64, wrapping), which is exact: the same
    weights give the same digest whatever the device's thread count or reduction order, at one pass over the weights
    and one small copy to the host.  Garbage, zeros, a permutation or another checkpoint's weights give another one.
    """
    import torch

    names: list[str] = []
    sums: list[Any] = []
    with torch.no_grad():
        for name, t in sorted([*model.named_parameters(), *model.named_buffers()], key=lambda kv: kv[0]):
            if t.is_meta:
                raise WeightsError(f"{name} is on meta: the model holds no weights there")
            flat = t.detach().reshape(-1)
            if flat.is_floating_point():
                flat = flat.view({8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}[flat.element_size()])
            total = torch.zeros(3, dtype=torch.int64, device=t.device)
            positions = torch.arange(1, min(_DIGEST_CHUNK, flat.numel()) + 1, dtype=torch.int64, device=t.device)
            for start in range(0, flat.numel(), _DIGEST_CHUNK):  # an int64 copy of a chunk, not of the tensor
                x = flat[start:start + _DIGEST_CHUNK].to(torch.int64)
                plain = x.sum()
                # sum(x * (start + 1 + i)) = start * sum(x) + sum(x * (1 + i)), exact in int64's wrapping arithmetic
                weighted = (x * positions[:x.numel()]).sum() + start * plain
                total += torch.stack([plain, x.mul_(x).sum(), weighted])
            names.append(f"{name}:{tuple(t.shape)}:{t.dtype}")
            sums.append(total)
        values = torch.stack(sums).cpu().tolist() if sums else []
    h = hashlib.sha256()
    for name, checks in zip(names, values, strict=True):
        h.update(f"{name}={checks}\n".encode())
    return "w:" + h.hexdigest()[:16]
