"""``runs``: compare two runs, merge or evaluate a folder of runs, export prompts, length outliers, best cells.

Results (tables, the comparison) go to stdout (``typer.echo``); notes about files written to ``console``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..collection import Collection
from ..config import read_yaml_mapping
from ..console import console, print_json, stdout
from ..io import FileSamples, atomic_write, check_out
from .evaluate import ModeOption, accuracy_table

if TYPE_CHECKING:
    from ..answers import Mode

app = typer.Typer(help="Work with several runs: compare, merge, evaluate a folder, prompts, outliers.", no_args_is_help=True)


def _select(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected KEY=VALUE, got {p!r}")
        out[key] = value
    return out


@app.command()
def compare(
    a: Path = typer.Argument(..., help="Run A (ThoughtSource JSON, JSONL or Parquet)."),
    b: Path = typer.Argument(..., help="Run B."),
    select_a: list[str] | None = typer.Option(None, "--select-a", help="KEY=VALUE filter of A's answers (e.g. cot_trigger=kojima-01)."),
    select_b: list[str] | None = typer.Option(None, "--select-b", help="KEY=VALUE filter of B's answers."),
    flexible: bool = typer.Option(False, "--flexible", help="Flexible answer extraction (default strict)."),
    out: Path | None = typer.Option(None, "--out", help="Write every compared pair as CSV."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout: the counts and every flipped pair."),
) -> None:
    """Which samples flipped between two runs: fixed (wrong → right) and broken (right → wrong)."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..reporting.runs import compare_runs

    if out is not None:
        check_out(out)
    result = compare_runs(a, b, mode="flexible" if flexible else "strict", select_a=_select(select_a), select_b=_select(select_b))
    counts = result.counts()
    if out is not None:
        with atomic_write(out) as fh:
            fh.write(result.table.to_csv(index=False))
    if as_json:
        print_json({"pairs": len(result.table), "fixed": counts.get("fixed", 0), "broken": counts.get("broken", 0),
                    "same": counts.get("same", 0), "only_a": result.only_a, "only_b": result.only_b, "note": result.hint(),
                    "flipped": result.flipped().to_dict("records")})
        return
    typer.echo(f"{len(result.table)} pairs: {counts.get('fixed', 0)} fixed, {counts.get('broken', 0)} broken, "
               f"{counts.get('same', 0)} same; {result.only_a} only in A, {result.only_b} only in B")
    hint = result.hint()
    if hint:
        console.print(f"[yellow]note[/]: {hint}", highlight=False, soft_wrap=True)
    for row in result.flipped().itertuples():
        typer.echo(f"  {row.change:6} {row.dataset}/{row.split}/{row.sample_id}: {row.pred_a} → {row.pred_b}")


@app.command()
def merge(
    paths: list[Path] = typer.Argument(..., help="ThoughtSource files and/or folders (every file matching --pattern)."),
    out: Path = typer.Option(..., "--out", help="Merged file (.json or .jsonl)."),
    pattern: str = typer.Option("*.json", "--pattern", help="Which files of a folder."),
) -> None:
    """Merge files (every file of a folder) into one (CoTs of the same sample combined; conflicts listed, nothing overwritten).

    The files are read a sample at a time into an on-disk index next to --out (as much free disk as the output).
    """
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..reporting.runs import merge_files

    check_out(out)
    result = merge_files(paths, out, pattern, fmt="jsonl" if out.suffix == ".jsonl" else "json")
    console.print(f"merged {len(result.files)} files: {result.samples} samples, {len(result.conflicts)} conflicts → {out}",
                  highlight=False)


@app.command("evaluate")
def evaluate_(
    paths: list[Path] = typer.Argument(..., help="ThoughtSource files and/or folders (every file matching --pattern)."),
    pattern: str = typer.Option("*.json", "--pattern", help="Which files of a folder."),
    mode: ModeOption = typer.Option(ModeOption.strict, "--mode", help="Answer extraction mode, as evaluate's --mode."),
    flexible: bool = typer.Option(False, "--flexible", hidden=True, help="Same as --mode flexible (kept for scripts)."),
    out: Path | None = typer.Option(None, "--out", help="Write the table as CSV."),
    as_json: bool = typer.Option(False, "--json", help="The table as JSON records on stdout."),
) -> None:
    """Accuracy of every file (every file of a folder), one table: evaluate's columns, with a mean-over-datasets row."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..reporting.runs import evaluate_folder

    if out is not None:
        check_out(out)
    m = "flexible" if flexible else mode.value
    table = evaluate_folder(paths, pattern, mode=m)  # type: ignore[arg-type]
    if as_json:
        print_json(table.to_dict("records"))
    elif table.empty:
        typer.echo("no generated answers to evaluate")
    else:
        stdout.print(accuracy_table(table, f"accuracy ({m}) — {len(table['file'].unique())} file(s)", keys=("file",)))
    if out is not None:
        with atomic_write(out) as fh:
            fh.write(table.to_csv(index=False))


@app.command()
def prompts(
    file: Path = typer.Argument(..., help="A ThoughtSource file with generated CoTs."),
    out: Path = typer.Option(..., "--out", help="JSON lines: one prompt per line."),
) -> None:
    """Export the full text of every CoT and answer-extraction prompt (rebuilt from templates and fragment ids)."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..reporting.runs import export_prompts

    check_out(out)
    console.print(f"wrote {export_prompts(file, out)} prompts to {out}", highlight=False)


