"""``demo``: the end-to-end pipeline on the embedded model, offline, in a few minutes on a CPU.

Loads a small sample of a real dataset (GSM8K's test split from the dataset registry, from local raw
files only; if they are not there, the WorldTree example file of ThoughtSource from the shared data
folder), generates CoTs with two triggers (Kojima et al.'s "Let's think step by step." and no trigger)
with SmolLM2-135M-Instruct, extracts answers, evaluates, prints a table and writes a plot.
Completions are cached in ``OUT/completions.sqlite``: running the demo again is instant.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import typer

from ..collection import Collection
from ..console import console, note, stdout
from ..errors import DataError, ThoughtSourceError
from ..generation import GenerateConfig, generate
from ..io import atomic_write, check_out
from ..paths import data_env
from .generate import old_name

log = logging.getLogger(__name__)

EXAMPLE_FILE = Path("thoughtsource_examples") / "tests_unit_data" / "worldtree_100_dataset.json"


def _shared_data_dirs() -> list[Path]:
    """$THOUGHTSOURCE_DATA (or its old name), then a ``shared/data`` beside the working directory or the checkout."""
    env = data_env()
    dirs = [env] if env is not None else []
    repo = Path(__file__).resolve().parents[3]
    return [*dirs, Path.cwd().parent / "shared" / "data", repo.parent / "shared" / "data"]


def load_demo_data(n_samples: int, seed: int) -> tuple[Any, str]:
    """(collection, description): GSM8K test from the registry (local raw files only, no download),
    else the WorldTree example file of ThoughtSource."""
    shared = [d for d in _shared_data_dirs() if d.is_dir()]
    for data_dir in [None, *shared]:  # None: $THOUGHTSOURCE_DATA or the user cache
        try:
            full = Collection.from_datasets(["gsm8k"], splits=["test"], data_dir=data_dir, download=False)
        except ThoughtSourceError as e:
            log.debug("demo: gsm8k not loadable from %s: %s", data_dir or "the default data folder", e)
            continue
        return full.select(split="test", number_samples=n_samples, seed=seed), "gsm8k/test"
    log.info("demo: gsm8k is not available (registry or raw files); using the ThoughtSource example file")
    for d in shared:
        path = d / EXAMPLE_FILE
        if path.exists():
            full = Collection.from_json(path)
            return full.select(split="train", number_samples=n_samples, seed=seed), "worldtree/train (ThoughtSource example file)"
    raise DataError("no demo data: gsm8k's raw files and the ThoughtSource example file were not found "
                    "(set THOUGHTSOURCE_DATA to the raw data folder)", path=str(EXAMPLE_FILE))


def demo(
    out: Path = typer.Option(Path("demo_out"), "--out", "-o", help="Output folder."),
    limit: int = typer.Option(None, "--limit", min=1, help="How many samples to generate for \\[default: 8]."),
    n_samples: int = typer.Option(None, "--n-samples", min=1, hidden=True, help="Old name of --limit."),
    max_tokens: int = typer.Option(96, "--max-tokens", help="Token limit of a CoT."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample draw."),
) -> None:
    """Run the whole pipeline on the embedded SmolLM2-135M model: data → CoTs → answers → evaluation → plot."""
    import yaml

    n_samples = old_name(limit, n_samples, "--limit", "--n-samples") or 8
    t0 = time.monotonic()
    check_out(out, folder=True)
    out.mkdir(parents=True, exist_ok=True)
    collection, source = load_demo_data(n_samples, seed)
    note(f"[bold]data[/]: {len(collection)} samples of {source}", highlight=False)
    cfg = GenerateConfig.parse(
        cot_trigger_keys=["kojima-01", "none"], answer_extraction_keys=["auto"], backend="transformers", model="embedded",
        chat=True, max_tokens=max_tokens, answer_max_tokens=16, author="thoughtsource demo",
        backend_options={"batch_size": 2 * n_samples}, db=out / "completions.sqlite",
    )

    with atomic_write(out / "config.yaml") as fh:
        yaml.safe_dump(cfg.model_dump(mode="json"), fh, sort_keys=False)
    report = generate(collection, cfg)  # logs its summary
    if report.errors:
        console.print(f"[yellow]{report.failure_summary()}[/]; evaluating the rest", highlight=False)

    from rich.table import Table

    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..evaluate import evaluate, evaluate_frame, fmt_proportion
    from ..reporting.plots import plot_accuracy, plot_or_warn, shown_value

    result = evaluate_frame(collection)
    evaluate(collection, out_dir=out, warn=False)
    table = Table(title=f"Accuracy on {source} (strict extraction)")
    for col in ("model", "CoT trigger", "answer extraction", "n", "accuracy", "95% CI"):
        table.add_column(col, justify="right" if col in ("n", "accuracy", "95% CI") else "left")
    acc = result.accuracy[result.accuracy["mode"] == "strict"]
    for _, r in acc.iterrows():
        table.add_row(str(r["model"]), shown_value(r["cot_trigger"]), str(r["answer_extraction"]), str(r["n"]),
                      fmt_proportion(r["accuracy"]), f"{fmt_proportion(r['ci_low'])}–{fmt_proportion(r['ci_high'])}")
    stdout.print(table)
    plot_path = plot_or_warn(plot_accuracy, result.accuracy, out / "accuracy.png",
                             title=f"Accuracy per model and CoT trigger on {source}")
    collection.dump(out / "demo.json")
    x = next(s for _, _, s in collection.samples())
    for g in x.generated_cot:
        model = g.model.get("name") if isinstance(g.model, dict) else g.model
        note(f"\n[bold]{model} / {g.cot_trigger}[/] on {x.id}: {g.cot[:300]!r}\n  → answer: {g.answers[0].answer!r}",
                      highlight=False)
    wrote = ", ".join(str(p) for p in (out / "demo.json", plot_path) if p is not None)
    note(f"\nwrote {wrote} in {time.monotonic() - t0:.0f} s", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
