"""``training-data``: collections, STaR runs and annotation databases as TRL / PRM800K datasets."""

from __future__ import annotations

import shlex
from enum import Enum
from pathlib import Path

import typer

from ..console import note


class TrainingFormat(str, Enum):
    sft = "sft"
    messages = "messages"
    preference = "preference"
    stepwise = "stepwise"
    prm800k = "prm800k"


def training_data(
    format: TrainingFormat = typer.Argument(..., help="sft, messages, preference, stepwise or prm800k."),
    sources: list[Path] = typer.Argument(
        ..., help="ThoughtSource files, STaR run folders, and/or one annotation database (SQLite) with the files it annotated."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (a Parquet dataset with its README.md card)."),
    model: list[str] = typer.Option([], "--model", help="Only CoTs of this model (repeatable)."),
    all_cots: bool = typer.Option(False, "--all-cots", help="sft/messages: every CoT, not only the correct ones."),
    max_pairs: int | None = typer.Option(
        None, "--max-pairs-per-prompt", min=1, help="preference: at most this many correct × incorrect pairs per prompt."
    ),
    star_iteration: str | None = typer.Option(
        None, "--star-iteration", help="STaR runs: 'last', 'all' or N (default: last for sft/messages, all for preference)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing output folder."),
    include_eval_splits: bool = typer.Option(
        False, "--include-eval-splits", help="Also the CoTs of test and validation samples (left out by default: training "
        "on them contaminates evaluations on those splits)."
    ),
) -> None:
    """Training data for TRL (SFT, preference pairs, stepwise supervision) or PRM800K, with a dataset card.

    sft / messages: the correct CoTs (STaR: the kept rationales, iter_N/train.jsonl); preference: correct against
    incorrect CoTs of one model for the same prompt (STaR: kept against rejected rationales); stepwise / prm800k: the
    annotator's step labels.  CoTs of test and validation samples only with --include-eval-splits.  `datasets.load_dataset(OUT)` reads the folder."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..training_data import export

    options = [
        *(a for m in model for a in ("--model", m)),
        *(["--all-cots"] if all_cots else []),
        *(["--max-pairs-per-prompt", str(max_pairs)] if max_pairs else []),
        *(["--star-iteration", star_iteration] if star_iteration else []),
        *(["--include-eval-splits"] if include_eval_splits else []),
    ]
    command = shlex.join(["thoughtsource", "training-data", format.value, *map(str, sources), "--out", str(out), *options])
    result = export(
        format.value,
        sources,
        out,
        models=model,
        all_cots=all_cots,
        max_pairs_per_prompt=max_pairs,
        star_iteration=star_iteration,
        force=force,
        command=command,
        include_eval_splits=include_eval_splits,
    )
    left = ", ".join(f"{n} {why}" for why, n in result.left_out.items())
    note(f"wrote {result.records} {result.format} record(s) to {result.out}" + (f" (left out: {left})" if left else ""))


def register(app: typer.Typer) -> None:
    app.command("training-data")(training_data)
