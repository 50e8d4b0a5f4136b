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

The database is split by resource: :mod:`.users` (accounts, sessions, API tokens), :mod:`.annotations`
(annotations, step labels, CoT ids), :mod:`.reviews` (assignments, adjudications), :mod:`.server` (settings,
uploads), on :mod:`.connection` (the file, its connections and migrations); :class:`AnnotationDB` is all of them.
"""

from __future__ import annotations

from .annotations import Annotations
from .connection import Database
from .reviews import Reviews
from .rows import (
    BUSY_TIMEOUT_MS,
    MAX_NAME,
    ROLES,
    STEP_KEY,
    STEP_VALUES,
    AnnotationRow,
    CotRef,
    User,
    normalize_name,
    now,
    step_labels_problem,
)
from .schema import MIGRATIONS
from .server import ServerState
from .users import Users

__all__ = [
    "BUSY_TIMEOUT_MS", "MAX_NAME", "MIGRATIONS", "ROLES", "STEP_KEY", "STEP_VALUES", "AnnotationDB", "AnnotationRow",
    "Annotations", "CotRef", "Database", "Reviews", "ServerState", "User", "Users", "normalize_name", "now",
    "step_labels_problem",
]


class AnnotationDB(Users, Annotations, Reviews, ServerState):
    """The annotator's database file: every resource's methods on one object (one connection per thread)."""
