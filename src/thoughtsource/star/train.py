"""The inner loop: fine-tune the ORIGINAL base model on question → rationale + answer.

* completion-only loss: every prompt token's label is -100, so it contributes exactly zero to the
  loss and its gradient (``tests/star/test_star_train.py`` proves it on the real model);
* a fixed number of optimizer steps per iteration (:class:`~.config.StepSchedule`), linear warm-up
  then a constant learning rate (the paper's set-up);
* no dropped examples: the last partial batch is kept (``dataloader_drop_last=False``);
* optional PEFT LoRA, merged into the weights before the checkpoint is written;
* fp32 master weights always; ``bf16: true`` is mixed precision (bf16 autocast, fp32 updates), never a bf16
  model updated in place (AdamW steps of lr 1e-5 vanish below bf16's resolution: most weights never move);
* runs under ``accelerate launch`` (multi-GPU, DeepSpeed ZeRO-3, FSDP: ``configs/accelerate/``),
  because it is transformers' Trainer;
* resumable inside a step: the trainer state (weights, optimizer, scheduler, RNG, data position) is saved
  every ``checkpoint_every`` optimizer steps into the work folder, and a killed training step continues
  from the last one (only when the training inputs are the same: a fingerprint of them is kept beside);
* tracked: ``report_to`` goes to the Trainer (tensorboard, wandb, mlflow, trackio, none), and every
  logged step is appended to a local ``metrics.jsonl`` whatever else is chosen.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..backends.prompt_tokens import prompt_token_ids
from ..console import progress
from ..embedded import load_model
from .config import StarConfig
from .dist import barrier as dist_barrier
from .dist import is_main as dist_is_main
from .dist import world_size as dist_world_size
from .loading import outside_sharded_init
from .tasks.base import TrainingRecord

log = logging.getLogger(__name__)

IGNORE_INDEX = -100


def tokenize_record(record: TrainingRecord, tokenizer: Any, max_len: int) -> dict[str, list[int]]:
    """input_ids = prompt + completion + eos; labels = -100 over the prompt, the token ids over the completion.

    The prompt is tokenized exactly as generation tokenizes it (:func:`prompt_token_ids`: BOS where the
    tokenizer adds one), on its own so the boundary is exact; if the sequence is too long the prompt is
    cut from the left after its leading special tokens (the completion is what we learn).
    """
    prompt_ids, n_special = prompt_token_ids(tokenizer, record.prompt)
    completion_ids = tokenizer(record.completion, add_special_tokens=False)["input_ids"]
    if tokenizer.eos_token_id is not None:
        completion_ids = [*completion_ids, tokenizer.eos_token_id]
    completion_ids = completion_ids[:max_len]
    keep_prompt = max(0, max_len - len(completion_ids))
    if len(prompt_ids) > keep_prompt:
        head = min(n_special, keep_prompt)  # the leading BOS stays
        tail = keep_prompt - head
        prompt_ids = prompt_ids[:head] + (prompt_ids[-tail:] if tail else [])
    ids = [*prompt_ids, *completion_ids]
    labels = [IGNORE_INDEX] * len(prompt_ids) + list(completion_ids)
    return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels}


def collator(tokenizer: Any):
    """Right padding for training; labels padded with -100."""
    from transformers import DataCollatorForSeq2Seq

    tok = tokenizer
    if getattr(tokenizer, "padding_side", "right") != "right":
        import copy

        tok = copy.copy(tokenizer)
        tok.padding_side = "right"
    return DataCollatorForSeq2Seq(tok, padding=True, label_pad_token_id=IGNORE_INDEX, return_tensors="pt")


def _progress_callback(total: int, description: str) -> Any:
    from transformers import TrainerCallback

    class ProgressCallback(TrainerCallback):
        """A rich progress bar for the optimizer steps, with the running loss."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.bar = progress("loss")
            self.bar.start()
            self.task = self.bar.add_task(description, total=total, loss="")

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.bar.advance(self.task)

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kw: Any) -> None:
            if logs and "loss" in logs:
                self.bar.update(self.task, loss=f"{logs['loss']:.4f}")

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.bar.stop()

    return ProgressCallback()


def _metrics_callback(path: Path, extra: dict[str, Any]) -> Any:
    from transformers import TrainerCallback

    class MetricsJsonl(TrainerCallback):
        """Appends every log of the Trainer (loss, learning rate, grad norm) as one JSON line; rank 0 only."""

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kw: Any) -> None:
            if not logs or not state.is_world_process_zero:
                return
            row = {**extra, "step": int(state.global_step), "epoch": round(float(state.epoch or 0), 4), **logs}
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as fh:  # one short line per log: an append is all-or-nothing in practice
                fh.write(json.dumps(row) + "\n")

    return MetricsJsonl()


@contextlib.contextmanager
def _tensorboard_dir(cfg: StarConfig, metrics_path: str | Path | None, run_name: str | None) -> Iterator[None]:
    """TensorBoard event files beside ``metrics.jsonl`` (OUT/tensorboard/RUN), not in the work folder that is
    deleted once the checkpoint is written; a TENSORBOARD_LOGGING_DIR set by the user wins."""
    if "tensorboard" not in cfg.report_to_list() or metrics_path is None or os.environ.get("TENSORBOARD_LOGGING_DIR"):
        yield
        return
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(Path(metrics_path).parent / "tensorboard" / (run_name or "train"))
    try:
        yield
    finally:
        os.environ.pop("TENSORBOARD_LOGGING_DIR", None)


