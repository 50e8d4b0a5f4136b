"""``serve``, ``users add/list``, ``annotations export`` and ``agreement``: the annotator's commands."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path

import typer
from rich.table import Table

from ..console import console

DB_HELP = "Annotation database (SQLite; default: annotations.sqlite in the thoughtsource home folder)."


def _db_path(db: Path | None) -> Path:
    from .. import paths

    return db if db is not None else paths.home() / "annotations.sqlite"


def serve(
    files: list[Path] = typer.Argument(..., help="ThoughtSource JSON/JSONL/Parquet files; merged and served together."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    labels: str | None = typer.Option(None, help="Comma-separated label set (default: the four ThoughtSource labels)."),
    page_size: int = typer.Option(25, help="Samples per list page."),
    secure_cookies: bool = typer.Option(False, help="Mark cookies Secure (when a TLS proxy is in front)."),
) -> None:
    """Serve the viewer and annotator (log in with an account made by `thoughtsource users add`)."""
    import uvicorn

    from ..web.app import ServeSettings, create_app
    from ..web.db import AnnotationDB

    settings = ServeSettings(files=files, db=_db_path(db), page_size=page_size, secure_cookies=secure_cookies,
                             **({"labels": [x.strip() for x in labels.split(",") if x.strip()]} if labels else {}))
    app = create_app(settings)
    from ..web.similarity import pairwise

    pairwise(["Warm up scikit-learn.", "Warm up scikit-learn now."])  # its first import takes seconds: not on a request
    if not AnnotationDB(settings.db).users():
        console.print(f"[yellow]no users yet[/]: create one with `thoughtsource users add NAME --role admin --db {settings.db}`")
    if host not in ("127.0.0.1", "localhost", "::1") and not secure_cookies:
        console.print("[yellow]warning[/]: listening beyond localhost without --secure-cookies; put it behind HTTPS")
    console.print(f"serving {len(app.state.data.items)} samples on http://{host}:{port}  (db: {settings.db})")
    uvicorn.run(app, host=host, port=port, log_level="warning")


class Role(str, Enum):
    annotator = "annotator"
    admin = "admin"


users_app = typer.Typer(help="Annotator accounts.", no_args_is_help=True)


@users_app.command("add")
def users_add(
    name: str = typer.Argument(..., help="User name."),
    role: Role = typer.Option(Role.annotator, "--role", help="annotator or admin."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from stdin (for scripts)."),
) -> None:
    """Create an account; the password is asked for (or read from stdin) and stored as an argon2 hash."""
    from ..errors import AuthError
    from ..web.auth import hash_password
    from ..web.db import AnnotationDB

    if not name.strip() or len(name) > 100:
        raise AuthError("a user name has 1 to 100 characters")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    user = AnnotationDB(_db_path(db)).add_user(name, hash_password(password), role.value)
    console.print(f"added {user.role} [bold]{user.name}[/] to {_db_path(db)}")


@users_app.command("passwd")
def users_passwd(
    name: str = typer.Argument(..., help="User name."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from stdin (for scripts)."),
) -> None:
    """Set a new password; ends the user's open sessions."""
    from ..web.auth import hash_password
    from ..web.db import AnnotationDB

    password = sys.stdin.readline().rstrip("\n") if password_stdin else typer.prompt("Password", hide_input=True,
                                                                                     confirmation_prompt=True)
    AnnotationDB(_db_path(db)).set_password(name, hash_password(password))
    console.print(f"new password set for [bold]{name}[/]; their sessions were ended")


@users_app.command("list")
def users_list(db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """List the accounts and their roles."""
    from ..web.db import AnnotationDB

    table = Table(title=str(_db_path(db)))
    table.add_column("user")
    table.add_column("role")
    for u in AnnotationDB(_db_path(db)).users():
        table.add_row(u.name, u.role)
    console.print(table)


class ExportFormat(str, Enum):
    thoughtsource_json = "thoughtsource-json"
    csv = "csv"


annotations_app = typer.Typer(help="Annotations stored by the annotator.", no_args_is_help=True)


@annotations_app.command("export")
def annotations_export(
    files: list[Path] = typer.Argument(..., help="The ThoughtSource files that were served (same order)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output file."),
    format: ExportFormat = typer.Option(ExportFormat.thoughtsource_json, "--format", help="thoughtsource-json or csv."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    annotator: str | None = typer.Option(None, help="Only this annotator's annotations."),
) -> None:
    """Write the annotations into generated_cot.annotations (author, date, key, value), or as CSV; atomically."""
    from ..web.data import ServedData
    from ..web.db import AnnotationDB

    data = ServedData.load(files)
    rows = AnnotationDB(_db_path(db)).annotations(annotator=annotator)
    if format is ExportFormat.csv:
        n = data.export_csv(rows, out)
    else:
        n = data.export_json(rows, out)
    console.print(f"wrote {n} annotation(s) to {out}")


def agreement(
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    labels: str | None = typer.Option(None, help="Comma-separated labels to report first (others found are added)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON to stdout instead of a table."),
) -> None:
    """Krippendorff's alpha per label and pairwise Cohen's kappa, over items labelled by >= 2 annotators."""
    from ..web.agreement import agreement as compute
    from ..web.app import DEFAULT_LABELS
    from ..web.db import AnnotationDB

    wanted = [x.strip() for x in labels.split(",") if x.strip()] if labels else DEFAULT_LABELS
    results = compute(AnnotationDB(_db_path(db)).annotations(), wanted)
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in results], indent=2))
        return
    table = Table(title="inter-annotator agreement")
    for col in ("label", "units", "alpha", "Cohen's kappa per pair (units)"):
        table.add_column(col, justify="right" if col in ("units", "alpha") else "left")

    def fmt(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    for r in results:
        table.add_row(r.label, str(r.units), fmt(r.alpha), ", ".join(f"{k.a}-{k.b} ({k.units}): {fmt(k.kappa)}" for k in r.kappas))
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.add_typer(users_app, name="users")
    app.add_typer(annotations_app, name="annotations")
    app.command()(agreement)
