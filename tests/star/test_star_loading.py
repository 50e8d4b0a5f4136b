"""Models for generation load whole, outside the launcher's ZeRO-3/FSDP init; their weights are digested exactly."""

from __future__ import annotations

import os

import pytest
import torch

from bootstrap_base import BOOTSTRAP_BASE
from thoughtsource.star.loading import WeightsError, check_materialized, outside_sharded_init, weights_digest


@pytest.fixture
def live_zero3_config():
    """What ``accelerate launch`` with deepspeed_zero3.yaml (zero3_init_flag) leaves behind after the first training:
    a live HfDeepSpeedConfig, which sends every later ``from_pretrained`` through ``zero.Init``."""
    from accelerate.utils.deepspeed import HfDeepSpeedConfig
    from transformers.integrations import deepspeed as hf_deepspeed

    config = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    hf_deepspeed.set_hf_deepspeed_config(config)
    assert hf_deepspeed.is_deepspeed_zero3_enabled()
    yield config
    hf_deepspeed.unset_hf_deepspeed_config()


@pytest.mark.slow
def test_a_model_for_generation_loads_whole_under_a_live_zero3_config(live_zero3_config, tmp_path) -> None:
    """The old load (the plain ``from_pretrained`` after training) went through zero.Init: here, without DeepSpeed
    installed, it cannot load at all; on a GPU it gave ranks a partitioned model.  Now the load is whole and the
    config is live again afterwards, for the next training."""
    from transformers.integrations import deepspeed as hf_deepspeed

    from thoughtsource.embedded import load_model
    from thoughtsource.star.loading import load_for_generation
    from thoughtsource.star.train import save_checkpoint

    with pytest.raises(ImportError):  # what the loop did before: zero.Init, which needs deepspeed
        load_model("embedded")
    with outside_sharded_init():
        model, tok = load_model("embedded")
    save_checkpoint(model, tok, tmp_path / "checkpoint")  # a trained checkpoint, safetensors
    loaded, _ = load_for_generation(str(tmp_path / "checkpoint"), "float32")
    assert weights_digest(loaded) == weights_digest(model)
    assert hf_deepspeed.is_deepspeed_zero3_enabled()  # restored


def test_fsdp_ram_efficient_loading_is_off_inside_and_restored_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FSDP_CPU_RAM_EFFICIENT_LOADING", "true")
    with outside_sharded_init():
        assert os.environ["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "false"
    assert os.environ["FSDP_CPU_RAM_EFFICIENT_LOADING"] == "true"
    monkeypatch.delenv("FSDP_CPU_RAM_EFFICIENT_LOADING")
    with outside_sharded_init():
        pass
    assert "FSDP_CPU_RAM_EFFICIENT_LOADING" not in os.environ


def test_the_digest_is_exact_whatever_the_thread_count_and_sees_any_change() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(300, 200), torch.nn.LayerNorm(200))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = weights_digest(model)
        torch.set_num_threads(2)
        assert weights_digest(model) == one
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        w = model[0].weight
        w[0, 0] = torch.nextafter(w[0, 0], torch.tensor(1.0))  # one bit of one weight
    assert weights_digest(model) != one
    swapped = torch.nn.Sequential(torch.nn.Linear(300, 200), torch.nn.LayerNorm(200))
    with torch.no_grad():
        swapped[0].weight.copy_(model[0].weight.flip(0))  # the same values, permuted
        swapped[0].bias.copy_(model[0].bias)
    assert weights_digest(swapped) != weights_digest(model)
    import copy

    assert weights_digest(copy.deepcopy(model).to(torch.bfloat16)) != weights_digest(model)


def test_a_model_left_on_meta_is_refused() -> None:
    with torch.device("meta"):
        model = torch.nn.Linear(4, 4)
    with pytest.raises(WeightsError, match="ckpt: loaded without data for 2 tensors"):
        check_materialized(model, "ckpt")
    with pytest.raises(WeightsError, match="meta"):
        weights_digest(model)


def test_the_digest_does_not_depend_on_the_chunking_and_keeps_its_recorded_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs record digests and audits compare them later, so the value is part of the format: the committed bootstrap
    base digests to what every run from it recorded (its value before the chunked position sums), and chunks of 1,000,
    4,099 or 4M elements give the same digest (the position weights restart per chunk and are shifted back exactly)."""
    from thoughtsource.star import loading
    from thoughtsource.star.loading import load_for_generation

    model = load_for_generation(str(BOOTSTRAP_BASE), "float32")[0]
    assert weights_digest(model) == "w:bd9df69cde9cfa4b"
    for chunk in (1000, 4099, 1 << 22):
        monkeypatch.setattr(loading, "_DIGEST_CHUNK", chunk)
        assert weights_digest(model) == "w:bd9df69cde9cfa4b", chunk
