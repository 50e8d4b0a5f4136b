"""``store``: where the completion store is, what it holds, and clearing it (in the manner of ``llm logs path``).

Every completion ``generate`` (and STaR, chains, the demo) receives is committed to one SQLite file, by default
``$THOUGHTSOURCE_HOME/completions.sqlite``; ``--db`` names another (as ``generate --db`` does).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..console import note, print_json, stdout
from ..errors import StoreError
from ..store import CompletionStore, default_path

app = typer.Typer(help="The completion store: path, ls, stats, clear.", no_args_is_help=True)

DB = typer.Option(None, "--db", help="A store file \\[default: $THOUGHTSOURCE_HOME/completions.sqlite].")


def _path(db: Path | None) -> Path:
    return db if db is not None else default_path()


def _open(db: Path | None) -> CompletionStore:
    """The store, which must exist: reading or clearing a store that is not there creates nothing."""
    path = _path(db)
    if not path.is_file():
        raise StoreError(f"{path}: no completion store there (nothing generated yet, or a wrong --db)")
    return CompletionStore(path)


@app.command()
def path(db: Path | None = DB) -> None:
    """Print the path of the completion store (it may not exist yet)."""
    stdout.print(str(_path(db)), highlight=False, soft_wrap=True)


@app.command("ls")
def ls(
    db: Path | None = DB,
    count: int = typer.Option(10, "--count", "-n", min=1, help="How many, newest first."),
    as_json: bool = typer.Option(False, "--json", help="JSON on stdout (full texts)."),
) -> None:
    """The completions stored last: time, backend, model, tokens, prompt and completion."""
    with _open(db) as store:
        rows = store.recent(count)
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(title=f"last {len(rows)} completions — {_path(db)}")
    for col in ("created_at", "backend", "model", "tokens", "prompt", "completion"):
        table.add_column(col, overflow="fold", justify="right" if col == "tokens" else "left")
    for r in rows:
        table.add_row(r["created_at"], r["backend"], str(r["model"]), f"{r['prompt_tokens']}+{r['completion_tokens']}",
                      r["prompt"][-200:], r["text"][:200])
    stdout.print(table)


@app.command()
def stats(db: Path | None = DB, as_json: bool = typer.Option(False, "--json", help="JSON on stdout.")) -> None:
    """How many completions and tokens, per backend and model, and the file's size."""
    with _open(db) as store:
        total, per_model = store.stats(), store.stats_by_model()
    path_ = _path(db)
    size = sum(p.stat().st_size for p in (path_, Path(f"{path_}-wal")) if p.exists())
    doc = {"path": str(path_), "bytes": size, **total, "models": per_model}
    if as_json:
        print_json(doc)
        return
    from rich.table import Table

    table = Table(title=f"{path_} — {total['completions']:,} completions, {size / 1e6:.1f} MB")
    for col in ("backend", "model", "completions", "prompt tokens", "completion tokens", "last stored"):
        table.add_column(col, justify="right" if "tokens" in col or col == "completions" else "left", overflow="fold")
    for m in per_model:
        table.add_row(m["backend"], str(m["model"]), f"{m['completions']:,}", f"{m['prompt_tokens']:,}",
                      f"{m['completion_tokens']:,}", m["last"])
    stdout.print(table)


@app.command()
def clear(db: Path | None = DB, yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask.")) -> None:
    """Delete every stored completion (the next generate asks the model again)."""
    import sys

    if not yes and not sys.stdin.isatty():
        raise typer.BadParameter("not on a terminal: pass --yes to delete without asking", param_hint="'--yes'")
    with _open(db) as store:
        n = len(store)
        if not yes and not typer.confirm(f"delete {n:,} completions from {store.path}?", err=True):
            raise typer.Exit(1)
        store.clear()
    note(f"deleted {n:,} completions from {_path(db)}", highlight=False)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="store")
