"""``info``, ``validate`` and ``convert``: look at and convert ThoughtSource files.

All three stream: a sample at a time (``io.iter_entries``), memory independent of the number of samples.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer
from rich.table import Table

from ..collection import info_rows
from ..console import note, print_json, stdout
from ..errors import DataError
from ..io import check_out, checked, iter_entries, write_entries

JSON_OPTION = typer.Option(False, "--json", help="Print the result as JSON on stdout instead of a table.")
SKIP_INVALID = typer.Option(False, "--skip-invalid", help="Go on past a malformed sample (skipped, and counted at the "
                                                          "end) instead of stopping at it.")


class Skipped:
    """The malformed records a command went past (``--skip-invalid``): how many, and the first one's error."""

    def __init__(self) -> None:
        self.count = 0
        self.first: DataError | None = None

    def __call__(self, error: DataError) -> None:
        self.count += 1
        self.first = self.first or error

    def report(self) -> None:
        if self.count:
            note(f"skipped {self.count} invalid sample(s); the first: {self.first}")


class Format(str, Enum):
    parquet = "parquet"
    jsonl = "jsonl"
    thoughtsource_json = "thoughtsource-json"


def info(
    file: Path = typer.Argument(..., help="ThoughtSource JSON, JSONL or Parquet (file or folder)."),
    as_json: bool = JSON_OPTION,
    skip_invalid: bool = SKIP_INVALID,
) -> None:
    """Datasets × splits with sample counts, answer types, generated CoTs and annotations."""
    skipped = Skipped()
    rows = info_rows(checked(iter_entries(file, on_invalid=skipped if skip_invalid else None), path=str(file)))
    skipped.report()
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
    file: Path = typer.Argument(..., help="ThoughtSource JSON, JSONL or Parquet to check strictly."),
    as_json: bool = typer.Option(False, "--json", help="The verdict as JSON on stdout: valid, samples, problems "
                                                      "(exit 1 when not valid, as without --json)."),
) -> None:
    """Strict check: structure and per-answer-type semantics; lists every violation."""
    try:
        samples = sum(e.sample is not None for e in checked(iter_entries(file), path=str(file), validate=True))
    except DataError as e:
        if not as_json:
            raise
        print_json({"file": str(file), "valid": False, "samples": None, "error": e.message, "problems": e.problems})
        raise typer.Exit(1) from None
    if as_json:
        print_json({"file": str(file), "valid": True, "samples": samples, "error": None, "problems": []})
        return
    stdout.print(f"[green]ok[/]: {file}: {samples} samples, no schema violations", highlight=False)


def convert(
    file: Path = typer.Argument(..., help="Input: ThoughtSource JSON, JSONL or Parquet."),
    out: Path = typer.Argument(..., help="Output file (json/jsonl) or folder (parquet)."),
    to: Format = typer.Option(..., "--to", help="Output format."),
    skip_invalid: bool = SKIP_INVALID,
) -> None:
    """Convert between ThoughtSource JSON, JSONL and Parquet (written atomically)."""
    check_out(out, folder=to is Format.parquet)
    skipped = Skipped()
    entries = checked(iter_entries(file, on_invalid=skipped if skip_invalid else None), path=str(file))
    fmt = {Format.parquet: "parquet", Format.jsonl: "jsonl", Format.thoughtsource_json: "json"}[to]
    n, written = write_entries(entries, out, fmt)
    skipped.report()
    if to is Format.parquet:
        note(f"wrote {len(written)} Parquet file(s) under {out}")
    else:
        note(f"wrote {n} samples to {out}")


def register(app: typer.Typer) -> None:
    app.command()(info)
    app.command()(validate)
    app.command()(convert)
