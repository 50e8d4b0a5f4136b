"""``thoughtsource star base``: a small LLaMA-shaped model built from scratch and taught easy arithmetic.

STaR needs a model that already solves some problems and fails on harder ones (the paper's
threshold).  No such model can be downloaded here, so this module builds one:

1. a character-level tokenizer over printable ASCII (every arithmetic prompt, scratchpad and hint
   is in its alphabet), saved as an ordinary ``tokenizer.json``;
2. a LLaMA-shaped decoder (transformers' SmolLM3 architecture: LLaMA blocks whose rotary position
   embedding can be switched off per layer, so ``positions: nope`` is true NoPE, no rotation at all;
   ``positions: rope`` rotates every layer), sized by the config (depth, width, heads, KV heads);
3. trained with the STaR loop's own trainer (:func:`thoughtsource.star.train.train`: completion-only
   loss, resumable trainer checkpoints, a progress bar, seeded) on gold scratchpads of easy problems
   (digit counts ``data.digits``, in quantity), a small share of longer ones (``data.extra``) and a
   share of examples whose prompt carries the rationalization hint, so rationalization prompts are
   in distribution, **until it has learnt its range** (the gate): every ``gate.every`` steps the dev
   problems up to k + 1 digits are solved greedily, and training stops as soon as dev accuracy is at least
   ``gate.share`` at every digit count of ``data.digits``; ``training.steps`` is only the cap.  A small
   model learns carrying at a phase transition whose step depends on the seed and on the CPU's float
   kernels; a fixed step count lands before it on some machines and after it on others, the gate on
   the same side everywhere.  The default schedule is constant after the warm-up, so the learning rate
   has not decayed to nothing before the transition;
4. saved as a Hugging Face folder (``config.json``, ``model.safetensors``, tokenizer files) that
   ``--model FOLDER`` takes everywhere (``star run``, ``generate``, ``serve-model``), with
   ``thoughtsource_base.json`` beside: the config, the data counts, the training statistics, the gate's
   verdict and the base's accuracy per digit count on the task's dev set; and its curves:
   ``train_metrics.jsonl`` (loss, learning rate per logged step), ``dev_curve.jsonl`` (dev accuracy per digit
   count at every gate check) and ``curves.png``.

The training problems come from the arithmetic task's training pool (built with the same
``task_options`` as the STaR runs that start from this base), so no test or dev problem, nor its
commuted twin, is ever trained on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..backends import Request
from ..backends.transformers_local import TransformersBackend
from ..config import read_yaml_mapping
from ..errors import ConfigError, ThoughtSourceError, validation_problems
from ..io import atomic_write, write_json
from .analysis.accuracy import digits_of, group_key, learnt_range
from .analysis.plots import plot_base_curves
from .config import StarConfig, StepSchedule
from .loading import place_for_generation
from .tasks import check_task_options
from .tasks.arithmetic import ArithmeticTask
from .tasks.base import Problem, TrainingRecord
from .train import checkpoint_step, latest_checkpoint, save_checkpoint, train

log = logging.getLogger(__name__)

#: special tokens of the character tokenizer, in id order
PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
#: every printable ASCII character and the newline: prompts, scratchpads and hints of every format
ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))
INFO_FILE = "thoughtsource_base.json"
TRAIN_CURVE_FILE = "train_metrics.jsonl"
DEV_CURVE_FILE = "dev_curve.jsonl"
CURVES_PLOT = "curves.png"


class BaseNotLearnt(ThoughtSourceError):
    """The base reached its step cap without learning its range (the gate's accuracies are in the message)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Architecture(_Strict):
    """The decoder's shape (LLaMA blocks: RMSNorm, SwiGLU MLP, grouped-query attention)."""

    layers: int = Field(4, ge=1)
    width: int = Field(128, ge=8, description="hidden size")
    heads: int = Field(4, ge=1)
    kv_heads: int | None = Field(None, ge=1, description="None: as many as heads")
    intermediate: int | None = Field(None, ge=1, description="MLP size; None: 4 x width")
    positions: Literal["nope", "rope"] = Field("nope", description="nope: no position embedding at all; rope: rotary in every layer")
    rope_theta: float = Field(10_000.0, gt=0)
    max_positions: int = Field(2048, ge=16)

    @model_validator(mode="after")
    def _heads(self) -> Architecture:
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not a multiple of heads {self.heads}")
        if self.heads % (self.kv_heads or self.heads):
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        return self


class BaseData(_Strict):
    """What the base is taught: gold scratchpads of ``digits`` (in quantity) plus a few longer problems."""

    digits: tuple[int, int] = Field((1, 3), description="digit counts trained in quantity (k = the upper one)")
    examples: int = Field(20_000, ge=1, description="training problems drawn from the task's pool")
    extra: dict[int, float] = Field(default_factory=dict, description="digit count -> share of the examples (longer problems, few)")
    hint_share: float = Field(0.2, ge=0, le=1, description="share of examples whose prompt carries the rationalization hint")

    @model_validator(mode="after")
    def _ranges(self) -> BaseData:
        lo, hi = self.digits
        if not 1 <= lo <= hi:
            raise ValueError(f"digits: need 1 <= lo <= hi, got {lo}..{hi}")
        if sum(self.extra.values()) >= 1:
            raise ValueError("extra: the shares of longer problems must sum to less than 1")
        return self


class BaseTraining(_Strict):
    steps: int = Field(3000, ge=1, description="the cap: training stops earlier once the gate passes")
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-3, gt=0)
    lr_scheduler: Literal["constant_with_warmup", "cosine", "linear"] = Field(
        "constant_with_warmup", description="cosine/linear decay to 0 at the cap, which may come long after the gate")
    warmup_steps: int = Field(100, ge=0)
    weight_decay: float = Field(0.1, ge=0)
    checkpoint_every: int = Field(500, ge=0, description="save the trainer state every K steps (a killed training resumes)")
    max_seq_len: int = Field(1024, ge=16)


