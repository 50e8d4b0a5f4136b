"""The durable completion store: every finished completion, in SQLite, under a content key.

Design (see STYLE.md, "The store"):

* Key = ``"v1:" + sha256(canonical JSON of backend.cache_identity(), the prompt or messages, the
  generation parameters and the sample index)``.  The sample index makes the n samples of one prompt
  (self-consistency) separate, cacheable entries; the ``v1:`` prefix makes a future change of the key
  visible instead of silently splitting the cache.
* Each finished request is written in its own short transaction and committed *before* generation
  attaches it to a collection, so a run killed at any point loses at most the requests in flight and
  never asks twice for a completion it already has.
* WAL journal, ``busy_timeout`` (several processes may share one store), ``synchronous=NORMAL``
  (durable across process crashes; WAL keeps the file consistent on power loss).
* The schema only moves forward: :data:`MIGRATIONS` is an append-only list, each applied once and
  recorded in ``_migrations``.
* Claims: several processes generating into one store do not pay twice for a key.  Before a process
  sends a request it *claims* the key (a row in ``claims``: owner token, host, pid, time) in one
  transaction; a key another live process has claimed is not sent but waited for, until its
  completion is committed (then read from the store) or the claim is released (the owner failed:
  claim it and send).  ``put`` deletes the claim in the transaction that stores the completion.  A
  claim whose owner is gone (same host, pid not running) or older than :data:`CLAIM_LEASE_S` is
  stale and may be taken over, so a killed run never blocks the next one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import sqlite_migrations
from .backends.base import Completion, Request, extra_params
from .errors import StoreError
from .paths import home
from .sqlite_wal import enable_wal

log = logging.getLogger(__name__)

KEY_VERSION = "v1"
BUSY_TIMEOUT_MS = 30_000
CLAIM_LEASE_S = 15 * 60.0  # a claim older than this is stale even when its owner cannot be checked (another host)


# --------------------------------------------------------------------------- keys
def request_payload(request: Request) -> dict[str, Any]:
    """What of a request changes its completion (metadata does not)."""
    return {
        "prompt": None if request.messages else request.prompt,
        "messages": [dict(m) for m in request.messages] if request.messages else None,
        "params": {
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "stop": list(request.stop),
            "seed": request.seed,
            **extra_params(request),  # only those set: the keys of other requests stay what they were
        },
        "sample_index": request.sample_index,
        # only when given: the keys of text prompts stay what they were
        **({"prompt_ids": list(request.prompt_ids)} if request.prompt_ids is not None else {}),
    }


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def completion_key(identity: dict[str, Any], request: Request) -> str:
    """``v1:<sha256 hex>`` of the backend identity and the request payload."""
    digest = hashlib.sha256(canonical_json({"backend": identity, **request_payload(request)}).encode()).hexdigest()
    return f"{KEY_VERSION}:{digest}"


# --------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class StoredCompletion:
    key: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    latency_s: float
    attempts: int
    created_at: str
    reasoning: str | None = None  # a reasoning model's thinking; ``text`` is then its final content
    reasoning_tokens: int = 0
    reasoning_source: str = ""

    @classmethod
    def from_completion(cls, key: str, completion: Completion) -> StoredCompletion:
        """The row a store writes for ``completion`` (created now)."""
        return cls(
            key=key, text=completion.text, prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens, finish_reason=completion.finish_reason,
            latency_s=completion.latency_s, attempts=completion.attempts, created_at=_now(),
            reasoning=completion.reasoning, reasoning_tokens=completion.reasoning_tokens,
            reasoning_source=completion.reasoning_source,
        )

    def to_completion(self) -> Completion:
        return Completion(
            text=self.text, prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            finish_reason=self.finish_reason, latency_s=self.latency_s, attempts=self.attempts,
            reasoning=self.reasoning, reasoning_tokens=self.reasoning_tokens, reasoning_source=self.reasoning_source,
        )


# --------------------------------------------------------------------------- migrations
def m001_initial(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE completions (
            key TEXT PRIMARY KEY,
            backend TEXT NOT NULL,
            identity TEXT NOT NULL,
            request TEXT NOT NULL,
            text TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL DEFAULT 0,
            completion_tokens INTEGER NOT NULL DEFAULT 0,
            latency_s REAL NOT NULL DEFAULT 0,
            attempts INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL
        )"""
    )


