"""Passwords, sessions, CSRF tokens and the role policy of the annotator.

* Passwords: argon2id via ``argon2-cffi`` (its RFC 9106 defaults); at most ``VERIFY_CONCURRENCY``
  verifications run at once, so a burst of logins cannot exhaust memory (64 MiB each).
* Sessions: a random 256-bit token, kept server-side as its sha256 in the ``sessions`` table (so a
  log-out or password change revokes it) and sent to the browser signed with the app's secret key
  (``itsdangerous``) in an HttpOnly, SameSite=Lax cookie.
* CSRF: the token of a session is HMAC(secret, "csrf:" + session token): one per session, nothing to
  store.  Every POST/PUT/DELETE must carry it, in the ``X-CSRF-Token`` header (fetch) or the
  ``csrf_token`` form field (HTML forms).  The login form uses a pre-session nonce cookie the same way.
* Secret key: 32 random bytes generated on first start into ``paths.home()/web_secret.key`` (mode
  0600); never in code, never logged.
* Policy: one function per action; annotators read and change only their own annotations, admins read
  everyone's and see the agreement page.  Nobody changes another person's annotations.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import logging
import os
import secrets
import stat
import threading
from pathlib import Path

from ..errors import AuthError
from .db import AnnotationDB, AnnotationRow, User

log = logging.getLogger(__name__)

SECRET_FILE = "web_secret.key"
SESSION_COOKIE = "ts_session"
LOGIN_COOKIE = "ts_login"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
SESSION_DAYS = 7
VERIFY_CONCURRENCY = 4
MIN_PASSWORD_LENGTH = 8


class NotAuthenticated(AuthError):
    """No valid session (HTTP 401; pages redirect to the login form)."""


class Forbidden(AuthError):
    """Logged in, but not allowed (HTTP 403)."""


# --------------------------------------------------------------------------- secret key
def load_or_create_secret(directory: Path) -> bytes:
    """The app's secret key from ``directory/web_secret.key``; created (mode 0600) on first use."""
    path = directory / SECRET_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_secret(path)
    key = secrets.token_bytes(32)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.hex() + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    log.info("generated a new secret key in %s", path)
    return key


def _read_secret(path: Path) -> bytes:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        log.warning("%s was readable by others (mode %o); setting it to 0600", path, mode)
        os.chmod(path, 0o600)
    try:
        key = bytes.fromhex(path.read_text().strip())
    except ValueError:
        key = b""
    if len(key) < 32:
        raise AuthError(f"{path}: the secret key is not 32+ hex-encoded bytes; delete the file to generate a new one")
    return key


# --------------------------------------------------------------------------- passwords
_hasher_lock = threading.Lock()
_hasher = None
_verify_slots = threading.BoundedSemaphore(VERIFY_CONCURRENCY)


def _ph():
    global _hasher
    with _hasher_lock:
        if _hasher is None:
            from argon2 import PasswordHasher

            _hasher = PasswordHasher()
        return _hasher


def hash_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AuthError(f"the password must have at least {MIN_PASSWORD_LENGTH} characters")
    return _ph().hash(password)


# A real hash to verify against when the user does not exist, so that the response time does not
# tell which user names exist.
_DUMMY_HASH: list[str] = []


def authenticate(db: AnnotationDB, name: str, password: str) -> User:
    """The user with this name and password; :class:`NotAuthenticated` otherwise (same message either way)."""
    from argon2.exceptions import InvalidHashError, VerificationError

    found = db.user_credentials(name)
    if not _DUMMY_HASH:
        _DUMMY_HASH.append(_ph().hash(secrets.token_hex(16)))
    stored = found[1] if found else _DUMMY_HASH[0]
    with _verify_slots:
        try:
            ok = _ph().verify(stored, password)
        except (VerificationError, InvalidHashError):
            ok = False
    if not ok or found is None:
        raise NotAuthenticated("wrong user name or password")
    return found[0]


