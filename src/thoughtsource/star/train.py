"""The inner loop: fine-tune the ORIGINAL base model on question → rationale + answer.

* completion-only loss: every prompt token's label is -100, so it contributes exactly zero to the
  loss and its gradient (``tests/test_star_train.py`` proves it on the real model);
* a fixed number of optimizer steps per iteration (:class:`~.config.StepSchedule`), linear warm-up
  then a constant learning rate (the paper's set-up);
* no dropped examples: the last partial batch is kept (``dataloader_drop_last=False``);
* optional PEFT LoRA, merged into the weights before the checkpoint is written;
* runs under ``accelerate launch`` (multi-GPU, DeepSpeed ZeRO-3, FSDP: ``configs/accelerate/``),
  because it is transformers' Trainer.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import StarConfig
from .tasks.base import TrainingRecord

log = logging.getLogger(__name__)

IGNORE_INDEX = -100


def tokenize_record(record: TrainingRecord, tokenizer: Any, max_len: int) -> dict[str, list[int]]:
    """input_ids = prompt + completion + eos; labels = -100 over the prompt, the token ids over the completion.

    The prompt is tokenized exactly as generation tokenizes it (:func:`prompt_token_ids`: BOS where the
    tokenizer adds one), on its own so the boundary is exact; if the sequence is too long the prompt is
    cut from the left after its leading special tokens (the completion is what we learn).
    """
    from ..backends.prompt_tokens import prompt_token_ids

    prompt_ids, n_special = prompt_token_ids(tokenizer, record.prompt)
    completion_ids = tokenizer(record.completion, add_special_tokens=False)["input_ids"]
    if tokenizer.eos_token_id is not None:
        completion_ids = [*completion_ids, tokenizer.eos_token_id]
    completion_ids = completion_ids[:max_len]
    keep_prompt = max(0, max_len - len(completion_ids))
    if len(prompt_ids) > keep_prompt:
        special = prompt_ids[:min(n_special, keep_prompt)]
        prompt_ids = special + (prompt_ids[len(prompt_ids) - (keep_prompt - len(special)):] if keep_prompt > len(special) else [])
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

    from ..console import progress

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


def train(
    cfg: StarConfig,
    base_model: str,
    records: Sequence[TrainingRecord],
    steps: int,
    output_dir: str | Path,
    *,
    description: str = "train",
    show_progress: bool = True,
) -> tuple[Any, Any, dict[str, Any]]:
    """Fine-tune a fresh copy of ``base_model`` for ``steps`` optimizer steps; returns (model, tokenizer, stats).

    The model is NOT saved here; :func:`save_checkpoint` writes it atomically.
    """
    import torch
    from transformers import Trainer, TrainingArguments

    from ..embedded import load_model

    if not records:
        raise ValueError("no training records")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    dtype = torch.bfloat16 if cfg.bf16 else torch.float32
    model, tok = load_model(base_model, dtype=dtype)
    if cfg.lora.enabled:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", r=cfg.lora.r, lora_alpha=cfg.lora.alpha,
                                                 lora_dropout=cfg.lora.dropout, target_modules=cfg.lora.target_modules))
    data = [tokenize_record(r, tok, cfg.max_seq_len) for r in records]
    n_completion_tokens = sum(sum(1 for x in d["labels"] if x != IGNORE_INDEX) for d in data)
    workdir = Path(output_dir)
    workdir.mkdir(parents=True, exist_ok=True)
    args = TrainingArguments(
        output_dir=str(workdir),
        max_steps=steps,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        learning_rate=cfg.lr,
        weight_decay=cfg.weight_decay,
        warmup_steps=cfg.steps.warmup_steps,
        lr_scheduler_type="constant_with_warmup",
        dataloader_drop_last=False,
        save_strategy="no",
        report_to=[],
        logging_steps=max(1, min(10, steps // 4 or 1)),
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=cfg.bf16,
        disable_tqdm=True,
        remove_unused_columns=False,
        use_cpu=not torch.cuda.is_available(),
    )
    callbacks = [_progress_callback(steps, description)] if show_progress else []
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collator(tok), callbacks=callbacks)
    result = trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    stats = {
        "steps": steps,
        "examples": len(data),
        "completion_tokens": n_completion_tokens,
        "epochs": round(float(trainer.state.epoch or 0), 3),
        "train_loss": round(float(result.training_loss), 5),
        "first_logged_loss": losses[0] if losses else None,
        "last_logged_loss": losses[-1] if losses else None,
        "train_runtime_s": round(float(result.metrics.get("train_runtime", 0.0)), 2),
    }
    model = trainer.model
    if cfg.lora.enabled:
        model = model.merge_and_unload()
    model.eval()
    return model, tok, stats


def save_checkpoint(model: Any, tokenizer: Any, target: str | Path) -> Path:
    """Write model + tokenizer into a temp folder beside ``target``, then rename it into place."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