@app.command()
def outliers(
    file: Path = typer.Argument(..., help="A ThoughtSource file."),
    reference: bool = typer.Option(False, "--reference", help="Reference CoTs instead of generated ones."),
    k: float = typer.Option(1.5, "--k", help="Outside [Q1 - k·IQR, Q3 + k·IQR] of the group."),
    limit: int = typer.Option(20, "--limit", help="Show this many."),
    as_json: bool = typer.Option(False, "--json", help="Every outlier as JSON records on stdout."),
) -> None:
    """CoTs of outlying length (empty, truncated, run-away) per dataset and model/prompt."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..reporting.runs import length_outliers

    table = length_outliers(file, which="reference" if reference else "generated", k=k)
    if as_json:
        print_json(table.to_dict("records"))
        return
    typer.echo(f"{len(table)} outliers")
    if len(table):
        typer.echo(table.head(limit).to_string(index=False))


@app.command()
def best(
    file: Path = typer.Argument(..., help="A ThoughtSource file with answers."),
    html: bool = typer.Option(False, "--html", help="HTML instead of Markdown."),
    flexible: bool = typer.Option(False, "--flexible", help="Flexible answer extraction (default strict)."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout: accuracy per dataset and column, and the best cells."),
) -> None:
    """Accuracy per dataset × model/prompt with the best cell of each dataset marked."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..evaluate import evaluate_frame
    from ..reporting.runs import accuracy_pivot, best_cells, highlight_best

    mode: Mode = "flexible" if flexible else "strict"  # the file read a sample at a time, scored without a per-answer table
    table = accuracy_pivot(evaluate_frame(FileSamples(Path(file)), modes=(mode,), mode=mode, keep_answers=False).accuracy)
    if as_json:
        best = sorted(best_cells(table), key=str)
        print_json({"mode": mode, "accuracy": {str(r): {str(c): table.at[r, c] for c in table.columns} for r in table.index},
                    "best": [{"dataset": str(r), "column": str(c)} for r, c in best]})
        return
    typer.echo(highlight_best(table, style="html" if html else "markdown"))


@app.command()
def chain(
    kind: str = typer.Argument(..., help="generate-extract, generate, extract or reflect."),
    file: Path = typer.Argument(..., help="A ThoughtSource file (for extract/reflect: with generated CoTs)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output ThoughtSource JSON (written atomically)."),
    config: Path | None = typer.Option(None, "--config", help="YAML file of generate-config fields (ours or the published library's)."),
    backend: str | None = typer.Option(None, "--backend", help="Backend name (mock, openai, transformers)."),
    model: str | None = typer.Option(None, "--model", help="Model name or path."),
    author: str | None = typer.Option(None, "--target-author", help="Only CoTs of this author (extract/reflect)."),
    db: Path | None = typer.Option(None, "--db", help="Completion store."),
) -> None:
    """Run a flexible chain or the self-reflection stage; results are stored as CoTs / answers of the file."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..generation import chains

    runs = {"generate-extract": chains.self_generate_extract, "generate": chains.self_generate,
            "extract": chains.self_extract, "reflect": chains.self_reflect}
    if kind not in runs:
        raise typer.BadParameter(f"unknown chain {kind!r}; one of {', '.join(runs)}")
    check_out(out)
    cfg = read_yaml_mapping(config, "a mapping of generate-config fields") if config else {}
    cfg.update({k: v for k, v in {"backend": backend, "model": model}.items() if v is not None})
    kwargs: dict[str, Any] = {"target": chains.Target(author=author)} if kind in ("extract", "reflect") else {}
    c = Collection.load(file)
    report = runs[kind](c, cfg, store=str(db) if db else None, **kwargs)
    c.dump(out)
    console.print(f"{report.summary()} → {out}", highlight=False)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="runs")