class BaseGate(_Strict):
    """Train until the range is learnt: dev accuracy >= ``share`` at every digit count of ``data.digits``."""

    every: int = Field(100, ge=0, description="check the dev set every N optimizer steps (0: no gate, train all steps)")
    share: float = Field(0.9, gt=0, le=1, description="the dev accuracy each digit count of the range must reach")
    required: bool = Field(True, description="fail when the cap is reached unlearnt (false: save it anyway, with a warning)")


class BaseConfig(_Strict):
    """``thoughtsource star base --config FILE``: the whole recipe of one from-scratch base model."""

    task: Literal["arithmetic"] = "arithmetic"
    task_options: dict[str, Any] = Field(default_factory=dict, description="the arithmetic task's options (the STaR runs' own)")
    architecture: Architecture = Field(default_factory=Architecture)
    data: BaseData = Field(default_factory=BaseData)
    training: BaseTraining = Field(default_factory=BaseTraining)
    gate: BaseGate = Field(default_factory=BaseGate)
    seed: int = 0
    eval_batch_size: int = Field(256, ge=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, path: str | None = None) -> BaseConfig:
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise ConfigError("invalid base-model config", path=path, problems=validation_problems(e)) from None

    @classmethod
    def from_file(cls, path: str | Path) -> BaseConfig:
        return cls.from_dict(read_yaml_mapping(path, "a mapping of options"), path=str(Path(path)))

    def make_task(self) -> ArithmeticTask:
        task = ArithmeticTask(**check_task_options("arithmetic", self.task_options))
        lo, hi = self.data.digits
        wanted = {*range(lo, hi + 1), *self.data.extra}
        outside = sorted(d for d in wanted if d not in task.digit_range)
        if outside:
            raise ConfigError(f"base data digits {outside} are outside the task's digit range "
                              f"{task.o.min_digits}..{task.o.max_digits} (task_options min_digits/max_digits)")
        return task