class LoginThrottle:
    """At most ``limit`` failed logins per user name within ``window`` seconds (in memory, per process)."""

    def __init__(self, limit: int = 10, window: float = 900.0) -> None:
        self.limit = limit
        self.window = window
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, name: str, now: float) -> list[float]:
        times = [t for t in self._failures.get(name, []) if now - t < self.window]
        self._failures[name] = times
        return times

    def check(self, name: str) -> None:
        import time

        with self._lock:
            if len(self._recent(name, time.monotonic())) >= self.limit:
                raise TooManyAttempts(f"too many failed logins for this user; try again in {int(self.window // 60)} minutes")

    def failed(self, name: str) -> None:
        import time

        with self._lock:
            now = time.monotonic()
            if len(self._failures) > 10_000:  # many distinct names: forget the stale ones
                for key in [k for k, ts in self._failures.items() if not ts or now - ts[-1] >= self.window]:
                    del self._failures[key]
            self._recent(name, now).append(now)

    def succeeded(self, name: str) -> None:
        with self._lock:
            self._failures.pop(name, None)


class TooManyAttempts(AuthError):
    """Too many failed logins for one user name (HTTP 429)."""


# --------------------------------------------------------------------------- sessions and CSRF
class Sessions:
    """Signs session tokens into cookies, looks them up, and derives their CSRF tokens."""

    def __init__(self, db: AnnotationDB, secret: bytes) -> None:
        from itsdangerous import URLSafeTimedSerializer

        self.db = db
        self._secret = secret
        self._signer = URLSafeTimedSerializer(secret, salt="thoughtsource-session")
        self._login_signer = URLSafeTimedSerializer(secret, salt="thoughtsource-login")

    @staticmethod
    def _digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def start(self, user: User) -> str:
        """A new session for ``user``; returns the cookie value."""
        token = secrets.token_urlsafe(32)
        expires = (_dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(days=SESSION_DAYS)).isoformat(timespec="seconds")
        self.db.create_session(self._digest(token), user, expires)
        return self._signer.dumps(token)

    def token(self, cookie: str | None) -> str | None:
        """The session token inside a signed cookie value; None when absent, forged or too old."""
        from itsdangerous import BadSignature

        if not cookie:
            return None
        try:
            token = self._signer.loads(cookie, max_age=SESSION_DAYS * 86400)
        except BadSignature:
            return None
        return token if isinstance(token, str) else None

    def user(self, token: str | None) -> User | None:
        return self.db.session_user(self._digest(token)) if token else None

    def end(self, token: str | None) -> None:
        if token:
            self.db.delete_session(self._digest(token))

    def csrf_token(self, token: str) -> str:
        return hmac.new(self._secret, b"csrf:" + token.encode(), hashlib.sha256).hexdigest()

    def check_csrf(self, token: str | None, sent: str | None) -> None:
        if not token or not sent or not hmac.compare_digest(self.csrf_token(token), sent):
            raise Forbidden("missing or wrong CSRF token")

    # The login form has no session yet: a signed nonce cookie plays its part.
    def login_nonce(self) -> tuple[str, str]:
        """(cookie value, form token) for a fresh login form."""
        nonce = secrets.token_urlsafe(16)
        return self._login_signer.dumps(nonce), self.csrf_token("login:" + nonce)

    def check_login_csrf(self, cookie: str | None, sent: str | None) -> None:
        from itsdangerous import BadSignature

        try:
            nonce = self._login_signer.loads(cookie or "", max_age=3600)
        except BadSignature:
            raise Forbidden("missing or expired login form token; reload the login page") from None
        self.check_csrf("login:" + str(nonce), sent)


# --------------------------------------------------------------------------- policy
def require_admin(user: User) -> None:
    if not user.is_admin:
        raise Forbidden("only admins may do this")


def visible_annotator(user: User, requested: str | None) -> str | None:
    """Whose annotations ``user`` may read: admins anyone's (None = all), annotators only their own."""
    if user.is_admin:
        return requested
    if requested not in (None, user.name):
        raise Forbidden("annotators see only their own annotations")
    return user.name


def can_change(user: User, row: AnnotationRow) -> None:
    """Only the author of an annotation changes or deletes it (admins included)."""
    if row.annotator != user.name:
        raise Forbidden("you can change only your own annotations")
