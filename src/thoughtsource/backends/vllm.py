"""The ``vllm`` backend: ``vllm.LLM`` in this process on one model (STaR's ``engine: vllm``, on each checkpoint).

vLLM is imported when the backend is made (it is no dependency of thoughtsource); :meth:`VLLMBackend.release`
deletes the engine and gives its GPU memory back (before STaR trains).
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, EngineError
from .base import BackendSettings, Completion, Request


def vllm_inputs(requests: Sequence[Request]) -> tuple[list[str], list[dict[str, Any]]]:
    """The prompts and the ``SamplingParams`` keyword arguments of each request (one sample each: the
    n samples of a prompt are separate requests with their own seeds, so each is stored on its own)."""
    prompts: list[str] = []
    params: list[dict[str, Any]] = []
    for r in requests:
        if r.messages:
            raise EngineError("the vllm engine completes plain prompts; STaR prompts are text, not chat messages")
        prompts.append(r.prompt)
        params.append({"n": 1, "temperature": r.temperature, "top_p": r.top_p, "max_tokens": r.max_tokens,
                       "stop": list(r.stop), "seed": r.seed})
    return prompts, params


def vllm_completion(output: Any) -> Completion:
    """A ``vllm.RequestOutput`` (first sample) as a :class:`Completion`."""
    sample = output.outputs[0]
    return Completion(text=sample.text, prompt_tokens=len(output.prompt_token_ids or ()),
                      completion_tokens=len(sample.token_ids or ()), finish_reason=str(sample.finish_reason or ""),
                      raw={"stop_reason": getattr(sample, "stop_reason", None)})  # the stop string that fired (calculator)


def require_vllm() -> Any:
    try:
        import vllm  # an optional dependency: imported only when this backend is made
    except ImportError:
        raise ConfigError("generation.engine 'vllm' needs vLLM in this environment: pip install vllm "
                          "(or use engine: server with a vLLM server started per checkpoint)") from None
    return vllm


def free_memory() -> None:
    """The garbage and torch's CUDA cache go back (after training, or once an engine is deleted)."""
    gc.collect()
    torch = sys.modules.get("torch")  # nothing to free on the GPU if torch was never imported
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
        with contextlib.suppress(Exception):
            torch.cuda.ipc_collect()


def release_gpu_memory(*, destroy_distributed: bool) -> None:
    """After deleting a vLLM engine: its model-parallel groups, then :func:`free_memory`."""
    with contextlib.suppress(ImportError):
        from vllm.distributed import parallel_state  # optional: only where vLLM is installed

        with contextlib.suppress(Exception):
            parallel_state.destroy_model_parallel()
        if destroy_distributed:
            with contextlib.suppress(Exception):
                parallel_state.destroy_distributed_environment()
    free_memory()


class VLLMBackend:
    """``vllm.LLM`` on one checkpoint, behind the backend protocol (``release()`` frees the GPU).

    ``destroy_distributed``: release also ends vLLM's torch.distributed environment (a single-process run's)."""

    name = "vllm"

    def __init__(self, model_path: str, fingerprint: str, *, seed: int, dtype: str, options: dict[str, Any],
                 destroy_distributed: bool = True) -> None:
        vllm = require_vllm()
        self.fingerprint = fingerprint
        self.destroy_distributed = destroy_distributed
        self._sampling_params = vllm.SamplingParams
        self.llm: Any = vllm.LLM(model=model_path, seed=seed, dtype=dtype, **options)

    @classmethod
    def options_from(cls, settings: BackendSettings) -> dict[str, Any]:
        """None: it runs STaR's ``engine: vllm`` on a checkpoint; ``generate`` reaches vLLM as a server."""
        raise ConfigError("backend 'vllm' runs STaR's engine: vllm on each checkpoint; to generate with vLLM, start "
                          "`vllm serve MODEL` and use --backend openai --base-url http://HOST:8000/v1")

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": self.name, "weights": self.fingerprint}

    async def complete(self, requests: list[Request]) -> list[Completion]:
        prompts, params = vllm_inputs(requests)
        outputs = self.llm.generate(prompts, [self._sampling_params(**p) for p in params], use_tqdm=False)
        return [vllm_completion(o) for o in outputs]

    async def aclose(self) -> None:  # the engine lives until release(): generate and rationalize share it
        return None

    def release(self) -> None:
        llm, self.llm = self.llm, None
        engine_core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if engine_core is not None and hasattr(engine_core, "shutdown"):  # vLLM V1: its engine process goes now
            with contextlib.suppress(Exception):
                engine_core.shutdown()
        del llm
        release_gpu_memory(destroy_distributed=self.destroy_distributed)