def training_fingerprint(cfg: StarConfig, base_model: str, records: Sequence[TrainingRecord], steps: int) -> str:
    """What a saved trainer state was made from: resuming it for other inputs would mix two trainings."""
    fields = cfg.result_fields()
    # generation's removed base_url and served_model were always null: hashed as before, so that a training
    # interrupted before their removal still resumes from its saved state
    fields["generation"] = {**fields["generation"], "base_url": None, "served_model": None}
    h = hashlib.sha256(json.dumps([base_model, steps, fields], sort_keys=True, default=str).encode())
    for r in records:
        h.update(json.dumps(r.to_dict(), sort_keys=True).encode())
    return h.hexdigest()


def resumable_checkpoint(workdir: Path, fingerprint: str, *, discard: bool = True) -> Path | None:
    """The newest ``checkpoint-N`` of an interrupted training of the same inputs in ``workdir``, else None.

    A work folder left by other inputs (or without a fingerprint) must not be resumed; with ``discard`` (the
    writing rank) it is emptied.
    """
    stamp = workdir / "inputs.sha256"
    if not workdir.is_dir():
        return None
    if not stamp.is_file() or stamp.read_text().strip() != fingerprint:
        if discard:
            if any(workdir.iterdir()):
                log.warning("discarding %s: it was left by a training of other inputs", workdir)
            shutil.rmtree(workdir, ignore_errors=True)
        return None
    return latest_checkpoint(workdir)


def latest_checkpoint(workdir: Path) -> Path | None:
    """The newest complete trainer checkpoint (``checkpoint-N``) in ``workdir``, whatever inputs it was made from."""
    # trainer_state.json is written last: a save killed half-way is not resumable (save_total_limit=1 deletes the
    # older state only after the newer one is whole, so one complete state remains)
    done = [c for c in workdir.glob(f"{_CHECKPOINT}*") if (c / "trainer_state.json").is_file() and checkpoint_step(c) is not None]
    return max(done, key=lambda c: checkpoint_step(c) or 0) if done else None


_CHECKPOINT = "checkpoint-"  # the Trainer's folder prefix


def checkpoint_step(checkpoint: Path) -> int | None:
    step = checkpoint.name.removeprefix(_CHECKPOINT)
    return int(step) if step.isdigit() else None


