"""``info``, ``validate`` and ``convert``: look at and convert ThoughtSource files."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from rich.table import Table

from ..console import note, print_json, stdout

JSON_OPTION = typer.Option(False, "--json", help="Print the result as JSON on stdout instead of a table.")


class Format(str, Enum):
    parquet = "parquet"
    jsonl = "jsonl"
    thoughtsource_json = "thoughtsource-json"


def info(
    file: Path = typer.Argument(..., help="ThoughtSource JSON, JSONL or Parquet (file or folder)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Datasets × splits with sample counts, answer types, generated CoTs and annotations."""
    from ..collection import Collection

    rows = Collection.load(file).info()
    if as_json:
        print_json({"file": str(file), "splits": rows})
        return
    table = Table(title=str(file))
    for col in ("dataset", "split", "samples", "types", "reference_cots", "generated_cots", "annotations"):
        table.add_column(
            col.replace("_", " "),
            justify="left" if col in ("dataset", "split", "types") else "right",
            no_wrap=col in ("dataset", "split"),
        )
    for r in rows:
        table.add_row(
            *(str(r[k]) for k in ("dataset", "split", "samples", "types", "reference_cots", "generated_cots", "annotations"))
        )
    stdout.print(table)


def validate(
    file: Path = typer.Argument(..., help="ThoughtSource JSON file to check strictly."),
    as_json: bool = typer.Option(False, "--json", help="The verdict as JSON on stdout: valid, samples, problems "
                                                      "(exit 1 when not valid, as without --json)."),
) -> None:
    """Strict check: structure and per-answer-type semantics; lists every violation."""
    from ..collection import Collection
    from ..errors import DataError

    try:
        c = Collection.load(file, validate=True)
    except DataError as e:
        if not as_json:
            raise
        print_json({"file": str(file), "valid": False, "samples": None, "error": e.message, "problems": e.problems})
        raise typer.Exit(1) from None
    if as_json:
        print_json({"file": str(file), "valid": True, "samples": len(c), "error": None, "problems": []})
        return
    stdout.print(f"[green]ok[/]: {file}: {len(c)} samples, no schema violations", highlight=False)


def convert(
    file: Path = typer.Argument(..., help="Input: ThoughtSource JSON, JSONL or Parquet."),
    out: Path = typer.Argument(..., help="Output file (json/jsonl) or folder (parquet)."),
    to: Format = typer.Option(..., "--to", help="Output format."),
) -> None:
    """Convert between ThoughtSource JSON, JSONL and Parquet (written atomically)."""
    from ..collection import Collection
    from ..io import check_out

    check_out(out, folder=to is Format.parquet)
    c = Collection.load(file)
    if to is Format.parquet:
        written = c.to_parquet(out)
        note(f"wrote {len(written)} Parquet file(s) under {out}")
    elif to is Format.jsonl:
        c.to_jsonl(out)
        note(f"wrote {len(c)} samples to {out}")
    else:
        c.dump(out)
        note(f"wrote {len(c)} samples to {out}")


def register(app: typer.Typer) -> None:
    app.command()(info)
    app.command()(validate)
    app.command()(convert)
