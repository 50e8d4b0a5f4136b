"""``serve``, ``users``, ``tasks``, ``tokens``, ``annotations export/import`` and ``agreement``: the annotator's commands."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from .. import paths
from ..collection import Collection
from ..console import console, stdout
from ..errors import AuthError, DataError, StoreError
from ..interrupt import ctrl_c_stops
from ..listen import bind

DB_HELP = "Annotation database (SQLite; default: annotations.sqlite in the thoughtsource home folder)."


def _db_path(db: Path | None) -> Path:
    return db if db is not None else paths.home() / "annotations.sqlite"


def _existing_db(db: Path | None) -> Path:
    """The database of a command that reads or changes what is already there: a mistyped path is an error,
    never a new empty database that reports nothing."""
    path = _db_path(db)
    if not path.is_file():
        raise StoreError(f"{path}: no annotation database here (it is made by `thoughtsource serve` or `users add`; "
                         "check --db)")
    return path


def _settings(cls: Any, **values: Any) -> Any:
    """``cls(**values)``; a value the settings refuse (a threshold above 1, no label, ...) is a usage error naming its
    option, not a pydantic traceback."""
    from pydantic import ValidationError

    try:
        return cls(**values)
    except ValidationError as e:
        err = e.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "files"
        hint = "FILES" if field == "files" else "--" + field.replace("_", "-")
        message = str(err["msg"]).removeprefix("Value error, ")
        raise typer.BadParameter(f"{message} (got {err.get('input')!r})", param_hint=hint) from None


def serve(
    files: list[Path] = typer.Argument(..., help="ThoughtSource JSON/JSONL/Parquet files; merged and served together."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    labels: str | None = typer.Option(None, help="Comma-separated label set (default: the four ThoughtSource labels)."),
    page_size: int = typer.Option(25, help="Samples per list page."),
    secure_cookies: bool = typer.Option(False, help="Mark cookies Secure (when a TLS proxy is in front)."),
    blind: bool = typer.Option(False, help="Blind review: annotators see no model, trigger, correctness or gold answer, "
                                           "CoTs shuffled and renamed with the server's secret."),
    blind_show_gold: bool = typer.Option(False, "--blind-show-gold", help="During blind review, still show the gold answer."),
    allowed_hosts: str | None = typer.Option(
        None, help="Comma-separated host names the server answers to (Host header; '*' any), each a host, optionally "
                   "with a port, never a URL. Default: the --host address, and localhost when that is loopback."),
    similarity_threshold: float | None = typer.Option(None, help="Initial similarity-highlighting threshold."),
    forwarded_allow_ips: str | None = typer.Option(
        None, help="Trust X-Forwarded-For/-Proto only from these proxy addresses (comma-separated, e.g. 127.0.0.1); "
                   "without it the client address is the connection's, whatever the headers say."),
) -> None:
    """Serve the viewer and annotator (log in with an account made by `thoughtsource users add`)."""
    # fastapi (the web extra) and the app, imported when serve runs: `thoughtsource --help` stays fast
    from ..web.app import ServeSettings, create_app, default_allowed_hosts, make_server
    from ..web.db import AnnotationDB

    sock = bind(host, port)  # a port in use is an error before the data is loaded
    extra: dict = {"labels": [x.strip() for x in labels.split(",") if x.strip()]} if labels is not None else {}
    if similarity_threshold is not None:
        extra["similarity_threshold"] = similarity_threshold
    hosts = [x.strip() for x in allowed_hosts.split(",") if x.strip()] if allowed_hosts else default_allowed_hosts(host)
    settings = _settings(ServeSettings, files=files, db=_db_path(db), page_size=page_size, secure_cookies=secure_cookies,
                         blind=blind, blind_show_gold=blind_show_gold, allowed_hosts=hosts, **extra)
    app = create_app(settings)
    # the similarity (scikit-learn) imported when serve runs, not at CLI start
    from ..web.similarity import pairwise

    pairwise(["Warm up scikit-learn.", "Warm up scikit-learn now."])  # its first import takes seconds: not on a request
    if not AnnotationDB(settings.db).users():
        console.print(f"[yellow]no users yet[/]: create one with `thoughtsource users add NAME --role admin --db {settings.db}`")
    if hosts is None:
        console.print("[yellow]warning[/]: any Host header is served; name this server's host names with --allowed-hosts")
    if host not in ("127.0.0.1", "localhost", "::1") and not secure_cookies:
        console.print("[yellow]warning[/]: listening beyond localhost without --secure-cookies; put it behind HTTPS")
    server = make_server(app, forwarded_allow_ips)
    with ctrl_c_stops(server):
        console.print(f"serving {len(app.state.data.items)} samples on http://{host}:{sock.getsockname()[1]}  (db: {settings.db})")
        server.run(sockets=[sock])


class Role(str, Enum):
    viewer = "viewer"
    annotator = "annotator"
    admin = "admin"


def _has_terminal() -> bool:
    return sys.stdin.isatty()


def _read_password(from_stdin: bool) -> str:
    """The password: the first line of stdin with --password-stdin, else asked twice on the terminal.  Without a
    terminal and without --password-stdin it is refused at once (getpass warned and the command exited 130)."""
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif not _has_terminal():
        raise AuthError("no terminal to ask for the password: give it on stdin with --password-stdin "
                        "(e.g. printf '%s\\n' \"$PASSWORD\" | thoughtsource users add NAME --password-stdin)")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise AuthError("the password is empty" + (" (stdin had no line)" if from_stdin else ""))
    return password


users_app = typer.Typer(help="Annotator accounts.", no_args_is_help=True)


@users_app.command("add")
def users_add(
    name: str = typer.Argument(..., help="User name."),
    role: Role = typer.Option(Role.annotator, "--role", help="viewer (read only), annotator or admin."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from stdin (for scripts)."),
) -> None:
    """Create an account; the password is asked for (or read from stdin) and stored as an argon2 hash.

    Names are normalised (surrounding spaces removed, case folded): "Alice " logs in as "alice"."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.auth import hash_password
    from ..web.db import MAX_NAME, AnnotationDB, normalize_name

    if not normalize_name(name) or len(normalize_name(name)) > MAX_NAME:
        raise AuthError(f"a user name has 1 to {MAX_NAME} characters")
    password = _read_password(password_stdin)
    user = AnnotationDB(_db_path(db)).add_user(name, hash_password(password), role.value)
    console.print(f"added {user.role} [bold]{user.name}[/] to {_db_path(db)}")


