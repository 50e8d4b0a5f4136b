"""Switching a SQLite file to WAL mode safely when several processes open it at once.

SQLite does not call the busy handler while ``PRAGMA journal_mode = WAL`` takes its exclusive lock,
so when two processes create or open one file in the same instant the loser gets ``database is
locked`` at once, whatever ``busy_timeout`` says.  (Seen in CI: two ``generate`` runs sharing one
completion store.)  :func:`enable_wal` retries the switch, with a short growing pause, until the
busy timeout is spent; once any process has switched the file, it stays in WAL mode and the switch
is a no-op for everyone else.
"""

from __future__ import annotations

import sqlite3
import time


def _locked(e: sqlite3.OperationalError) -> bool:
    return "locked" in str(e) or "busy" in str(e)


def enable_wal(conn: sqlite3.Connection, timeout_s: float) -> str:
    """Put ``conn``'s database in WAL mode, waiting up to ``timeout_s`` for other openers; returns the mode."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        except sqlite3.OperationalError as e:
            if not _locked(e) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.25)
