"""Server state of the annotation database: the admin's switches (settings) and the accepted uploads."""

from __future__ import annotations

import json
from typing import Any

from .connection import Database
from .rows import now


class ServerState(Database):
    """Key → JSON settings the admin switches at run time, and the order in which uploads were accepted."""

    # ------------------------------------------------------------------ uploads
    def uploads(self) -> list[str]:
        """The names of the accepted uploads (in ``upload_dir``), in the order they were accepted."""
        with self.connect() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM uploads ORDER BY seq")]

    def record_upload(self, name: str) -> None:
        """``name`` was accepted (and renamed into ``upload_dir``): it is served after every earlier upload."""
        with self.connect(write=True) as conn:
            conn.execute("INSERT INTO uploads (name, accepted) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", (name, now()))

    def forget_upload(self, name: str) -> None:
        """``name`` was removed from ``upload_dir``: it leaves the upload order."""
        with self.connect(write=True) as conn:
            conn.execute("DELETE FROM uploads WHERE name = ?", (name,))

    # ------------------------------------------------------------------ settings
    def setting(self, key: str, default: Any = None) -> Any:
        with self.connect() as conn:
            r = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return json.loads(r[0]) if r else default

    def set_setting(self, key: str, value: Any) -> None:
        with self.connect(write=True) as conn:
            conn.execute("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                         (key, json.dumps(value)))
