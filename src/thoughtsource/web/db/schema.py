"""The annotation database's schema: an append-only list of migrations, applied by :mod:`thoughtsource.sqlite_migrations`."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from .rows import normalize_name, now

log = logging.getLogger(__name__)


def _m002_roles(conn: sqlite3.Connection) -> None:
    """Viewer role, disabled accounts, normalised names (annotations follow a renamed user)."""
    conn.execute("CREATE TEMP TABLE _sessions_copy AS SELECT * FROM sessions")
    conn.execute(
        """CREATE TABLE users_new (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            password_hash TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('viewer', 'annotator', 'admin')),
            disabled INTEGER NOT NULL DEFAULT 0,
            created TEXT NOT NULL
        )"""
    )
    conn.execute("INSERT INTO users_new (id, name, password_hash, role, created) SELECT id, name, password_hash, role, created FROM users")
    conn.execute("DROP TABLE users")  # (cascades to sessions: restored below)
    conn.execute("ALTER TABLE users_new RENAME TO users")
    conn.execute("INSERT INTO sessions SELECT * FROM _sessions_copy")
    conn.execute("DROP TABLE _sessions_copy")
    taken = {r[0] for r in conn.execute("SELECT name FROM users")}
    for uid, name in conn.execute("SELECT id, name FROM users").fetchall():
        new = normalize_name(name)
        if new == name:
            continue
        if new in taken or not new:
            log.warning("user %r: its normalised name %r is taken; left as it is", name, new)
            continue
        conn.execute("UPDATE users SET name = ? WHERE id = ?", (new, uid))
        conn.execute("UPDATE annotations SET annotator = ? WHERE annotator = ?", (new, name))
        taken.add(new)


def _m004_uploads_removed_users(conn: sqlite3.Connection) -> None:
    """The upload order (``uploads``), and removed accounts kept as rows (``users.removed``) so that neither their id
    nor their name is given out again: annotations carry the annotator's name, and a new account with a removed
    user's name read and deleted that user's annotations.  Names that annotated but have no account (removed
    before this migration) get such a row too."""
    conn.execute("CREATE TABLE uploads (seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, accepted TEXT NOT NULL)")
    conn.execute("ALTER TABLE users ADD COLUMN removed TEXT")
    t = now()
    for (name,) in conn.execute(
        "SELECT annotator FROM annotations UNION SELECT adjudicator FROM adjudications EXCEPT SELECT name FROM users"
    ).fetchall():
        conn.execute("INSERT INTO users (name, password_hash, role, disabled, created, removed) VALUES (?, '', 'annotator', 1, ?, ?)",
                     (name, t, t))


MIGRATIONS: list[tuple[str, str | Callable[[sqlite3.Connection], None]]] = [
    (
        "m001_initial",
        """
        CREATE TABLE users (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            password_hash TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('annotator', 'admin')),
            created TEXT NOT NULL
        );
        CREATE TABLE sessions (
            token_hash TEXT PRIMARY KEY,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            created TEXT NOT NULL,
            expires TEXT NOT NULL
        );
        CREATE TABLE annotations (
            id INTEGER PRIMARY KEY,
            dataset TEXT NOT NULL,
            split TEXT NOT NULL,
            sample_id TEXT NOT NULL,
            cot_id TEXT NOT NULL,
            annotator TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            UNIQUE (dataset, split, sample_id, cot_id, annotator, key)
        );
        CREATE INDEX annotations_by_annotator ON annotations (annotator);
        CREATE INDEX annotations_by_sample ON annotations (dataset, split, sample_id);
        """,
    ),
    ("m002_roles_disabled_normalised_names", _m002_roles),
    (
        "m003_assignments_adjudications_tokens_settings",
        """
        CREATE TABLE assignments (
            dataset TEXT NOT NULL,
            split TEXT NOT NULL,
            sample_id TEXT NOT NULL,
            annotator TEXT NOT NULL,
            position INTEGER NOT NULL,
            created TEXT NOT NULL,
            PRIMARY KEY (annotator, dataset, split, sample_id)
        );
        CREATE TABLE adjudications (
            id INTEGER PRIMARY KEY,
            dataset TEXT NOT NULL,
            split TEXT NOT NULL,
            sample_id TEXT NOT NULL,
            cot_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            adjudicator TEXT NOT NULL,
            created TEXT NOT NULL,
            updated TEXT NOT NULL,
            UNIQUE (dataset, split, sample_id, cot_id, key)
        );
        CREATE TABLE api_tokens (
            id INTEGER PRIMARY KEY,
            token_hash TEXT NOT NULL UNIQUE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            label TEXT NOT NULL,
            created TEXT NOT NULL,
            last_used TEXT
        );
        CREATE TABLE settings (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )
        """,
    ),
    ("m004_uploads_removed_users", _m004_uploads_removed_users),
]
