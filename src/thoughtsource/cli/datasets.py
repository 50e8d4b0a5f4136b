"""``thoughtsource datasets list|download|export|subset``: the registered source datasets."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..collection import Collection
from ..console import note, print_json, stdout
from ..errors import DataError
from ..io import atomic_write, check_out, to_arrow
from .data import JSON_OPTION, Format
from .generate import old_name

app = typer.Typer(
    help="The 14 ThoughtSource source datasets: list, download raw files, export, build subsets.", no_args_is_help=True
)

DATA_DIR = typer.Option(None, "--data-dir", help="Folder with raw files (default: $THOUGHTSOURCE_DATA or the user cache).")


@app.command("list")
def list_(data_dir: Path | None = DATA_DIR, as_json: bool = JSON_OPTION) -> None:
    """Name, answer type, splits with counts, license and whether the raw files are present."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from .. import datasets

    table = Table(title="datasets")
    for col in ("name", "type", "splits (samples)", "license", "raw files present"):
        table.add_column(col, overflow="fold")
    rows: list[dict[str, object]] = []
    for name in datasets.names():
        spec = datasets.spec(name)
        splits = ", ".join(f"{s} ({spec.counts[s]:,})" if s in spec.counts else s for s in spec.splits)
        required = [s for s in spec.sources if not s.optional]
        missing = [s.name for s in required if datasets.locate(s, data_dir) is None]
        rows.append({"name": name, "answer_type": spec.answer_type, "splits": {s: spec.counts.get(s) for s in spec.splits},
                     "license": spec.license, "raw_files": len(required), "raw_files_missing": missing})
        if not missing:
            present = f"[green]all {len(required)}[/]"
        else:
            present = f"[yellow]{len(required) - len(missing)}/{len(required)}[/] (missing: {', '.join(missing)})"
        table.add_row(name, spec.answer_type, splits, spec.license, present)
    if as_json:
        print_json(rows)
    else:
        stdout.print(table)


@app.command()
def download(
    name: str = typer.Argument(..., help="A dataset name, or 'all'."),
    data_dir: Path | None = DATA_DIR,
) -> None:
    """Download (and verify) the raw files of a dataset; files already present are only verified."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from .. import datasets

    names = datasets.names() if name == "all" else [name]
    failed: list[str] = []
    for n in names:
        spec = datasets.spec(n)
        try:
            files = datasets.resolve(spec, spec.splits, data_dir)
        except DataError as e:
            if name != "all":
                raise
            failed.append(str(e))
            continue
        note(f"[green]ok[/] {n}: {len(files)} file(s) verified")
        for path, _ in files.values():
            note(f"   {path}", highlight=False)
    if failed:
        raise DataError(f"{len(failed)} dataset(s) incomplete", problems=failed)


@app.command()
def export(
    name: str = typer.Argument(..., help="A dataset name."),
    format: Format | None = typer.Option(None, "--format", help="Output format \\[default: by --out: .json ThoughtSource "
                                                                "JSON, .jsonl JSONL, else a Parquet folder]."),
    out: Path = typer.Option(..., "--out", help="Output: a .json or .jsonl file, or a folder (Parquet: one file per split "
                                                "in it; --format thoughtsource-json/jsonl: NAME.json/.jsonl in it)."),
    splits: list[str] | None = typer.Option(None, "--split", help="Split(s) to export (default: all)."),
    data_dir: Path | None = DATA_DIR,
) -> None:
    """Convert a dataset from its raw files and write it as Parquet, JSONL or ThoughtSource JSON.

    ``--out`` is what it is for every command: the file written, or the folder that holds what is written
    (``--out gsm8k/`` gives gsm8k/test.parquet, ..., never gsm8k/gsm8k/).
    """
    fmt = format or _format_of(out)
    check_out(out, folder=out.suffix not in (".json", ".jsonl"))
    c = Collection.from_datasets([name], splits=splits or None, data_dir=data_dir)
    written = _write(c, fmt, out, None if out.suffix in (".json", ".jsonl") else name, flat=True)
    note(f"wrote {len(c)} samples of {name} to {', '.join(str(p) for p in written)}", highlight=False)


@app.command()
def subset(
    limit: int | None = typer.Option(None, "--limit", min=1, help="How many samples per dataset \\[default: 100]."),
    n: int | None = typer.Option(None, "--n", min=1, hidden=True, help="Old name of --limit."),
    seed: int = typer.Option(0, "--seed", help="Random seed (the same seed gives the same ids)."),
    out: Path = typer.Option(..., "--out", help="Output file: .json (ThoughtSource JSON), .jsonl, or a folder for Parquet."),
    names: list[str] | None = typer.Option(None, "--dataset", "-d", help="Dataset(s) (default: all with raw files present)."),
    split: str | None = typer.Option(None, "--split", help="Sample this split (default: test, else validation, else train)."),
    thoughtsource: int | None = typer.Option(
        None, "--thoughtsource", help="ThoughtSource-100 or -33 by the library's id lists (100 or 33) instead of a random draw."),
    data_dir: Path | None = DATA_DIR,
) -> None:
    """A ThoughtSource-100-style subset: a fixed-seed sample of N per dataset with all attached CoTs."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..datasets.released import load_thoughtsource_subset
    from ..datasets.subset import build_subset

    n = old_name(limit, n, "--limit", "--n") or 100
    check_out(out, folder=_format_of(out) is Format.parquet)

    if thoughtsource is not None:
        data, report = load_thoughtsource_subset(thoughtsource, data_dir)
        note(report.summary(), highlight=False)
    else:
        data = build_subset(names or None, n=n, seed=seed, split=split, data_dir=data_dir)
    c = Collection(data=data)
    written = _write(c, _format_of(out), out, None)
    per = ", ".join(f"{d}/{s}: {len(xs)}" for d, splits in c for s, xs in splits.items())
    note(f"wrote {len(c)} samples ({per}) to {', '.join(str(p) for p in written)}", highlight=False)