@users_app.command("passwd")
def users_passwd(
    name: str = typer.Argument(..., help="User name."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from stdin (for scripts)."),
) -> None:
    """Set a new password; ends the user's open sessions."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.auth import hash_password
    from ..web.db import AnnotationDB

    password = _read_password(password_stdin)
    AnnotationDB(_existing_db(db)).set_password(name, hash_password(password))
    console.print(f"new password set for [bold]{name}[/]; their sessions were ended")


@users_app.command("list")
def users_list(db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """List the accounts and their roles."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.db import AnnotationDB

    path = _existing_db(db)
    table = Table(title=str(path))
    table.add_column("user")
    table.add_column("role")
    table.add_column("status")
    for u in AnnotationDB(path).users():
        table.add_row(u.name, u.role, "disabled" if u.disabled else "active")
    stdout.print(table)  # a result: stdout (notes and errors go to stderr)


@users_app.command("role")
def users_role(name: str = typer.Argument(..., help="User name."), role: Role = typer.Argument(..., help="viewer, annotator or admin."),
               db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Change a user's role (ends their sessions)."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.db import AnnotationDB

    AnnotationDB(_existing_db(db)).set_role(name, role.value)
    console.print(f"[bold]{name}[/] is now {role.value}")


@users_app.command("disable")
def users_disable(name: str = typer.Argument(..., help="User name."), db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Disable an account: its sessions end, it cannot log in, its API tokens stop working; annotations stay."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.db import AnnotationDB

    AnnotationDB(_existing_db(db)).set_disabled(name, True)
    console.print(f"disabled [bold]{name}[/]")


@users_app.command("enable")
def users_enable(name: str = typer.Argument(..., help="User name."), db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Enable a disabled account."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.db import AnnotationDB

    AnnotationDB(_existing_db(db)).set_disabled(name, False)
    console.print(f"enabled [bold]{name}[/]")


@users_app.command("remove")
def users_remove(name: str = typer.Argument(..., help="User name."), db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Remove an account: its sessions, tokens and assignments are deleted; its annotations stay, and its name and id
    are never given to a new account (the annotations carry the name)."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.db import AnnotationDB

    AnnotationDB(_existing_db(db)).remove_user(name)
    console.print(f"removed [bold]{name}[/] (their annotations stay)")


tasks_app = typer.Typer(help="Assign samples to annotators.", no_args_is_help=True)


@tasks_app.command("assign")
def tasks_assign(
    files: list[Path] = typer.Argument(..., help="The ThoughtSource files that are served."),
    overlap: int = typer.Option(1, "--overlap", "-k", help="Annotators per sample (K)."),
    annotators: str | None = typer.Option(None, help="Comma-separated names (default: every active annotator)."),
    seed: int = typer.Option(0, help="Seed of the sample order."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Spread the samples over annotators, each sample to K of them, loads within one sample of each other.

    Replaces earlier assignments.  Each annotator's queue is in a seeded random order; "Next for me" walks it."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.assign import assign
    from ..web.data import ServedData
    from ..web.db import AnnotationDB, normalize_name

    store = AnnotationDB(_db_path(db))
    if annotators:
        names = [normalize_name(x) for x in annotators.split(",") if x.strip()]
        missing = [n for n in names if store.user(n) is None]
        if missing:
            raise typer.BadParameter(f"no such user(s): {', '.join(missing)}", param_hint="--annotators")
    else:
        names = [u.name for u in store.users() if u.role == "annotator" and not u.disabled]
    if not 1 <= overlap <= len(names):
        raise typer.BadParameter(f"must be between 1 and the number of annotators ({len(names)})", param_hint="--overlap")
    data = ServedData.load(files)
    plan = assign([it.key for it in data.items], names, overlap, seed)
    store.replace_assignments(plan)
    per: dict[str, int] = {}
    for *_, a in plan:
        per[a] = per.get(a, 0) + 1
    console.print(f"assigned {len(data.items)} samples x {overlap} = {len(plan)} tasks: "
                  + ", ".join(f"{a} {n}" for a, n in sorted(per.items())))


@tasks_app.command("progress")
def tasks_progress(files: list[Path] = typer.Argument(..., help="The ThoughtSource files that are served."),
                   db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Per annotator: assigned samples in which every CoT has their annotation."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.data import ServedData, sample_done
    from ..web.db import AnnotationDB

    store = AnnotationDB(_existing_db(db))
    data = ServedData.load(files)
    done: dict[str, set] = {}
    for r in store.annotations():
        done.setdefault(r.annotator, set()).add(r.ref)
    table = Table(title="progress per annotator")
    for col in ("annotator", "done", "assigned"):
        table.add_column(col)
    for name, keys in sorted(store.assigned().items()):
        items = [it for k in keys if (it := data.index.get(k)) is not None]
        table.add_row(name, str(sum(1 for it in items if sample_done(it, done.get(name, set())))), str(len(items)))
    stdout.print(table)  # a result: stdout (notes and errors go to stderr)


tokens_app = typer.Typer(help="Read-only API tokens (scripted export).", no_args_is_help=True)


@tokens_app.command("create")
def tokens_create(name: str = typer.Argument(..., help="The user the token reads as."),
                  label: str = typer.Option("export", help="What the token is for."),
                  db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Create a token; it is printed once (only its hash is stored).  Use: curl -H "Authorization: Bearer TOKEN" .../export"""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.auth import Sessions, load_or_create_secret
    from ..web.db import AnnotationDB

    store = AnnotationDB(_db_path(db))
    user = store.user(name)
    if user is None:
        raise StoreError(f"{store.path}: no user named {name!r}")
    token_id, token = Sessions(store, load_or_create_secret(paths.home())).create_api_token(user, label)
    console.print(f"token {token_id} for {user.name} (read only):", highlight=False)
    typer.echo(token)


@tokens_app.command("list")
def tokens_list(db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """List tokens (never the tokens themselves)."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.db import AnnotationDB

    table = Table(title="API tokens")
    for col in ("id", "user", "label", "created", "last used"):
        table.add_column(col)
    for t in AnnotationDB(_existing_db(db)).tokens():
        table.add_row(str(t["id"]), t["user"], t["label"], t["created"], t["last_used"] or "-")
    stdout.print(table)  # a result: stdout (notes and errors go to stderr)


@tokens_app.command("revoke")
def tokens_revoke(token_id: int = typer.Argument(..., help="Token id (see tokens list)."),
                  db: Path | None = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Revoke a token."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.db import AnnotationDB

    if not AnnotationDB(_existing_db(db)).revoke_token(token_id):
        raise StoreError(f"no token with id {token_id}")
    console.print(f"revoked token {token_id}")


class ExportFormat(str, Enum):
    thoughtsource_json = "thoughtsource-json"
    csv = "csv"
    prm_jsonl = "prm-jsonl"


annotations_app = typer.Typer(help="Annotations stored by the annotator.", no_args_is_help=True)


@annotations_app.command("export")
def annotations_export(
    files: list[Path] = typer.Argument(..., help="The ThoughtSource files that were served (same order)."),
    out: Path = typer.Option(..., "--out", "-o", help="Output file."),
    format: ExportFormat = typer.Option(ExportFormat.thoughtsource_json, "--format",
                                        help="thoughtsource-json, csv, or prm-jsonl (step labels, one record per CoT)."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    annotator: str | None = typer.Option(None, help="Only this annotator's annotations (no adjudicated labels)."),
    all_annotators: bool = typer.Option(False, "--all-annotators",
                                        help="prm-jsonl: one record per CoT and annotator instead of the final labels."),
    strict: bool = typer.Option(False, "--strict", help="Refuse to export when stored step labels break the rule "
                                "(first_error on a step labelled -1, no -1 before it); without it they are listed."),
) -> None:
    """Write the annotations into generated_cot.annotations (author, date, key, value), as CSV, or step labels as prm-jsonl.

    Adjudicated labels are exported too (marked "adjudicated": true); prm-jsonl takes them as the final labels.
    Stored step labels that contradict themselves (stored before the rule was checked) are listed on stderr, and
    with --strict nothing is written."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.data import ServedData, step_label_problems
    from ..web.db import AnnotationDB, normalize_name

    data = ServedData.load(files)
    store = AnnotationDB(_existing_db(db))
    rows = store.annotations(annotator=normalize_name(annotator) if annotator else None)
    final = [] if annotator else store.adjudications()
    problems = step_label_problems(data, rows, final)
    if problems and strict:
        raise DataError(f"{len(problems)} stored step-label value(s) break the rule of step labels; nothing written "
                        "(fix them on the sample pages or /adjudicate, or export without --strict)", problems=problems)
    for line in problems:
        console.print(f"warning: inconsistent step labels: {line}", markup=False, highlight=False, soft_wrap=True)
    if format is ExportFormat.csv:
        n = data.export_csv(rows, out, final)
    elif format is ExportFormat.prm_jsonl:
        n = data.export_prm_jsonl(rows, out, final, all_annotators)
        console.print(f"wrote {n} step-label record(s) to {out}")
        return
    else:
        n = data.export_json(rows, out, final)
    console.print(f"wrote {n} annotation(s) to {out}")


@annotations_app.command("import")
def annotations_import(
    files: list[Path] = typer.Argument(..., help="ThoughtSource files with generated_cot.annotations (e.g. an export)."),
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Store the annotations of ThoughtSource files (each author's, and adjudicated ones) in the database.

    The inverse of `annotations export`: exporting again gives the same annotations."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..web.data import ServedData, rows_from_collection, step_label_problems
    from ..web.db import AnnotationDB

    store = AnnotationDB(_db_path(db))
    n = m = 0
    for f in files:
        collection = Collection.load(f)
        rows, final = rows_from_collection(collection)
        problems = step_label_problems(ServedData(collection), rows, final)
        if problems:  # checked before anything of the file is stored
            raise DataError(f"{len(problems)} step-label value(s) break the rule of step labels (first_error names a "
                            "step labelled -1, no -1 before it); nothing of this file imported", path=str(f),
                            problems=problems)
        n += store.import_rows(rows)
        for r in final:
            store.adjudicate(r.ref, r.key, r.value, r.annotator, date=r.updated or None)
        m += len(final)
    console.print(f"imported {n} annotation(s) and {m} adjudicated label(s) into {store.path}")


def agreement(
    db: Path | None = typer.Option(None, "--db", help=DB_HELP),
    labels: str | None = typer.Option(None, help="Comma-separated labels to report first (others found are added)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON to stdout instead of a table."),
) -> None:
    """Krippendorff's alpha per label and pairwise Cohen's kappa, over items labelled by >= 2 annotators."""
    # web.app needs fastapi (the web extra); imported when the command runs: `thoughtsource --help` stays fast
    from ..web.agreement import agreement as compute
    from ..web.app import DEFAULT_LABELS
    from ..web.db import AnnotationDB

    wanted = [x.strip() for x in labels.split(",") if x.strip()] if labels else DEFAULT_LABELS
    results = compute(AnnotationDB(_existing_db(db)).annotations(), wanted)
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
    stdout.print(table)  # a result: stdout (notes and errors go to stderr)


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.add_typer(users_app, name="users")
    app.add_typer(annotations_app, name="annotations")
    app.add_typer(tasks_app, name="tasks")
    app.add_typer(tokens_app, name="tokens")
    app.command()(agreement)