# --------------------------------------------------------------------------- tokenizer and model
def build_tokenizer() -> Any:
    """A character-level fast tokenizer over :data:`ALPHABET` (no BOS added; EOS ends every training target)."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate([PAD, BOS, EOS, UNK, *ALPHABET])}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))  # no merges: one token per character
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, bos_token=BOS, eos_token=EOS, unk_token=UNK,
                                   model_max_length=1 << 20, padding_side="left")


def build_model(arch: Architecture, tokenizer: Any, seed: int) -> Any:
    """A freshly initialised SmolLM3 (LLaMA-shaped) causal LM of the given shape, seeded."""
    import torch
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    config = SmolLM3Config(
        vocab_size=len(tokenizer),
        hidden_size=arch.width,
        intermediate_size=arch.intermediate or 4 * arch.width,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads or arch.heads,
        max_position_embeddings=arch.max_positions,
        rope_theta=arch.rope_theta,  # type: ignore[call-arg]  # transformers 5 takes it and moves it into rope_parameters
        no_rope_layers=[1 if arch.positions == "rope" else 0] * arch.layers,  # 0: this layer has no rotary embedding
        use_sliding_window=False,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    model = SmolLM3ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def parameter_count(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------- data
def training_problems(cfg: BaseConfig, task: ArithmeticTask) -> list[Problem]:
    """``data.examples`` problems from the task's pool: the ``extra`` shares first, the rest even over ``digits``."""
    rng = random.Random(f"star-base-data-{cfg.seed}")
    lo, hi = cfg.data.digits
    counts = {d: round(cfg.data.examples * share) for d, share in sorted(cfg.data.extra.items())}
    main = list(range(lo, hi + 1))
    rest = cfg.data.examples - sum(counts.values())
    for i, d in enumerate(main):
        counts[d] = counts.get(d, 0) + rest // len(main) + (1 if i < rest % len(main) else 0)
    out: list[Problem] = []
    for d, n in sorted(counts.items()):
        pool = task.pool(d)
        if not pool:
            raise ConfigError(f"the task's pool has no {d}-digit problems (pool_size too small?)")
        # a digit count whose pool is smaller than asked repeats its problems (1 digit has ~40 pairs)
        out += [pool[i % len(pool)] for i in _shuffled(rng, len(pool), n)]
    rng.shuffle(out)
    return out


def _shuffled(rng: random.Random, size: int, n: int) -> list[int]:
    order: list[int] = []
    while len(order) < n:
        block = list(range(size))
        rng.shuffle(block)
        order += block
    return order[:n]


def training_records(cfg: BaseConfig, task: ArithmeticTask, problems: list[Problem]) -> list[TrainingRecord]:
    """Zero-shot prompt (a ``hint_share`` of them with the hint, as rationalization writes it) → gold scratchpad + answer."""
    rng = random.Random(f"star-base-hint-{cfg.seed}")
    records = []
    for i, p in enumerate(problems):
        hint = rng.random() < cfg.data.hint_share
        records.append(TrainingRecord(id=f"{p.id}#{i}", prompt=task.prompt(p, [], hint=hint),
                                      completion=task.completion(p, p.rationale), rationalized=hint))
    return records


# --------------------------------------------------------------------------- evaluation
def accuracy_by_digits(model: Any, tokenizer: Any, task: ArithmeticTask, problems: list[Problem], *,
                       batch_size: int = 256) -> dict[str, list[int]]:
    """Greedy zero-shot accuracy per digit count: ``{"3-digit": [correct, n], ...}``."""
    backend = TransformersBackend.from_loaded(model, tokenizer, batch_size=batch_size)
    requests = [Request(prompt=task.prompt(p, []), max_tokens=task.max_new_tokens(p), stop=task.stop) for p in problems]
    completions = backend.complete_sync(requests)
    out: dict[str, list[int]] = {}
    for p, c in zip(problems, completions, strict=True):
        cell = out.setdefault(task.groups(p) or "all", [0, 0])
        cell[0] += bool(task.is_correct(p, task.trim(c.text)))
        cell[1] += 1
    return dict(sorted(out.items(), key=lambda kv: group_key(kv[0])))


def describe_accuracies(by_group: dict[str, list[int]]) -> str:
    return ", ".join(f"{g} {c}/{n}" for g, (c, n) in by_group.items())