def m002_finish_reason_and_date_index(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE completions ADD COLUMN finish_reason TEXT NOT NULL DEFAULT ''")
    db.execute("CREATE INDEX completions_created_at ON completions (created_at)")


def m003_claims(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE claims (
            key TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            claimed_at REAL NOT NULL
        )"""
    )


def m004_reasoning(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE completions ADD COLUMN reasoning TEXT")
    db.execute("ALTER TABLE completions ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE completions ADD COLUMN reasoning_source TEXT NOT NULL DEFAULT ''")


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_initial, m002_finish_reason_and_date_index, m003_claims, m004_reasoning,
]


def migrate(db: sqlite3.Connection, migrations: Iterable[Callable[[sqlite3.Connection], None]] | None = None) -> list[str]:
    """Apply the migrations not yet recorded in ``_migrations`` (each in its own transaction; see
    :mod:`thoughtsource.sqlite_migrations`, the runner the annotation database uses too)."""
    return sqlite_migrations.migrate(db, MIGRATIONS if migrations is None else migrations, label="store")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y/%m/%d %H:%M:%S")


def default_path() -> Path:
    return home() / "completions.sqlite"


# --------------------------------------------------------------------------- the store
class CompletionStore:
    """Key → completion, in one SQLite file.  Use as a context manager or call :meth:`close`."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.owner = uuid.uuid4().hex  # this store object's claims
        self.host = socket.gethostname()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # autocommit mode: transactions are explicit (one per put, one per migration)
            self.db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False)
            self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            mode = enable_wal(self.db, BUSY_TIMEOUT_MS / 1000)
            if mode.lower() != "wal":
                raise StoreError(f"{self.path}: could not switch the store to WAL mode (got {mode!r})")
            self.db.execute("PRAGMA synchronous = NORMAL")
            migrate(self.db)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot open the completion store: {e}") from None

    # -- reading
    def get(self, key: str) -> StoredCompletion | None:
        return self.get_many([key]).get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, StoredCompletion]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, StoredCompletion] = {}
        for i in range(0, len(keys), 500):  # stay below SQLite's host-parameter limit
            chunk = keys[i : i + 500]
            rows = self.db.execute(
                "SELECT key, text, prompt_tokens, completion_tokens, finish_reason, latency_s, attempts, created_at, "
                f"reasoning, reasoning_tokens, reasoning_source FROM completions WHERE key IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            found.update((r[0], StoredCompletion(*r)) for r in rows)
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.db.execute("SELECT 1 FROM completions WHERE key = ?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def keys(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT key FROM completions")}

    # -- writing
    def put(self, key: str, backend: str, identity: dict[str, Any], request: Request, completion: Completion) -> StoredCompletion:
        """Write one completion and commit.  An existing row wins (the first completion of a key is kept)."""
        row = StoredCompletion.from_completion(key, completion)
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                self.db.execute(
                    "INSERT OR IGNORE INTO completions (key, backend, identity, request, text, prompt_tokens, completion_tokens, "
                    "finish_reason, latency_s, attempts, created_at, reasoning, reasoning_tokens, reasoning_source) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (key, backend, canonical_json(identity), canonical_json(request_payload(request)), row.text, row.prompt_tokens,
                     row.completion_tokens, row.finish_reason, row.latency_s, row.attempts, row.created_at, row.reasoning,
                     row.reasoning_tokens, row.reasoning_source),
                )
                self.db.execute("DELETE FROM claims WHERE key = ?", (key,))
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot write completion {key}: {e}") from None
        return self.get(key) or row

    # -- claims (several processes on one store; see the module docstring)
    def claim(self, keys: Iterable[str]) -> tuple[set[str], set[str]]:
        """Claim the keys that are neither stored nor claimed by a live owner, in one transaction.

        Returns ``(mine, done)``: the keys claimed for this store object (send them), and the keys
        already stored (read them).  The other keys are in flight elsewhere: call again later.
        """
        keys = list(dict.fromkeys(keys))
        mine: set[str] = set()
        done: set[str] = set()
        now = time.time()
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                for i in range(0, len(keys), 500):
                    chunk = keys[i : i + 500]
                    marks = ",".join("?" * len(chunk))
                    done.update(r[0] for r in self.db.execute(f"SELECT key FROM completions WHERE key IN ({marks})", chunk))
                    held = {r[0]: r[1:] for r in self.db.execute(
                        f"SELECT key, owner, host, pid, claimed_at FROM claims WHERE key IN ({marks})", chunk)}
                    for key in chunk:
                        if key in done:
                            continue
                        claim = held.get(key)
                        if claim is not None and claim[0] != self.owner and not self._stale(*claim[1:], now=now):
                            continue
                        self.db.execute(
                            "INSERT OR REPLACE INTO claims (key, owner, host, pid, claimed_at) VALUES (?, ?, ?, ?, ?)",
                            (key, self.owner, self.host, os.getpid(), now),
                        )
                        mine.add(key)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot claim keys: {e}") from None
        return mine, done

    def release(self, keys: Iterable[str]) -> None:
        """Give up this store object's claims (the request failed: another process may try)."""
        keys = list(keys)
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                self.db.executemany("DELETE FROM claims WHERE key = ? AND owner = ?", [(k, self.owner) for k in keys])
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path}: cannot release claims: {e}") from None

    def _stale(self, host: str, pid: int, claimed_at: float, *, now: float) -> bool:
        if now - claimed_at > CLAIM_LEASE_S:
            return True
        if host != self.host:
            return False
        if pid == os.getpid():  # another store object of this process (closed or not): not ours to wait for
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def stats(self) -> dict[str, Any]:
        n, p, c, lat = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0), COALESCE(SUM(latency_s),0) FROM completions"
        ).fetchone()
        return {"completions": n, "prompt_tokens": p, "completion_tokens": c, "latency_s": lat}

    def stats_by_model(self) -> list[dict[str, Any]]:
        """Per backend and model: completions, tokens, first and last time one was stored."""
        rows = self.db.execute(
            "SELECT backend, json_extract(identity, '$.model'), COUNT(*), COALESCE(SUM(prompt_tokens),0), "
            "COALESCE(SUM(completion_tokens),0), MIN(created_at), MAX(created_at) FROM completions "
            "GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2"
        ).fetchall()
        return [{"backend": b, "model": m, "completions": n, "prompt_tokens": p, "completion_tokens": c, "first": f, "last": la}
                for b, m, n, p, c, f, la in rows]

    def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        """The ``limit`` completions stored last, newest first: key, time, backend, model, prompt, text, tokens."""
        rows = self.db.execute(
            "SELECT key, created_at, backend, json_extract(identity, '$.model'), request, text, prompt_tokens, "
            "completion_tokens, finish_reason FROM completions ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (limit,),
        ).fetchall()
        out = []
        for key, created, backend, model, request, text, p, c, finish in rows:
            try:
                req = json.loads(request)
            except ValueError:
                req = {}
            prompt = req.get("prompt") if isinstance(req, dict) else None
            if prompt is None and isinstance(req, dict) and req.get("messages"):
                prompt = str(req["messages"][-1].get("content", ""))
            out.append({"key": key, "created_at": created, "backend": backend, "model": model, "prompt": prompt or "",
                        "text": text, "prompt_tokens": p, "completion_tokens": c, "finish_reason": finish})
        return out

    def clear(self) -> int:
        """Delete every completion (and claim); returns how many completions there were."""
        with self.db:
            n = self.db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
            self.db.execute("DELETE FROM completions")
            self.db.execute("DELETE FROM claims")
        self.db.execute("VACUUM")
        return n

    def close(self) -> None:
        """Release this object's remaining claims and close the connection."""
        try:
            with self.db:
                self.db.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))
        except sqlite3.DatabaseError as e:  # the claims go stale anyway
            log.debug("%s: claims not released on close: %s", self.path, e)
        self.db.close()

    def __enter__(self) -> CompletionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["MIGRATIONS", "CompletionStore", "StoredCompletion", "completion_key", "default_path", "migrate", "request_payload"]


