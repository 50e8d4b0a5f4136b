"""Accounts, log-in sessions and API tokens of the annotation database."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ...errors import StoreError
from .connection import Database
from .rows import MAX_NAME, ROLES, User, _user, invisible, name_skeleton, normalize_name, now


class Users(Database):
    """Accounts (roles, disabled, removed), sessions and read-only API tokens."""

    # ------------------------------------------------------------------ users
    def add_user(self, name: str, password_hash: str, role: str) -> User:
        name = normalize_name(name)
        if not name or len(name) > MAX_NAME:
            raise StoreError(f"a user name has 1 to {MAX_NAME} characters")
        if role not in ROLES:
            raise StoreError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
        if any(invisible(ch) for ch in name):
            raise StoreError(f"{name!r}: a user name cannot contain invisible or control characters")
        try:
            with self.connect(write=True) as conn:
                skeleton = name_skeleton(name)
                for (other,) in conn.execute("SELECT name FROM users WHERE name != ?", (name,)):
                    if name_skeleton(other) == skeleton:
                        raise StoreError(f"{self.path}: {name!r} looks like the existing user {other!r}; choose another name")
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

    def _changed_user(self, conn: sqlite3.Connection, name: str, acting: User | None,
                      loses_admin: Callable[[sqlite3.Row], bool] | None) -> sqlite3.Row:
        """The active user ``name`` about to be changed, in the change's transaction; with ``acting``, the admin-rights
        checks of :meth:`_check_admin_change` first."""
        target = conn.execute("SELECT * FROM users WHERE name = ? AND removed IS NULL", (name,)).fetchone()
        if target is None:
            raise StoreError(f"{self.path}: no user named {name!r}")
        if acting is not None:
            self._check_admin_change(conn, acting, name, loses_admin is not None and loses_admin(target))
        return target

    def _update_user(self, name: str, sql: str, args: tuple[Any, ...], end_sessions: bool,
                     acting: User | None = None, loses_admin: Callable[[sqlite3.Row], bool] | None = None) -> None:
        name = normalize_name(name)
        with self.connect(write=True) as conn:
            target = self._changed_user(conn, name, acting, loses_admin)
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
            target = self._changed_user(conn, name, acting, lambda u: u["role"] == "admin" and not u["disabled"])
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
