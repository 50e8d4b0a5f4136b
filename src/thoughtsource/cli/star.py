"""``thoughtsource star run``: the STaR loop; ``thoughtsource star compare``: one plot for several runs."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import typer

from ..console import console

star_app = typer.Typer(help="STaR: bootstrap reasoning with rationale generation and rationalization.", no_args_is_help=True)


class Baseline(str, Enum):
    star = "star"
    direct = "direct"
    fewshot = "fewshot"


class PseudoLabels(str, Enum):
    none = "none"
    majority = "majority"


def _digits(value: str) -> tuple[int, int]:
    lo, _, hi = value.partition("-")
    try:
        return int(lo), int(hi or lo)
    except ValueError:
        raise typer.BadParameter(f"expected N or N-M, got {value!r}") from None


@star_app.command("run")
def run(
    out: Path = typer.Option(..., "--out", help="Run directory (config, iter_N/ artifacts, metrics.json, plots/)."),
    task: str | None = typer.Option(None, "--task", help="arithmetic, gsm8k, commonsense_qa, a registered dataset or a ThoughtSource file."),
    model: str | None = typer.Option(None, "--model", help='"embedded" (SmolLM2-135M-Instruct) or a transformers model folder.'),
    iterations: int | None = typer.Option(None, "--iterations", "-n", help="Outer-loop iterations."),
    config: Path | None = typer.Option(None, "--config", help="YAML run config (configs/star/*.yaml); command-line options win."),
    no_rationalization: bool = typer.Option(False, "--no-rationalization", help="STaR without rationalization."),
    baseline: Baseline | None = typer.Option(None, "--baseline", help="direct: fine-tune on answers only; fewshot: no training."),
    pseudo_labels: PseudoLabels | None = typer.Option(None, "--pseudo-labels", help="majority: majority answer of k samples as the target."),
    pseudo_k: int | None = typer.Option(None, "--pseudo-k", help="Samples per question for --pseudo-labels majority."),
    digits: str | None = typer.Option(None, "--digits", help="arithmetic: digit range, e.g. 1-5."),
    n_train: int | None = typer.Option(None, "--n-train", help="Training problems."),
    n_test: int | None = typer.Option(None, "--n-test", help="Test problems (arithmetic: per digit count)."),
    fewshot_k: int | None = typer.Option(None, "--fewshot-k", help="Few-shot exemplars per prompt (arithmetic: per digit count)."),
    steps_first: int | None = typer.Option(None, "--steps-first", help="Training steps at iteration 1 (then +20%/iteration)."),
    warmup_steps: int | None = typer.Option(None, "--warmup-steps", help="Linear learning-rate warm-up steps."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Training batch size."),
    lr: float | None = typer.Option(None, "--lr", help="Learning rate."),
    lora: bool | None = typer.Option(None, "--lora/--no-lora", help="Train a LoRA adapter (merged into the checkpoint)."),
    gen_batch_size: int | None = typer.Option(None, "--gen-batch-size", help="Generation batch size."),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", help="Override the task's generation length."),
    backend: str | None = typer.Option(None, "--backend", help="transformers (local) or openai (an OpenAI-compatible server)."),
    base_url: str | None = typer.Option(None, "--base-url", help="Server URL for --backend openai."),
    seed: int | None = typer.Option(None, "--seed"),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in --out from its last complete step."),
) -> None:
    """Run STaR (or a baseline) and write metrics, rationales, checkpoints and plots under --out."""
    from ..star.config import StarConfig
    from ..star.loop import run_star

    data: dict[str, Any] = {}
    if config is not None:
        data = StarConfig.from_file(config).model_dump(mode="json", exclude_unset=True)
    elif resume and (out / "config.json").exists():
        data = StarConfig.from_file(out / "config.json").model_dump(mode="json")

    def put(path: str, value: Any) -> None:
        if value is None:
            return
        d = data
        *parents, last = path.split(".")
        for p in parents:
            d = d.setdefault(p, {})
        d[last] = value

    put("task", task)
    put("model", model)
    put("iterations", iterations)
    if no_rationalization:
        put("rationalization", False)
    put("baseline", baseline.value if baseline else None)
    put("pseudo_labels.mode", pseudo_labels.value if pseudo_labels else None)
    put("pseudo_labels.k", pseudo_k)
    if digits:
        lo, hi = _digits(digits)
        put("task_options.min_digits", lo)
        put("task_options.max_digits", hi)
    put("task_options.n_train", n_train)
    if n_test is not None:
        put("task_options." + ("n_test_per_digit" if (data.get("task") or "arithmetic") == "arithmetic" else "n_test"), n_test)
    put("fewshot_k", fewshot_k)
    put("steps.first", steps_first)
    put("steps.warmup_steps", warmup_steps)
    put("batch_size", batch_size)
    put("lr", lr)
    put("lora.enabled", lora)
    put("generation.batch_size", gen_batch_size)
    put("generation.max_new_tokens", max_new_tokens)
    put("generation.backend", backend)
    put("generation.base_url", base_url)
    put("seed", seed)
    cfg = StarConfig.from_dict(data, path=str(config) if config else None)
    summary = run_star(cfg, out, resume=resume)
    _print_summary(summary)
    console.print(f"wrote {out / 'metrics.json'} and plots under {out / 'plots'}")


def _print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="STaR")
    for col in ("iter", "train acc (before → after rat.)", "kept (rationalized)", "steps", "test acc", "test by group"):
        table.add_column(col)
    for m in summary["iterations"]:
        before, after = m.get("train_accuracy_before_rationalization"), m.get("train_accuracy_after_rationalization")
        table.add_row(
            str(m["iteration"]),
            f"{before} → {after}" if m["iteration"] else "",
            f"{m.get('kept')} ({m.get('kept_rationalized')})" if m["iteration"] else "",
            str(m.get("steps") or ""),
            str(m["test_accuracy"]),
            ", ".join(f"{g}: {v}" for g, v in m.get("test_accuracy_by_group", {}).items()),
        )
    console.print(table)


@star_app.command("compare")
def compare(
    runs: list[Path] = typer.Argument(..., help="Run directories (each with metrics.json); label=DIR to name one."),
    out: Path = typer.Option(..., "--out", help="PNG file to write."),
    group: str | None = typer.Option(None, "--group", help="Plot one group's accuracy (e.g. 2-digit)."),
) -> None:
    """Test accuracy per iteration of several runs in one plot (e.g. STaR vs no rationalization vs direct)."""
    from ..io import read_json
    from ..star.plots import plot_compare

    loaded = {}
    for r in runs:
        label, _, path = str(r).rpartition("=") if "=" in str(r) else (Path(r).name, "", str(r))
        loaded[label] = read_json(Path(path) / "metrics.json")
    console.print(f"wrote {plot_compare(loaded, out, group=group)}")


def register(app: typer.Typer) -> None:
    app.add_typer(star_app, name="star")