def train(
    cfg: StarConfig,
    base_model: str,
    records: Sequence[TrainingRecord],
    steps: int,
    output_dir: str | Path,
    *,
    description: str = "train",
    show_progress: bool = True,
    metrics_path: str | Path | None = None,
    metrics_extra: dict[str, Any] | None = None,
    run_name: str | None = None,
    callbacks: Sequence[Any] = (),
    checkpoint: str | Path | None = None,
) -> tuple[Any | None, Any, dict[str, Any]]:
    """Fine-tune a fresh copy of ``base_model`` for ``steps`` optimizer steps; returns (model, tokenizer, stats).

    ``output_dir`` is the work folder: trainer checkpoints go there every ``cfg.checkpoint_every`` steps, and a
    call that finds one of the same inputs there resumes from it.  ``checkpoint``: where the trained model is
    written (atomically, whole: gathered from every rank under ZeRO-3/FSDP by :func:`save_gathered`, LoRA merged).
    ``model`` is the trained model of this process (fp32 master weights, LoRA merged), or None under ZeRO-3/FSDP,
    where no process holds it whole.  ``metrics_path``: the JSON-lines log of every logged step, each line with
    ``metrics_extra``; ``run_name``: the trackers' name of this training.
    """
    import torch
    from transformers import Trainer, TrainingArguments

    if not records:
        raise ValueError("no training records")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    workdir = Path(output_dir)
    saving = 0 < cfg.checkpoint_every < steps  # a state saved at the last step would never be resumed
    args = TrainingArguments(
        output_dir=str(workdir),
        max_steps=steps,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.lr,
        weight_decay=cfg.weight_decay,
        warmup_steps=cfg.steps.warmup_steps,
        lr_scheduler_type=cfg.lr_scheduler,
        dataloader_drop_last=False,
        save_strategy="steps" if saving else "no",
        save_steps=cfg.checkpoint_every if saving else 500,  # 500: the Trainer's default, unused without saving
        save_total_limit=1,  # the newest state only: a resume needs nothing older
        report_to=cfg.report_to_list(),
        run_name=run_name,
        logging_steps=max(1, min(10, steps // 4 or 1)),
        seed=cfg.training_seed,
        data_seed=cfg.training_seed,
        bf16=cfg.bf16,
        disable_tqdm=True,
        remove_unused_columns=False,
        use_cpu=not torch.cuda.is_available(),
    )
    # after TrainingArguments, which sets up the launcher's DeepSpeed config: under ZeRO-3 this load is partitioned
    # (zero.Init) from the start.  fp32 master weights: the Trainer's bf16 is autocast, the updates stay fp32.
    model, tok = load_model(base_model, dtype=torch.float32)
    if cfg.lora.enabled:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", r=cfg.lora.r, lora_alpha=cfg.lora.alpha,
                                                 lora_dropout=cfg.lora.dropout, target_modules=cfg.lora.target_modules))
    data = [tokenize_record(r, tok, cfg.max_seq_len) for r in records]
    n_completion_tokens = sum(sum(1 for x in d["labels"] if x != IGNORE_INDEX) for d in data)
    fingerprint = training_fingerprint(cfg, base_model, records, steps)
    resume_from = resumable_checkpoint(workdir, fingerprint, discard=dist_is_main())
    dist_barrier()  # every rank has decided before rank 0 changes the folder
    workdir.mkdir(parents=True, exist_ok=True)
    if dist_is_main():
        (workdir / "inputs.sha256").write_text(fingerprint)
    cbs = [_progress_callback(steps, description)] if show_progress else []
    if metrics_path is not None:
        cbs.append(_metrics_callback(Path(metrics_path), metrics_extra or {}))
    if resume_from is not None:
        log.info("%s: resuming the training from %s", description, resume_from.name)
    with _tensorboard_dir(cfg, metrics_path, run_name):  # read when the Trainer is made
        trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collator(tok), callbacks=[*cbs, *callbacks])
        result = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    world = dist_world_size()
    stats = {
        "steps": steps,
        "global_step": int(trainer.state.global_step),  # < steps when a callback stopped the training early
        "examples": len(data),
        "completion_tokens": n_completion_tokens,
        "epochs": round(float(trainer.state.epoch or 0), 3),
        "train_loss": round(float(result.training_loss), 5),
        "first_logged_loss": losses[0] if losses else None,
        "last_logged_loss": losses[-1] if losses else None,
        "train_runtime_s": round(float(result.metrics.get("train_runtime", 0.0)), 2),
        "resumed_from_step": checkpoint_step(resume_from) if resume_from else None,
        "report_to": cfg.report_to_list(),
        # an optimizer step takes batch_size examples on each process: the same `steps` see W times more data on
        # W processes (docs/star-gpu.md); recorded so runs on different GPU counts can be compared
        "world_size": world,
        "global_batch_size": cfg.batch_size * cfg.gradient_accumulation_steps * world,
        "mixed_precision": "bf16" if cfg.bf16 else "no",
        "master_weights": "float32",
    }
    if is_sharded(trainer):
        stats["gathered_from"] = "deepspeed-zero3" if trainer.is_deepspeed_enabled else "fsdp"
        if checkpoint is not None:
            save_gathered(trainer, tok, cfg, base_model, Path(checkpoint))
        return None, tok, stats
    trained: Any = trainer.model  # transformers types it Module | None; with LoRA a peft model
    if cfg.lora.enabled:
        trained = trained.merge_and_unload()
    trained.eval()
    if checkpoint is not None:
        if dist_is_main():  # every rank holds the same model: one writes it
            save_checkpoint(trained, tok, checkpoint)
        dist_barrier()
    return trained, tok, stats


def is_sharded(trainer: Any) -> bool:
    """Whether the trained weights are split over the processes (DeepSpeed ZeRO-3 or FSDP)."""
    if getattr(trainer, "is_fsdp_enabled", False):
        return True
    if getattr(trainer, "is_deepspeed_enabled", False):
        ds = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
        return bool(ds is not None and ds.zero_stage == 3)
    return False


def save_gathered(trainer: Any, tok: Any, cfg: StarConfig, base_model: str, target: Path) -> Path:
    """Write a model that ZeRO-3 or FSDP sharded whole into ``target``; every rank calls it, rank 0 writes.

    ``trainer.save_model`` is a collective that gathers the shards (ZeRO-3's 16-bit gather, FSDP's full state
    dict) and rank 0 writes them into a staging folder, which becomes the checkpoint; a LoRA adapter is merged
    into the base model there, on rank 0 alone, loaded outside the sharding init.  No other rank loads anything.
    """
    staging = target.parent / f".{target.name}.gathered"
    if dist_is_main():
        shutil.rmtree(staging, ignore_errors=True)
    dist_barrier()
    trainer.save_model(str(staging))
    if dist_is_main():
        if cfg.lora.enabled:
            import torch
            from peft import PeftModel

            with outside_sharded_init():
                base, _ = load_model(base_model, dtype=torch.float32)
                merged = PeftModel.from_pretrained(base, str(staging)).merge_and_unload()
            save_checkpoint(merged, tok, target)
            shutil.rmtree(staging, ignore_errors=True)
        else:
            tok.save_pretrained(str(staging))
            _replace_dir(staging, target)
    dist_barrier()  # every rank sees the whole checkpoint from here on
    return target


def _replace_dir(src: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    os.replace(src, target)


def save_checkpoint(model: Any, tokenizer: Any, target: str | Path) -> Path:
    """Write model + tokenizer into a temp folder beside ``target``, then rename it into place."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _replace_dir(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
