"""Messages shown after a redirect (POST → redirect → GET), addressed by server-issued ids.

The admin pages used to show any text passed as ``?notice=`` or ``?error=``: escaped, but a link could make the
page say anything ("your password expired, mail it to …").  Now a handler stores its message here and redirects
to ``?msg=<id>``; the id is random, belongs to the user it was made for, and unknown ids show nothing.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict

from .db import User

KEEP = 2000  # messages kept (the oldest are dropped): a reload shows the message again for a while


class Notices:
    """In memory, per process, like the login throttle."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._items: OrderedDict[str, tuple[int, str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, user: User, notice: str = "", error: str = "") -> str:
        """Store a notice or an error for ``user``; returns its id for ``?msg=``."""
        key = secrets.token_urlsafe(12)
        with self._lock:
            self._items[key] = (user.id, notice, error)
            while len(self._items) > self.keep:
                self._items.popitem(last=False)
        return key

    def get(self, user: User, key: str) -> tuple[str, str]:
        """(notice, error) of message ``key`` if it was made for ``user``; ("", "") otherwise."""
        with self._lock:
            found = self._items.get(key)
        if found is None or found[0] != user.id:
            return "", ""
        return found[1], found[2]
