"""The one SQLite migration runner: the completion store's and the annotation database's schemas move forward by it.

A database's schema is an append-only list of named migrations, each a function of the connection or an SQL
script.  :func:`migrate` applies the ones not yet recorded in the ``_migrations`` table, in list order, each in its
own ``BEGIN IMMEDIATE`` transaction together with its bookkeeping row: a migration that fails leaves the file as the
previous one left it, and two processes opening one file at once never apply a migration twice (the check is
repeated inside the transaction).  The bookkeeping table itself is created inside the first migration's
transaction, so a file that is not ours (its first migration fails) is left untouched.

Compatibility: the two runners this one replaced wrote ``_migrations (name, applied_at)`` (the store) and
``_migrations (name, applied)`` (the annotation database); the name is what is read, and the time goes into
whichever of the two columns the file's table has.  SQL scripts are split into statements by
:func:`sqlite3.complete_statement`, so a ``;`` inside a string literal or a trigger body does not cut a statement.
"""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)

TABLE = "_migrations"
TIME_COLUMNS = ("applied_at", "applied")  # the first is the one a new table gets

Step = Callable[[sqlite3.Connection], None]


@dataclass(frozen=True)
class Migration:
    """One schema step: its name (recorded once applied) and what it does (a function, or an SQL script)."""

    name: str
    step: Step | str


MigrationLike = Migration | Step | tuple[str, "Step | str"]


def as_migration(m: MigrationLike) -> Migration:
    """A :class:`Migration` from one, from a function (named by ``__name__``) or from a ``(name, step)`` pair."""
    if isinstance(m, Migration):
        return m
    if isinstance(m, tuple):
        return Migration(m[0], m[1])
    return Migration(m.__name__, m)


def statements(script: str) -> list[str]:
    """The SQL statements of ``script``, cut where SQLite says a statement is complete."""
    out: list[str] = []
    current = ""
    for piece in script.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \t\r\n;"):
                out.append(current.strip())
            current = ""
    if current.strip(" \t\r\n;"):
        raise sqlite3.ProgrammingError(f"incomplete SQL statement in a migration: {current.strip()[:80]!r}")
    return out


def applied(conn: sqlite3.Connection) -> list[str]:
    """The names recorded in ``_migrations`` (none when the table does not exist yet)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)).fetchone() is None:
        return []
    return [r[0] for r in conn.execute(f"SELECT name FROM {TABLE}")]


def _time_column(conn: sqlite3.Connection) -> str:
    columns = {r[1] for r in conn.execute(f"PRAGMA table_info({TABLE})")}
    for c in TIME_COLUMNS:
        if c in columns:
            return c
    raise sqlite3.DatabaseError(f"its {TABLE} table has none of the columns {', '.join(TIME_COLUMNS)}")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _apply(conn: sqlite3.Connection, m: Migration) -> bool:
    """Apply ``m`` and record it, in one transaction; False when another connection recorded it first."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (name TEXT PRIMARY KEY, {TIME_COLUMNS[0]} TEXT NOT NULL)")
        if conn.execute(f"SELECT 1 FROM {TABLE} WHERE name = ?", (m.name,)).fetchone():
            conn.execute("ROLLBACK")
            return False
        if isinstance(m.step, str):
            for stmt in statements(m.step):
                conn.execute(stmt)
        else:
            m.step(conn)
        conn.execute(f"INSERT INTO {TABLE} (name, {_time_column(conn)}) VALUES (?, ?)", (m.name, _now()))
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return True


def migrate(conn: sqlite3.Connection, migrations: Iterable[MigrationLike], *, label: str = "") -> list[str]:
    """Apply the migrations not yet recorded, in order, each in its own transaction; returns the names applied.

    ``conn`` is in autocommit mode (``isolation_level=None``) with no transaction open: the runner opens its own.
    """
    if conn.in_transaction:
        raise sqlite3.ProgrammingError("migrate() needs a connection with no open transaction")
    done = set(applied(conn))
    out: list[str] = []
    for m in map(as_migration, migrations):
        if m.name not in done and _apply(conn, m):
            out.append(m.name)
    if out:
        log.debug("%smigrations applied: %s", f"{label}: " if label else "", ", ".join(out))
    return out
