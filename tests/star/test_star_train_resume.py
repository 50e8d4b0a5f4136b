"""Training inside a STaR step: resumable from its last saved state, tracked (metrics.jsonl, TensorBoard)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bootstrap_base import BOOTSTRAP_BASE
from thoughtsource.star.config import StarConfig
from thoughtsource.star.tasks.base import TrainingRecord
from thoughtsource.star.train import resumable_checkpoint, training_fingerprint

#: the committed 0.37M bootstrap base (a real model ``star base`` built): resuming a training is the Trainer's bookkeeping,
#: the same on any model, and 4 + 3 + 2 steps on it take a fraction of the 135M embedded model's
BASE = str(BOOTSTRAP_BASE)
RECORDS = [TrainingRecord(f"r{i}", f"Input:\n{i} + {i + 1}\nTarget:\n", f"<scratch>\n{i} + {i + 1} , C: 0\n</scratch>\n{2 * i + 1}")
           for i in range(1, 7)]


def _cfg(**kw: object) -> StarConfig:
    return StarConfig.from_dict({"batch_size": 2, "lr": 1e-4, "seed": 0, "checkpoint_every": 2,
                                 "steps": {"first": 4, "warmup_steps": 0}, **kw})


def test_report_to_is_validated_and_kept_out_of_the_result_fields() -> None:
    from thoughtsource.errors import ConfigError

    assert StarConfig().report_to_list() == [] and StarConfig().checkpoint_every == 100
    cfg = StarConfig.from_dict({"report_to": "tensorboard, wandb", "checkpoint_every": 5})
    assert cfg.report_to_list() == ["tensorboard", "wandb"]
    with pytest.raises(ConfigError, match="report_to"):
        StarConfig.from_dict({"report_to": "comet"})
    # tracking and checkpoint cadence do not change results: a resumed run may change them
    assert cfg.result_fields() == StarConfig().result_fields()


def test_a_work_folder_of_other_inputs_is_never_resumed(tmp_path: Path) -> None:
    cfg = _cfg()
    fp = training_fingerprint(cfg, "embedded", RECORDS, 4)
    assert fp != training_fingerprint(cfg, "embedded", RECORDS[:-1], 4)
    assert fp != training_fingerprint(cfg, "embedded", RECORDS, 5)
    assert fp != training_fingerprint(_cfg(lr=2e-4), "embedded", RECORDS, 4)
    work = tmp_path / "trainer"
    (work / "checkpoint-2").mkdir(parents=True)
    (work / "checkpoint-2" / "trainer_state.json").write_text("{}")
    (work / "checkpoint-4").mkdir()  # a save killed before its state file: not resumable
    (work / "inputs.sha256").write_text(fp)
    assert resumable_checkpoint(work, fp) == work / "checkpoint-2"
    assert resumable_checkpoint(work, "other", discard=False) is None and work.exists()  # a non-writing rank
    assert resumable_checkpoint(work, "other") is None and not work.exists()


class _Crash(Exception):
    pass


def _callbacks(crash_at: int | None, seen: list[int]) -> list[object]:
    from transformers import TrainerCallback

    class Watch(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):  # type: ignore[no-untyped-def]
            seen.append(int(state.global_step))
            if crash_at is not None and state.global_step == crash_at:
                raise _Crash(f"killed after step {crash_at}")

    return [Watch()]


@pytest.mark.slow
def test_a_killed_training_resumes_from_its_last_saved_step_and_ends_where_an_unbroken_one_does(tmp_path: Path) -> None:
    import torch

    pytest.importorskip("tensorboardX")
    from thoughtsource.star.train import train

    cfg = _cfg()
    plain_seen: list[int] = []
    whole, _, whole_stats = train(cfg, BASE, RECORDS, 4, tmp_path / "whole", show_progress=False,
                                  callbacks=_callbacks(None, plain_seen))
    assert plain_seen == [1, 2, 3, 4] and whole_stats["resumed_from_step"] is None

    tracked = _cfg(report_to="tensorboard")
    metrics = tmp_path / "run" / "metrics.jsonl"
    extra = {"metrics_extra": {"iteration": 1}, "run_name": "run-iter1"}
    seen: list[int] = []
    with pytest.raises(_Crash):
        train(tracked, BASE, RECORDS, 4, tmp_path / "work", show_progress=False, metrics_path=metrics, **extra,
              callbacks=_callbacks(3, seen))
    assert seen == [1, 2, 3] and (tmp_path / "work" / "checkpoint-2" / "trainer_state.json").is_file()

    seen.clear()
    model, _, stats = train(tracked, BASE, RECORDS, 4, tmp_path / "work", show_progress=False,
                            metrics_path=metrics, **extra, callbacks=_callbacks(None, seen))
    assert stats["resumed_from_step"] == 2 and seen == [3, 4]  # steps 1-2 were not trained again
    assert stats["report_to"] == ["tensorboard"]
    a, b = whole.state_dict(), model.state_dict()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)  # the same weights as the unbroken run
    assert any(not torch.equal(a[k], p) for k, p in _base_weights().items())  # and training moved them

    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    losses = [r for r in rows if "loss" in r]
    assert {r["iteration"] for r in rows} == {1} and "run_name" not in rows[0]
    assert {r["step"] for r in losses} == {1, 2, 3, 4} and all(r["loss"] > 0 for r in losses)
    assert any("train_runtime" in r for r in rows)  # the closing summary of each (resumed) training
    events = list((tmp_path / "run" / "tensorboard" / "run-iter1").rglob("events.out.tfevents.*"))
    assert events and all(e.stat().st_size > 0 for e in events)


def _base_weights() -> dict[str, object]:
    from thoughtsource.embedded import load_model

    return load_model(BASE)[0].state_dict()


# --------------------------------------------------------------------------- sharded training (ZeRO-3, FSDP)
class _Plugin:
    def __init__(self, stage: int) -> None:
        self.zero_stage = stage


class _ShardedTrainer:
    """What train() reads of a Trainer whose weights ZeRO-3/FSDP split: save_model gathers and writes them."""

    def __init__(self, model: object, *, fsdp: bool = False, zero_stage: int | None = None) -> None:
        self.model, self.saved_to = model, []  # type: ignore[var-annotated]
        self.is_fsdp_enabled = fsdp
        self.is_deepspeed_enabled = zero_stage is not None
        self.accelerator = type("A", (), {"state": type("S", (), {"deepspeed_plugin": _Plugin(zero_stage or 0)})()})()

    def save_model(self, folder: str) -> None:
        self.saved_to.append(folder)
        self.model.save_pretrained(folder)  # type: ignore[attr-defined]


def test_sharded_training_is_detected_for_zero3_and_fsdp_only() -> None:
    from thoughtsource.star.train import is_sharded

    assert is_sharded(_ShardedTrainer(None, fsdp=True)) and is_sharded(_ShardedTrainer(None, zero_stage=3))
    assert not is_sharded(_ShardedTrainer(None, zero_stage=2)) and not is_sharded(_ShardedTrainer(None))


@pytest.mark.slow
def test_a_sharded_model_is_gathered_through_save_model_and_loaded_whole(tmp_path: Path) -> None:
    import torch

    from thoughtsource.embedded import load_model
    from thoughtsource.star.train import save_gathered

    model, tok = load_model("embedded")
    with torch.no_grad():
        model.model.norm.weight.add_(1.0)  # "trained": differs from the base model
    trainer = _ShardedTrainer(model, fsdp=True)
    target = save_gathered(trainer, tok, StarConfig(), "embedded", tmp_path / "checkpoint")
    assert trainer.saved_to == [str(tmp_path / ".checkpoint.gathered")]  # every rank calls save_model: a collective
    assert (target / "tokenizer.json").is_file()  # rank 0 adds the tokenizer: the folder loads alone
    assert not (tmp_path / ".checkpoint.gathered").exists()  # the staging folder became the checkpoint
    full, _ = load_model(str(target), dtype=torch.float32)
    a, b = model.state_dict(), full.state_dict()
    assert full is not model and all(torch.equal(a[k], b[k]) for k in a)