def read_curve(path: Path, *, up_to: int | None = None) -> list[dict[str, Any]]:
    """The rows of a JSON-lines curve in step order; a row logged again by a resumed training (same step, same
    fields) replaces the earlier one."""
    if not path.is_file():
        return []
    rows: dict[tuple[int, tuple[str, ...]], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if up_to is None or row.get("step", 0) <= up_to:
                rows[(int(row.get("step", 0)), tuple(sorted(row)))] = row
    return [rows[key] for key in sorted(rows, key=lambda key: key[0])]


def gate_callback(cfg: BaseConfig, task: ArithmeticTask, tokenizer: Any, dev: list[Problem], curve: Path) -> Any:
    """A Trainer callback: every ``gate.every`` steps, dev accuracy per digit count (greedy, the eval's own decoding)
    appended to ``curve``; training stops at the first check where the range is learnt."""
    from transformers import TrainerCallback

    lo, k = cfg.data.digits
    gate = cfg.gate

    class DevGate(TrainerCallback):
        learnt_at: int | None = None

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            step = int(state.global_step)
            if not gate.every or step % gate.every or model is None:
                return
            was_training = model.training
            model.eval()
            try:
                by_digits = accuracy_by_digits(model, tokenizer, task, dev, batch_size=cfg.eval_batch_size)
            finally:
                model.train(was_training)
            learnt = learnt_range(by_digits, k, share=gate.share, lo=lo)
            loss = next((h["loss"] for h in reversed(state.log_history) if "loss" in h), None)
            with curve.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"step": step, "loss": loss, "dev_correct_by_group": by_digits, "learnt": learnt}) + "\n")
            log.info("base: step %d: dev %s%s", step, describe_accuracies(by_digits), " (range learnt)" if learnt else "")
            if learnt:
                self.learnt_at = step
                control.should_training_stop = True

    return DevGate()


# --------------------------------------------------------------------------- the command


def is_complete(folder: Path) -> bool:
    return (folder / "config.json").is_file() and (folder / INFO_FILE).is_file()


