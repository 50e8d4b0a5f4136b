"""SQLite storage of the annotator: users, sessions and annotations (WAL mode).

One connection per thread (the server's worker threads each get their own, kept open: closing the
last connection of a WAL database checkpoints it, which would cost a checkpoint per request); a
connection is never shared between threads.  Every write is one short ``BEGIN IMMEDIATE``
transaction and every connection waits up to ``busy_timeout`` for the write lock, so many
annotators saving at once are serialised by SQLite instead of failing.  ``synchronous=NORMAL`` is
the WAL setting SQLite recommends: never corrupt, and a committed annotation survives a crash of the
server (only a power loss can undo the last commits).  The schema only moves forward: ``MIGRATIONS`` is an
append-only list recorded in ``_migrations`` (by :mod:`thoughtsource.sqlite_migrations`).

An annotation is unique per (CoT, annotator, key); a CoT is addressed by (dataset, split, sample id,
CoT id) as they appear in the served ThoughtSource files.  Values are stored as JSON text.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
import os
import sqlite3
import threading
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import sqlite_migrations
from ..errors import StoreError
from ..sqlite_wal import enable_wal

log = logging.getLogger(__name__)

ROLES = ("viewer", "annotator", "admin")
BUSY_TIMEOUT_MS = 30_000
STEP_KEY = "step_labels"  # the annotation key of per-step labels: {"labels": [1|0|-1|null, ...], "first_error": k|null}
STEP_VALUES = (-1, 0, 1)  # PRM800K: incorrect, neutral, correct
MAX_NAME = 100


def normalize_name(name: str) -> str:
    """A user name as stored and looked up: NFKC, surrounding spaces removed, case folded ("Alice " → "alice")."""
    return unicodedata.normalize("NFKC", name).strip().casefold()


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


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class CotRef:
    """Where a generated CoT lives in the served data."""

    dataset: str
    split: str
    sample_id: str
    cot_id: str


@dataclass(frozen=True)
class User:
    id: int
    name: str
    role: str
    disabled: bool = False

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def can_write(self) -> bool:
        """Viewers only read."""
        return self.role in ("annotator", "admin")


def _user(r: sqlite3.Row) -> User:
    return User(r["id"], r["name"], r["role"], bool(r["disabled"]))


@dataclass(frozen=True)
class AnnotationRow:
    id: int
    ref: CotRef
    annotator: str
    key: str
    value: Any
    created: str
    updated: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dataset": self.ref.dataset,
            "split": self.ref.split,
            "sample_id": self.ref.sample_id,
            "cot_id": self.ref.cot_id,
            "annotator": self.annotator,
            "key": self.key,
            "value": self.value,
            "updated": self.updated,
        }


def _row(r: sqlite3.Row, who: str = "annotator") -> AnnotationRow:
    """An ``annotations`` row (or, with ``who="adjudicator"``, an ``adjudications`` row)."""
    return AnnotationRow(
        id=r["id"],
        ref=CotRef(r["dataset"], r["split"], r["sample_id"], r["cot_id"]),
        annotator=r[who],
        key=r["key"],
        value=json.loads(r["value"]),
        created=r["created"],
        updated=r["updated"],
    )


class AnnotationDB:
    """The annotator's database file.  Thread-safe: every call opens its own connection."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            # password hashes live here: owner-only (SQLite gives the -wal/-shm files the same mode)
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._local = threading.local()
        self._migrate()

    # ------------------------------------------------------------------ plumbing
    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
                conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.Error as e:
                raise StoreError(f"{self.path}: cannot open the annotation database: {e}") from None
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection (the others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @contextlib.contextmanager
    def connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        """This thread's connection; with ``write=True`` inside one ``BEGIN IMMEDIATE`` transaction."""
        conn = self._connection()
        if not write:
            yield conn
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _migrate(self) -> None:
        with self.connect() as conn:
            mode = enable_wal(conn, BUSY_TIMEOUT_MS / 1000)
            if mode.lower() != "wal":
                raise StoreError(f"{self.path}: could not switch the database to WAL mode (got {mode!r})")
        try:  # each migration in one transaction: a failed one leaves the file as the one before left it
            with self.connect() as conn:
                sqlite_migrations.migrate(conn, MIGRATIONS, label=str(self.path))
        except sqlite3.DatabaseError as e:  # another program's SQLite file (a 'users' table of its own, ...)
            raise StoreError(f"{self.path}: not a thoughtsource annotation database, or one this version cannot "
                             f"upgrade ({e}); give another --db") from None

    # ------------------------------------------------------------------ users
    def add_user(self, name: str, password_hash: str, role: str) -> User:
        name = normalize_name(name)
        if not name or len(name) > MAX_NAME:
            raise StoreError(f"a user name has 1 to {MAX_NAME} characters")
        if role not in ROLES:
            raise StoreError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
        try:
            with self.connect(write=True) as conn:
                cur = conn.execute(
                    "INSERT INTO users (name, password_hash, role, created) VALUES (?, ?, ?, ?)", (name, password_hash, role, now())
                )
                return User(int(cur.lastrowid or 0), name, role)
        except sqlite3.IntegrityError:
            with self.connect() as conn:
                removed = conn.execute("SELECT removed FROM users WHERE name = ?", (name,)).fetchone()
            if removed is not None and removed[0]:
                raise StoreError(f"{self.path}: {name!r} is the name of a removed account, whose annotations keep it; "
                                 "choose another name") from None
            raise StoreError(f"{self.path}: a user named {name!r} already exists") from None

    def _check_admin_change(self, conn: sqlite3.Connection, acting: User, name: str, loses_admin: bool) -> None:
        """Inside the change's transaction: ``acting`` is still an active admin and, if the change takes admin
        rights from ``name``, another active admin remains.  (Checked before the transaction, two admins demoting
        each other at once both passed and left no admin, 18 of 30 times.)"""
        me = conn.execute("SELECT role, disabled, removed FROM users WHERE id = ?", (acting.id,)).fetchone()
        if me is None or me["role"] != "admin" or me["disabled"] or me["removed"]:
            raise StoreError("you are no longer an active admin; nothing was changed")
        if loses_admin:
            others = conn.execute("SELECT COUNT(*) FROM users WHERE role = 'admin' AND disabled = 0 AND removed IS NULL "
                                  "AND name != ?", (name,)).fetchone()[0]
            if others == 0:
                raise StoreError(f"{name!r} is the last active admin; nothing was changed")

    def _update_user(self, name: str, sql: str, args: tuple[Any, ...], end_sessions: bool,
                     acting: User | None = None, loses_admin: Callable[[sqlite3.Row], bool] | None = None) -> None:
        name = normalize_name(name)
        with self.connect(write=True) as conn:
            target = conn.execute("SELECT * FROM users WHERE name = ? AND removed IS NULL", (name,)).fetchone()
            if target is None:
                raise StoreError(f"{self.path}: no user named {name!r}")
            if acting is not None:
                self._check_admin_change(conn, acting, name, loses_admin is not None and loses_admin(target))
            conn.execute(sql + " WHERE id = ?", (*args, target["id"]))
            if end_sessions:
                conn.execute("DELETE FROM sessions WHERE user_id = ?", (target["id"],))

    def set_password(self, name: str, password_hash: str) -> None:
        """New password; ends the user's sessions."""
        self._update_user(name, "UPDATE users SET password_hash = ?", (password_hash,), end_sessions=True)

    def set_role(self, name: str, role: str, acting: User | None = None) -> None:
        """New role; ends the user's sessions (so no page keeps showing the old rights).  ``acting``: the admin
        making the change on the admin page (:meth:`_check_admin_change`, in the same transaction)."""
        if role not in ROLES:
            raise StoreError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
        self._update_user(name, "UPDATE users SET role = ?", (role,), end_sessions=True, acting=acting,
                          loses_admin=lambda u: u["role"] == "admin" and not u["disabled"] and role != "admin")

    def set_disabled(self, name: str, disabled: bool, acting: User | None = None) -> None:
        """Disable (ends sessions, no log-in, API tokens refused) or enable an account."""
        self._update_user(name, "UPDATE users SET disabled = ?", (int(disabled),), end_sessions=disabled, acting=acting,
                          loses_admin=lambda u: u["role"] == "admin" and not u["disabled"] and disabled)

    def remove_user(self, name: str, acting: User | None = None) -> None:
        """Remove an account: its sessions, API tokens and assignments are deleted; the row stays, marked removed,
        so its id and name are never given out again and its annotations (which carry the name) stay its own."""
        name = normalize_name(name)
        with self.connect(write=True) as conn:
            target = conn.execute("SELECT * FROM users WHERE name = ? AND removed IS NULL", (name,)).fetchone()
            if target is None:
                raise StoreError(f"{self.path}: no user named {name!r}")
            if acting is not None:
                self._check_admin_change(conn, acting, name, target["role"] == "admin" and not target["disabled"])
            conn.execute("UPDATE users SET removed = ?, disabled = 1, password_hash = '' WHERE id = ?", (now(), target["id"]))
            conn.execute("DELETE FROM sessions WHERE user_id = ?", (target["id"],))
            conn.execute("DELETE FROM api_tokens WHERE user_id = ?", (target["id"],))
            conn.execute("DELETE FROM assignments WHERE annotator = ?", (name,))

    def user_credentials(self, name: str) -> tuple[User, str] | None:
        with self.connect() as conn:
            r = conn.execute("SELECT id, name, role, disabled, password_hash FROM users WHERE name = ? AND removed IS NULL",
                             (normalize_name(name),)).fetchone()
        return (_user(r), r["password_hash"]) if r else None

    def user(self, name: str) -> User | None:
        found = self.user_credentials(name)
        return found[0] if found else None

    def users(self) -> list[User]:
        with self.connect() as conn:
            return [_user(r) for r in conn.execute("SELECT id, name, role, disabled FROM users WHERE removed IS NULL ORDER BY name")]

    # ------------------------------------------------------------------ sessions
    def create_session(self, token_hash: str, user: User, expires: str) -> None:
        with self.connect(write=True) as conn:
            conn.execute("DELETE FROM sessions WHERE expires < ?", (now(),))
            conn.execute(
                "INSERT INTO sessions (token_hash, user_id, created, expires) VALUES (?, ?, ?, ?)",
                (token_hash, user.id, now(), expires),
            )

    def session_user(self, token_hash: str) -> User | None:
        with self.connect() as conn:
            r = conn.execute(
                "SELECT u.id, u.name, u.role, u.disabled FROM sessions s JOIN users u ON u.id = s.user_id "
                "WHERE s.token_hash = ? AND s.expires > ? AND u.disabled = 0 AND u.removed IS NULL",
                (token_hash, now()),
            ).fetchone()
        return _user(r) if r else None

    def delete_session(self, token_hash: str) -> None:
        with self.connect(write=True) as conn:
            conn.execute("DELETE FROM sessions WHERE token_hash = ?", (token_hash,))

    # ------------------------------------------------------------------ annotations
    def upsert(self, ref: CotRef, annotator: str, key: str, value: Any) -> AnnotationRow:
        """Insert or replace the (CoT, annotator, key) annotation; returns the stored row."""
        t = now()
        with self.connect(write=True) as conn:
            conn.execute(
                "INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (dataset, split, sample_id, cot_id, annotator, key) DO UPDATE SET value = excluded.value, "
                "updated = excluded.updated",
                (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, key, json.dumps(value), t, t),
            )
            r = conn.execute(
                "SELECT * FROM annotations WHERE dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? AND annotator = ? "
                "AND key = ?",
                (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, key),
            ).fetchone()
        return _row(r)

    def import_rows(self, rows: list[AnnotationRow]) -> int:
        """Store rows read from a file (annotator, key, value and date kept), replacing the same (CoT, annotator, key)."""
        with self.connect(write=True) as conn:
            for r in rows:
                t = r.updated or now()
                conn.execute(
                    "INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, split, sample_id, cot_id, annotator, key) "
                    "DO UPDATE SET value = excluded.value, updated = excluded.updated",
                    (r.ref.dataset, r.ref.split, r.ref.sample_id, r.ref.cot_id, r.annotator, r.key, json.dumps(r.value), t, t),
                )
        return len(rows)

    def set_preferred(self, ref: CotRef, annotator: str, preferred: bool) -> AnnotationRow | None:
        """Star (or un-star) a CoT; one preferred CoT per sample and annotator, in one transaction."""
        t = now()
        with self.connect(write=True) as conn:
            conn.execute(
                "DELETE FROM annotations WHERE dataset = ? AND split = ? AND sample_id = ? AND annotator = ? AND key = 'preferred'",
                (ref.dataset, ref.split, ref.sample_id, annotator),
            )
            if not preferred:
                return None
            cur = conn.execute(
                "INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                "VALUES (?, ?, ?, ?, ?, 'preferred', 'true', ?, ?)",
                (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, t, t),
            )
            r = conn.execute("SELECT * FROM annotations WHERE id = ?", (cur.lastrowid,)).fetchone()
        return _row(r)

    def delete_key(self, ref: CotRef, annotator: str, key: str) -> bool:
        with self.connect(write=True) as conn:
            cur = conn.execute(
                "DELETE FROM annotations WHERE dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? AND annotator = ? AND key = ?",
                (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, key),
            )
            return cur.rowcount > 0

    def get(self, annotation_id: int) -> AnnotationRow | None:
        with self.connect() as conn:
            r = conn.execute("SELECT * FROM annotations WHERE id = ?", (annotation_id,)).fetchone()
        return _row(r) if r else None

    def delete(self, annotation_id: int, annotator: str) -> bool:
        """Delete a row by id, only if it belongs to ``annotator`` (the check is part of the statement)."""
        with self.connect(write=True) as conn:
            cur = conn.execute("DELETE FROM annotations WHERE id = ? AND annotator = ?", (annotation_id, annotator))
            return cur.rowcount > 0

    def annotations(
        self,
        *,
        dataset: str | None = None,
        split: str | None = None,
        sample_id: str | None = None,
        annotator: str | None = None,
    ) -> list[AnnotationRow]:
        where, args = [], []
        for col, val in (("dataset", dataset), ("split", split), ("sample_id", sample_id), ("annotator", annotator)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = "SELECT * FROM annotations" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        with self.connect() as conn:
            return [_row(r) for r in conn.execute(sql, args)]

    def annotated_samples(self, annotator: str | None = None) -> set[tuple[str, str, str]]:
        """(dataset, split, sample id) of the samples with at least one annotation (of ``annotator``, or anyone's)."""
        sql = "SELECT DISTINCT dataset, split, sample_id FROM annotations"
        args: tuple[str, ...] = ()
        if annotator is not None:
            sql += " WHERE annotator = ?"
            args = (annotator,)
        with self.connect() as conn:
            return {(r[0], r[1], r[2]) for r in conn.execute(sql, args)}

    def annotated_cots(self) -> dict[str, set[CotRef]]:
        """Per annotator: the CoTs they annotated (any key)."""
        out: dict[str, set[CotRef]] = {}
        with self.connect() as conn:
            for r in conn.execute("SELECT DISTINCT annotator, dataset, split, sample_id, cot_id FROM annotations"):
                out.setdefault(r[0], set()).add(CotRef(r[1], r[2], r[3], r[4]))
        return out

    def count(self) -> int:
        with self.connect() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM annotations").fetchone()[0])

    # ------------------------------------------------------------------ step labels
    def set_step(self, ref: CotRef, annotator: str, n_steps: int, step: int, *, label: int | object | None = ...,
                 first_error: bool | None = None) -> AnnotationRow:
        """Change one step of ``annotator``'s step labels of a CoT (read-modify-write in one transaction).

        ``label`` sets step ``step`` to +1 / 0 / -1 (None clears it; ``...`` leaves it); ``first_error=True``
        marks the step as the first error (and labels it -1, as PRM800K does), ``False`` unmarks it.
        """
        if not 0 <= step < n_steps:
            raise StoreError(f"step {step} out of range (this CoT has {n_steps} steps)")
        if label is not ... and label is not None and label not in STEP_VALUES:
            raise StoreError(f"a step label is one of {STEP_VALUES}, got {label!r}")
        args = (ref.dataset, ref.split, ref.sample_id, ref.cot_id, annotator, STEP_KEY)
        where = "dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? AND annotator = ? AND key = ?"
        t = now()
        with self.connect(write=True) as conn:
            r = conn.execute(f"SELECT value FROM annotations WHERE {where}", args).fetchone()
            value = json.loads(r["value"]) if r else {}
            labels = list(value.get("labels") or [])
            labels = (labels + [None] * n_steps)[:n_steps]
            first = value.get("first_error")
            if label is not ...:
                labels[step] = label
            if first_error is True:
                first, labels[step] = step, -1
            elif first_error is False and first == step:
                first = None
            if first is not None and not 0 <= first < n_steps:
                first = None
            new = json.dumps({"labels": labels, "first_error": first})
            conn.execute(
                "INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, split, sample_id, cot_id, annotator, key) "
                "DO UPDATE SET value = excluded.value, updated = excluded.updated",
                (*args, new, t, t),
            )
            row = conn.execute(f"SELECT * FROM annotations WHERE {where}", args).fetchone()
        return _row(row)

    # ------------------------------------------------------------------ assignments
    def replace_assignments(self, rows: list[tuple[str, str, str, str]]) -> int:
        """Replace all assignments by ``rows`` of (dataset, split, sample id, annotator), in queue order."""
        t = now()
        with self.connect(write=True) as conn:
            conn.execute("DELETE FROM assignments")
            pos: dict[str, int] = {}
            for d, s, x, a in rows:
                pos[a] = pos.get(a, -1) + 1
                conn.execute("INSERT INTO assignments (dataset, split, sample_id, annotator, position, created) "
                             "VALUES (?, ?, ?, ?, ?, ?)", (d, s, x, a, pos[a], t))
        return len(rows)

    def assigned(self, annotator: str | None = None) -> dict[str, list[tuple[str, str, str]]]:
        """Per annotator (or only ``annotator``): the assigned samples in queue order."""
        sql = "SELECT annotator, dataset, split, sample_id FROM assignments"
        args: tuple[str, ...] = ()
        if annotator is not None:
            sql += " WHERE annotator = ?"
            args = (annotator,)
        out: dict[str, list[tuple[str, str, str]]] = {}
        with self.connect() as conn:
            for r in conn.execute(sql + " ORDER BY annotator, position", args):
                out.setdefault(r[0], []).append((r[1], r[2], r[3]))
        return out

    # ------------------------------------------------------------------ adjudications
    def adjudicate(self, ref: CotRef, key: str, value: Any, adjudicator: str, date: str | None = None) -> AnnotationRow | None:
        """Set (``value`` not None) or clear the final value of (CoT, key); returned as a row whose annotator is the adjudicator."""
        t = date or now()
        args = (ref.dataset, ref.split, ref.sample_id, ref.cot_id, key)
        with self.connect(write=True) as conn:
            if value is None:
                conn.execute("DELETE FROM adjudications WHERE dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? "
                             "AND key = ?", args)
                return None
            conn.execute(
                "INSERT INTO adjudications (dataset, split, sample_id, cot_id, key, value, adjudicator, created, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dataset, split, sample_id, cot_id, key) DO UPDATE SET "
                "value = excluded.value, adjudicator = excluded.adjudicator, updated = excluded.updated",
                (*args, json.dumps(value), adjudicator, t, t),
            )
            r = conn.execute("SELECT * FROM adjudications WHERE dataset = ? AND split = ? AND sample_id = ? AND cot_id = ? "
                             "AND key = ?", args).fetchone()
        return _row(r, "adjudicator")

    def adjudications(self) -> list[AnnotationRow]:
        """The final values, as rows whose ``annotator`` is the admin who set them."""
        with self.connect() as conn:
            return [_row(r, "adjudicator") for r in conn.execute("SELECT * FROM adjudications ORDER BY id")]

    # ------------------------------------------------------------------ API tokens
    def create_token(self, token_hash: str, user: User, label: str) -> int:
        with self.connect(write=True) as conn:
            cur = conn.execute("INSERT INTO api_tokens (token_hash, user_id, label, created) VALUES (?, ?, ?, ?)",
                               (token_hash, user.id, label, now()))
            return int(cur.lastrowid or 0)

    def token_user(self, token_hash: str) -> User | None:
        with self.connect() as conn:
            r = conn.execute("SELECT u.id, u.name, u.role, u.disabled FROM api_tokens t JOIN users u ON u.id = t.user_id "
                             "WHERE t.token_hash = ? AND u.disabled = 0 AND u.removed IS NULL", (token_hash,)).fetchone()
        if r is None:
            return None
        with self.connect(write=True) as conn:
            conn.execute("UPDATE api_tokens SET last_used = ? WHERE token_hash = ?", (now(), token_hash))
        return _user(r)

    def tokens(self) -> list[dict[str, Any]]:
        with self.connect() as conn:
            return [dict(r) for r in conn.execute(
                "SELECT t.id, u.name AS user, t.label, t.created, t.last_used FROM api_tokens t JOIN users u ON u.id = t.user_id "
                "ORDER BY t.id")]

    def revoke_token(self, token_id: int) -> bool:
        with self.connect(write=True) as conn:
            return conn.execute("DELETE FROM api_tokens WHERE id = ?", (token_id,)).rowcount > 0

    # ------------------------------------------------------------------ uploads
    def uploads(self) -> list[str]:
        """The names of the accepted uploads (in ``upload_dir``), in the order they were accepted."""
        with self.connect() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM uploads ORDER BY seq")]

    def record_upload(self, name: str) -> None:
        """``name`` was accepted (and renamed into ``upload_dir``): it is served after every earlier upload."""
        with self.connect(write=True) as conn:
            conn.execute("INSERT INTO uploads (name, accepted) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", (name, now()))

    # ------------------------------------------------------------------ CoT ids
    def positional_cot_refs(self) -> list[CotRef]:
        """The distinct CoTs that annotations or adjudications address as ``cot-<n>``: the id the versions before
        stable ids gave a CoT without one (its position in the merged sample)."""
        sql = ("SELECT DISTINCT dataset, split, sample_id, cot_id FROM {} WHERE cot_id GLOB 'cot-[0-9]*' "
               "AND NOT cot_id GLOB 'cot-*[^0-9]*'")
        with self.connect() as conn:
            found = {CotRef(*r) for t in ("annotations", "adjudications") for r in conn.execute(sql.format(t))}
        return sorted(found, key=lambda r: (r.dataset, r.split, r.sample_id, r.cot_id))

    def rename_cots(self, renames: dict[CotRef, str]) -> int:
        """Give the annotations and adjudications of each CoT its new id, in one transaction; returns the rows
        changed.  A row whose new address is taken (the same annotator and key on the new id) fails it all."""
        n = 0
        try:
            with self.connect(write=True) as conn:
                for ref, new in renames.items():
                    for table in ("annotations", "adjudications"):
                        n += conn.execute(f"UPDATE {table} SET cot_id = ? WHERE dataset = ? AND split = ? AND sample_id = ? "
                                          "AND cot_id = ?", (new, ref.dataset, ref.split, ref.sample_id, ref.cot_id)).rowcount
        except sqlite3.IntegrityError as e:
            raise StoreError(f"{self.path}: cannot give the CoTs their stable ids: {e}") from None
        return n

    # ------------------------------------------------------------------ settings
    def setting(self, key: str, default: Any = None) -> Any:
        with self.connect() as conn:
            r = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return json.loads(r[0]) if r else default

    def set_setting(self, key: str, value: Any) -> None:
        with self.connect(write=True) as conn:
            conn.execute("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                         (key, json.dumps(value)))