@app.command()
def released(
    name: str = typer.Argument(..., help="A released collection (see released-list) or the URL of a ThoughtSource JSON file."),
    sha256: str | None = typer.Option(None, "--sha256", help="Checksum of the file at URL (required for a URL)."),
    out: Path | None = typer.Option(None, "--out", help="Write it here (.json, .jsonl, or a folder for Parquet)."),
    data_dir: Path | None = DATA_DIR,
) -> None:
    """Fetch and verify a released ThoughtSource-format CoT collection (by name, or by URL + sha256)."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..datasets.released import load_released

    if out is not None:
        check_out(out, folder=_format_of(out) is Format.parquet)
    c = Collection(data=load_released(name, sha256=sha256, data_dir=data_dir))
    cots = sum(len(x.generated_cot) for _, _, x in c.samples())
    typer.echo(f"{name}: {len(c)} samples, {cots} generated CoTs ({c})")
    if out is not None:
        note(f"wrote {', '.join(str(p) for p in _write(c, _format_of(out), out, None))}", highlight=False)


@app.command("released-list")
def released_list() -> None:
    """The released collections known by name, with their URLs."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..datasets.released import RELEASED

    for key, src in RELEASED.items():
        typer.echo(f"{key}  {src.url}  sha256 {src.sha256}")


def _format_of(out: Path) -> Format:
    """What ``--out`` names: .json a ThoughtSource JSON file, .jsonl a JSONL file, anything else a Parquet folder."""
    return Format.jsonl if out.suffix == ".jsonl" else Format.thoughtsource_json if out.suffix == ".json" else Format.parquet


def _write(c, fmt: Format, out: Path, name: str | None, flat: bool = False) -> list[Path]:
    """Write a collection; ``name`` set: ``out`` is a folder and the file is named after the dataset.  ``flat``: Parquet
    files of one dataset go straight into ``out`` (``out/<split>.parquet``; their rows name the dataset)."""
    if fmt is Format.parquet:
        if flat and len(c.data) == 1:
            import pyarrow.parquet as pq

            written = []
            for d, splits in c.data.items():
                for s, xs in splits.items():
                    path = out / f"{s}.parquet"
                    with atomic_write(path, "wb") as fh:
                        pq.write_table(to_arrow(xs, d, s), fh)
                    written.append(path)
            return written
        return c.to_parquet(out)
    path = out / f"{name}.{'jsonl' if fmt is Format.jsonl else 'json'}" if name else out
    if fmt is Format.jsonl:
        c.to_jsonl(path)
    else:
        c.dump(path)
    return [path]


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="datasets")