def build_base(cfg: BaseConfig, out: str | Path, *, resume: bool = False, show_progress: bool = True,
               threads: int | None = None) -> dict[str, Any]:
    """Build, train, evaluate and save the base model in ``out``; returns what ``thoughtsource_base.json`` holds.

    The work (initial weights, trainer checkpoints) lives in ``OUT.work/`` until the model is whole; a killed
    build resumes from there with ``resume=True``; the finished folder is written atomically.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out}: is a file; --out is the model's folder")
    recipe = cfg.model_dump(mode="json")
    if is_complete(out):
        if not resume:
            raise ConfigError(f"{out} already holds a base model: pass --resume to keep it, or another --out")
        info = json.loads((out / INFO_FILE).read_text(encoding="utf-8"))
        if info.get("config") != recipe:
            diffs = sorted(k for k in set(recipe) | set(info.get("config") or {}) if recipe.get(k) != (info.get("config") or {}).get(k))
            raise ConfigError(f"{out} holds a base model built from another recipe (differs in: {', '.join(diffs)}); "
                              "choose another --out")
        return info
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out}: exists and is not a base model folder; choose another --out")
    if threads:
        import torch

        torch.set_num_threads(threads)
    task = cfg.make_task()
    work = out.parent / f"{out.name}.work"
    init = work / "init"
    stamp = work / "config.json"
    if stamp.is_file() and json.loads(stamp.read_text(encoding="utf-8")) != recipe:
        if not resume:
            raise ConfigError(f"{work} holds an interrupted build of another config: delete it or pass another --out")
        log.warning("%s: left by another config; starting over", work)
        shutil.rmtree(work)
    if work.exists() and not resume and stamp.is_file():
        raise ConfigError(f"{work} holds an interrupted build: pass --resume to continue it")
    work.mkdir(parents=True, exist_ok=True)
    write_json(stamp, recipe)

    tokenizer = build_tokenizer()
    if not (init / "config.json").is_file():
        save_checkpoint(build_model(cfg.architecture, tokenizer, cfg.seed), tokenizer, init)
    problems = training_problems(cfg, task)
    records = training_records(cfg, task, problems)
    lo, k = cfg.data.digits
    dev = task.load("dev", cfg.seed)
    gate_dev = [p for p in dev if p.meta["digits"] <= k + 1]  # the range and k + 1 (the bootstrap's first step)
    curve = work / DEV_CURVE_FILE
    resumed_from = latest_checkpoint(work / "trainer")
    resumed_at = (checkpoint_step(resumed_from) or 0) if resumed_from else 0
    _rewrite_curve(curve, up_to=resumed_at)  # checks after the resumed step are redone
    callbacks = [gate_callback(cfg, task, tokenizer, gate_dev, curve)] if cfg.gate.every else []
    t = cfg.training
    star_cfg = StarConfig(model=str(init), task=cfg.task, task_options=cfg.task_options, batch_size=t.batch_size,
                          lr=t.lr, lr_scheduler=t.lr_scheduler, weight_decay=t.weight_decay, max_seq_len=t.max_seq_len,
                          steps=StepSchedule(first=t.steps, warmup_steps=t.warmup_steps), seed=cfg.seed,
                          checkpoint_every=t.checkpoint_every)
    t0 = time.perf_counter()
    model, tok, stats = train(star_cfg, str(init), records, t.steps, work / "trainer", description="base: train",
                              show_progress=show_progress, metrics_path=work / TRAIN_CURVE_FILE, metrics_extra={"base": True},
                              callbacks=callbacks)
    stats["wall_s"] = round(time.perf_counter() - t0, 1)
    dev_rows = read_curve(curve)
    train_rows = read_curve(work / TRAIN_CURVE_FILE)
    learnt_at = next((r["step"] for r in dev_rows if r["learnt"]), None)
    if cfg.gate.every:
        with contextlib.suppress(ImportError):  # no matplotlib: the curves stay as JSON lines
            plot_base_curves(train_rows, dev_rows, work / CURVES_PLOT, f"star base, seed {cfg.seed}")
        if learnt_at is None:
            last = dev_rows[-1] if dev_rows else None
            reached = (f"at step {last['step']} dev reached {describe_accuracies(last['dev_correct_by_group'])}"
                       if last else "no dev check ran (gate.every > training.steps)")
            message = (f"the base did not learn its range ({lo}..{k} digits, dev accuracy >= {cfg.gate.share:g} at each) "
                       f"within {t.steps} steps: {reached}. Train longer (training.steps, then --resume), change the recipe "
                       f"or the seed; its curves are in {work}")
            if cfg.gate.required:
                raise BaseNotLearnt(message)
            log.warning("%s; saved anyway (gate.required: false)", message)
    model = place_for_generation(model, "float32")
    t1 = time.perf_counter()
    by_digits = accuracy_by_digits(model, tok, task, dev, batch_size=cfg.eval_batch_size)
    info = {
        "config": recipe,
        "parameters": parameter_count(model),
        "k": cfg.data.digits[1],
        "data": {"examples": len(records), "with_hint": sum(r.rationalized for r in records),
                 "by_digits": {str(d): sum(p.meta["digits"] == d for p in problems) for d in sorted({p.meta["digits"] for p in problems})}},
        "training": stats,
        "dev_correct_by_group": by_digits,
        "dev_accuracy_by_group": {g: round(c / n, 4) if n else None for g, (c, n) in by_digits.items()},
        "eval_wall_s": round(time.perf_counter() - t1, 1),
    }
    info["learnt_range"] = learnt_range(by_digits, info["k"], share=cfg.gate.share, lo=lo)
    if not info["learnt_range"] and not cfg.gate.every:  # with a gate, its verdict was given above
        log.warning("the base did not learn its own range (digits <= k = %d; dev: %s): STaR needs a base that does; "
                    "train longer (training.steps) or build another seed", info["k"],
                    describe_accuracies({g: v for g, v in by_digits.items() if digits_of(g) <= info["k"]}))
    info["gate"] = {**cfg.gate.model_dump(mode="json"), "learnt_at_step": learnt_at, "checks": len(dev_rows)}
    model.config.architectures = [type(model).__name__]
    staged = work / "model"
    save_checkpoint(model, tok, staged)
    write_json(staged / INFO_FILE, info)
    for name in (TRAIN_CURVE_FILE, DEV_CURVE_FILE, CURVES_PLOT):  # the curves stay with the model
        if (work / name).is_file():
            shutil.copy2(work / name, staged / name)
    if out.exists():
        out.rmdir()  # empty (checked above)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged.rename(out)
    shutil.rmtree(work, ignore_errors=True)
    log.info("base model in %s: %s", out, by_digits)
    return info


def _rewrite_curve(path: Path, *, up_to: int) -> None:
    """Keep a curve's rows up to the step a resumed training continues from (the later ones are logged again)."""
    if path.is_file():
        rows = read_curve(path, up_to=up_to)
        with atomic_write(path) as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in rows))
