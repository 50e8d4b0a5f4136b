"""Rationale generation through the generation module's backends (never a second engine here).

* ``backend: transformers``: :mod:`thoughtsource.backends.transformers_local`, batched, on the
  model already in memory (the freshly fine-tuned one) or loaded from a checkpoint folder;
* ``backend: openai``: any OpenAI-compatible server (vLLM) via
  :mod:`thoughtsource.backends.openai_compat`; the server must serve the iteration's checkpoint
  (training and serving on separate machines).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..backends import Completion, Request, get_backend
from ..console import progress
from .config import StarConfig

log = logging.getLogger(__name__)


@dataclass
class GenStats:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "wall_s": round(self.wall_s, 3), "tokens_per_s": round(self.tokens_per_s, 2)}


def generation_placement(dtype: str = "auto") -> tuple[str, Any]:
    """(device, torch dtype) for generation: cuda when available, else cpu; ``auto`` = bf16 on a GPU that has it, fp32 on CPU."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
        return device, torch.bfloat16 if bf16 else (torch.float16 if device == "cuda" else torch.float32)
    return device, getattr(torch, dtype)


def place_for_generation(model: Any, dtype: str = "auto") -> Any:
    """Move a model (just loaded, or just trained) to the generation device and dtype, in eval mode."""
    device, torch_dtype = generation_placement(dtype)
    return model.to(device=device, dtype=torch_dtype).eval()


def load_for_generation(path: str, dtype: str = "auto") -> tuple[Any, Any]:
    """(model, tokenizer) from a folder, on the generation device and dtype (also after ``--resume``)."""
    from ..embedded import load_model

    _, torch_dtype = generation_placement(dtype)
    model, tok = load_model(path, dtype=torch_dtype)
    return place_for_generation(model, dtype), tok


class Generator:
    """Completes prompts with one model (one STaR iteration's M_n)."""

    def __init__(self, cfg: StarConfig, model_path: str, *, model: Any = None, tokenizer: Any = None,
                 show_progress: bool = True) -> None:
        self.cfg = cfg
        self.model_path = model_path
        self.show_progress = show_progress
        g = cfg.generation
        if g.backend == "openai":
            opts = {"model": g.served_model or model_path, **g.options}
            if g.base_url:
                opts["base_url"] = g.base_url
            self.backend = get_backend("openai", **opts)
        else:
            if model is None:
                model, tokenizer = load_for_generation(model_path, g.dtype)
            options = dict(g.options)
            if not g.prefix_cache:
                options.setdefault("mode", "generate")
            if g.threads:
                options.setdefault("threads", g.threads)
            self.backend = get_backend("transformers", model=model, tokenizer=tokenizer, batch_size=g.batch_size, **options)

    def complete(self, prompts: Sequence[str], max_tokens: Sequence[int], *, stop: Sequence[str] = (),
                 temperature: float = 0.0, n: int = 1, seed: int = 0, description: str = "generate",
                 stats: GenStats | None = None) -> list[list[Completion]]:
        """n completions per prompt (same order); progress over the requests."""
        reqs = [Request(prompt=p, max_tokens=int(m), temperature=temperature, stop=tuple(stop), seed=seed + i * n + j,
                        sample_index=j)
                for i, (p, m) in enumerate(zip(prompts, max_tokens, strict=True)) for j in range(n)]
        # longest prompts first, so each batch holds prompts of similar length; results go back in order
        order = sorted(range(len(reqs)), key=lambda i: -len(reqs[i].prompt))
        chunk = max(1, self.cfg.generation.batch_size) * 4  # the backend batches inside; chunks pace the progress bar
        done: dict[int, Completion] = {}
        t0 = time.perf_counter()

        async def _run(bar: Any, task: Any) -> None:
            try:
                for start in range(0, len(order), chunk):
                    idx = order[start:start + chunk]
                    for i, c in zip(idx, await self.backend.complete([reqs[i] for i in idx]), strict=True):
                        done[i] = c
                    bar.advance(task, len(idx))
                    elapsed = time.perf_counter() - t0
                    toks = sum(c.completion_tokens for c in done.values())
                    bar.update(task, **{"tok/s": f"{toks / elapsed:.0f}" if elapsed else ""})
            finally:  # workers/connections belong to this event loop; a model passed in stays loaded
                await self.backend.aclose()

        with progress("tok/s", enabled=self.show_progress) as bar:
            task = bar.add_task(description, total=len(reqs), **{"tok/s": ""})
            asyncio.run(_run(bar, task))
        out = [done[i] for i in range(len(reqs))]
        if stats is not None:
            stats.requests += len(out)
            stats.prompt_tokens += sum(c.prompt_tokens for c in out)
            stats.completion_tokens += sum(c.completion_tokens for c in out)
            stats.wall_s += time.perf_counter() - t0
        return [out[i * n:(i + 1) * n] for i in range(len(prompts))]