class NoStore:
    """A store that keeps nothing, for a caller whose store is off: every key is missing, and claimed at once."""

    def get_many(self, keys: Iterable[str]) -> dict[str, StoredCompletion]:
        return {}

    def claim(self, keys: Iterable[str]) -> tuple[set[str], set[str]]:
        return set(keys), set()

    def release(self, keys: Iterable[str]) -> None:
        pass

    def put(self, key: str, backend: str, identity: dict[str, Any], request: Request, completion: Completion) -> StoredCompletion:
        return StoredCompletion.from_completion(key, completion)


def share_completions(source: Path, target_dir: Path) -> int:
    """Copy every completion of the store ``source`` into ``target_dir``'s ``completions.sqlite``, keeping what is there.

    A completion's key hashes the weights, the prompt and the decoding options, so a copied row is only ever read for
    the identical request: iteration 0 of STaR arms that share a base, prompts and greedy decoding is computed once, not
    once an arm.  A missing ``source`` adds nothing.  Returns the rows added."""
    if not source.is_file():
        return 0
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / "completions.sqlite"
    if not target.exists():
        with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
            src.backup(dst)
            return int(dst.execute("SELECT count(*) FROM completions").fetchone()[0])
    with closing(sqlite3.connect(target, timeout=60)) as dst, dst:
        before = dst.total_changes
        dst.execute("ATTACH DATABASE ? AS shared", (str(source),))
        cols = ", ".join(r[1] for r in dst.execute("PRAGMA main.table_info(completions)"))
        dst.execute(f"INSERT OR IGNORE INTO completions ({cols}) SELECT {cols} FROM shared.completions")
        return dst.total_changes - before
