"""Where STaR generates: the GPU in bf16 when there is one, the CPU in fp32 otherwise (also after --resume)."""

from __future__ import annotations

import pytest
import torch

from thoughtsource.star.loading import generation_placement, place_for_generation


def test_cpu_machine_generates_in_fp32_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert generation_placement("auto") == ("cpu", torch.float32)
    assert generation_placement("bfloat16") == ("cpu", torch.bfloat16)


def test_gpu_machine_generates_in_bf16_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)  # rank 1's GPU, as accelerate set it
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert generation_placement("auto") == ("cuda:1", torch.bfloat16)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert generation_placement("auto") == ("cuda:1", torch.float16)
    assert generation_placement("float32") == ("cuda:1", torch.float32)


def test_a_trained_model_is_moved_and_cast() -> None:
    model = torch.nn.Linear(2, 2).to(torch.float64).train()
    placed = place_for_generation(model, "float32")
    assert next(placed.parameters()).dtype == torch.float32
    assert not placed.training


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_embedded_model_loads_on_the_gpu_in_bf16() -> None:
    from thoughtsource.embedded import resolve_model
    from thoughtsource.star.loading import load_for_generation

    model, _ = load_for_generation(resolve_model("embedded"))
    p = next(model.parameters())
    assert p.device.type == "cuda" and p.dtype == torch.bfloat16
