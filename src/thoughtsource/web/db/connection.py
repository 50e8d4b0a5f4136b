"""The annotation database's file and connections: one connection per thread, WAL, one ``BEGIN IMMEDIATE`` per write."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from ... import sqlite_migrations
from ...errors import StoreError
from ...sqlite_wal import enable_wal
from .rows import BUSY_TIMEOUT_MS
from .schema import MIGRATIONS


class Database:
    """The annotator's database file, migrated on open; each resource class (users, annotations, reviews, server
    state) adds its methods on top.  Thread-safe: each thread gets its own connection."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            # password hashes live here: owner-only (SQLite gives the -wal/-shm files the same mode)
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._local = threading.local()
        self._migrate()

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
