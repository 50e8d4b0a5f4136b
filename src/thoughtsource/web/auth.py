"""Passwords, sessions, CSRF tokens and the role policy of the annotator.

* Passwords: argon2id via ``argon2-cffi`` (its RFC 9106 defaults).  Verifications run in their own small
  thread pool (``VERIFY_CONCURRENCY`` threads, at most ``MAX_WAITING_LOGINS`` queued), never on the request
  workers, so a burst of logins neither exhausts memory (64 MiB each) nor stalls annotation saves.
* Login throttle: an attempt is *reserved* (atomically, under a lock) in three buckets before the password is
  checked: per (name, client), per client and per name; a success releases it.  See :class:`LoginThrottle`.
* Sessions: a random 256-bit token, kept server-side as its sha256 in the ``sessions`` table (so a
  log-out or password change revokes it) and sent to the browser signed with the app's secret key
  (``itsdangerous``) in an HttpOnly, SameSite=Lax cookie.
* CSRF: the token of a session is HMAC(secret, "csrf:" + session token): one per session, nothing to
  store.  Every POST/PUT/DELETE must carry it, in the ``X-CSRF-Token`` header (fetch) or the
  ``csrf_token`` form field (HTML forms).  The login form uses a pre-session nonce cookie the same way.
* Secret key: 32 random bytes generated on first start into ``paths.home()/web_secret.key`` (mode
  0600); never in code, never logged.
* API tokens: random, stored as sha256, sent as ``Authorization: Bearer``; they authenticate GET requests
  only (scripted export), never a write.
* Policy: one function per action; annotators read and change only their own annotations, viewers read
  everyone's and change nothing, admins read everyone's, see the admin pages and adjudicate.  Nobody
  changes another person's annotations.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import hashlib
import hmac
import logging
import os
import secrets
import stat
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..errors import AuthError
from .db import AnnotationDB, AnnotationRow, User, normalize_name

log = logging.getLogger(__name__)
T = TypeVar("T")

SECRET_FILE = "web_secret.key"
SESSION_COOKIE = "ts_session"
LOGIN_COOKIE = "ts_login"
DEVICE_COOKIE = "ts_device"
DEVICE_DAYS = 180
TOKEN_PREFIX = "tsk_"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
SESSION_DAYS = 7
SESSION_ENDED = "your session has ended; log in again"
# argon2 verifications at once: at most half the cores (1 on a 2-core machine), so hashing never takes
# every core from the request workers; at most 4 (64 MiB each).
VERIFY_CONCURRENCY = max(1, min(4, (os.cpu_count() or 2) // 2))
MAX_WAITING_LOGINS = 256
MAX_WAITING_PER_CLIENT = 64
MAX_WAITING_PER_NAME = 64
MAX_WAITING_PER_TRUSTED_NAME = 4  # checks from browsers with the name's device cookie (PasswordQueue)
TRUSTED_FIRST = 2  # such checks of one name run before all others while fewer than this have run in a row
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
HASH_NICE = 10  # how much lower the password threads run than the request workers (Linux)


def _lower_priority() -> None:
    """Run this password thread (and the 4 lane threads libargon2 starts from it, which inherit it) at a lower
    CPU priority, so that a burst of log-ins yields the cores to annotation saves.  Linux only: there the nice
    value is per thread; elsewhere ``setpriority`` on a thread id is not defined, so nothing is done."""
    import sys

    if sys.platform == "linux":
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + HASH_NICE)
        except OSError as e:
            log.debug("could not lower the priority of the password thread: %s", e)


_verify_pool = ThreadPoolExecutor(max_workers=VERIFY_CONCURRENCY, thread_name_prefix="ts-argon2", initializer=_lower_priority)


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


class AccountDisabled(AuthError):
    """The password was right but the account is disabled (HTTP 403)."""


def authenticate(db: AnnotationDB, name: str, password: str) -> User:
    """The user with this name and password; :class:`NotAuthenticated` otherwise (same message either way).

    Blocking (one argon2 verification): call :func:`authenticate_async` from request handlers.
    """
    from argon2.exceptions import InvalidHashError, VerificationError

    found = db.user_credentials(name)
    if not _DUMMY_HASH:
        _DUMMY_HASH.append(_ph().hash(secrets.token_hex(16)))
    stored = found[1] if found else _DUMMY_HASH[0]
    try:
        ok = _ph().verify(stored, password)
    except (VerificationError, InvalidHashError):
        ok = False
    if not ok or found is None:
        raise NotAuthenticated("wrong user name or password")
    if found[0].disabled:
        raise AccountDisabled("this account is disabled; ask an admin")
    return found[0]


class ServerBusy(AuthError):
    """Too many log-ins waiting for a password check (HTTP 503)."""


@dataclass(eq=False)
class _Waiting:
    client: str
    name: str
    done: Future[Any]
    check: Callable[[], Any]
    trusted: bool = False


class PasswordQueue:
    """Password checks waiting for the password pool; the next to run is the one whose client address and target
    user name have had the fewest checks run while they had checks waiting (ties: first come, first served).

    Before issue 23 the checks waited in one FIFO: 40 wrong passwords queued from one address delayed another user's
    right one by 11.6 s.  Issue 23 made the queues per client address, taken in turn; but then 40 addresses each
    guessing one name were 40 clients, and another user waited for one check of each: 20-22 s.  Now an address that
    queues many checks and a name that many addresses guess both fall behind, so another user's check (a new
    address and a new name: no checks run for either) is the next to run, in both attacks.  The price: an attacker
    with many addresses *and* many names (each address guessing its own name) is still as many "clients" as it has
    pairs, and another user waits for about one check per pair (bounded by ``total``).

    Bounded: ``per_client`` waiting checks per address (then 503 for that address only; high enough for a class
    behind one NAT address), ``per_name`` per target name (then 503 for log-ins as that name from browsers without
    the user's device cookie, until the queue drains: the price of not letting one guessed name fill the queue),
    and ``total`` in all.  A check whose request went away before its turn is skipped.

    A *trusted* check (the browser holds the user's signed device cookie, ``Sessions.device_trusted``: it logged in
    as that name before) is counted apart from the name's other checks, not against ``per_name`` or ``total``, and
    runs before every untrusted one (while fewer than ``TRUSTED_FIRST`` of its name have run in a row: an account
    holder who keeps logging in does not starve the others; then it takes its turn like them), so 64 or more wrong checks waiting for a name no longer turn its owner away (issue 42: 47 of 48 of her log-ins got
    503 over 120 s).  Its own bound: ``per_trusted_name`` waiting per name, and ``per_client``.  A cookie is signed
    for one name by this server, so only someone who logged in as that name (who knows its password) has one.
    """

    def __init__(self, workers: int = VERIFY_CONCURRENCY, per_client: int = MAX_WAITING_PER_CLIENT,
                 total: int = MAX_WAITING_LOGINS, per_name: int = MAX_WAITING_PER_NAME,
                 per_trusted_name: int = MAX_WAITING_PER_TRUSTED_NAME) -> None:
        self.workers = workers
        self.per_client = per_client
        self.per_name = per_name
        self.per_trusted_name = per_trusted_name
        self.total = total
        self._lock = threading.Lock()
        self._queue: list[_Waiting] = []  # in arrival order
        self._client_active: Counter[str] = Counter()  # checks waiting or running
        self._name_active: Counter[str] = Counter()
        self._client_served: Counter[str] = Counter()  # checks run while the client had checks waiting
        self._name_served: Counter[str] = Counter()
        self._running = 0

    @property
    def waiting(self) -> int:
        """Checks queued and not started."""
        return len(self._queue)

    def submit(self, client: str, check: Callable[[], T], name: str = "", trusted: bool = False) -> Future[T]:
        """Queue ``check`` of a log-in as ``name`` from ``client`` (``trusted``: with the name's device cookie);
        :class:`ServerBusy` when that client's or that name's queue, or all queues, are full."""
        done: Future[T] = Future()
        name = normalize_name(name)
        with self._lock:
            untrusted = [w for w in self._queue if not w.trusted]
            if not trusted and len(untrusted) >= self.total:
                raise ServerBusy("too many log-ins at once; try again in a few seconds")
            if sum(1 for w in self._queue if w.client == client) >= self.per_client:  # (at most `total`: cheap)
                raise ServerBusy("too many log-ins from this address at once; try again in a few seconds")
            if trusted:  # counted apart: the name's flood of untrusted checks neither bounds nor delays it
                name = "\0trusted:" + name
            if sum(1 for w in self._queue if w.name == name) >= (self.per_trusted_name if trusted else self.per_name):
                raise ServerBusy("too many log-ins for this user name at once; try again in a few seconds")
            self._queue.append(_Waiting(client, name, done, check, trusted))
            self._client_active[client] += 1
            self._name_active[name] += 1
        self._dispatch()
        return done

    def _take(self) -> _Waiting:
        """The next check (under the lock, the queue not empty): a trusted one first while its name has had fewer
        than ``TRUSTED_FIRST`` trusted checks run in a row (so an account holder who keeps logging in cannot starve
        the others), then the fewest checks run for its client and its name."""
        def rank(w: _Waiting) -> tuple[bool, int]:
            first = w.trusted and self._name_served[w.name] < TRUSTED_FIRST
            return (not first, self._client_served[w.client] + self._name_served[w.name])

        k = min(range(len(self._queue)), key=lambda i: rank(self._queue[i]))
        w = self._queue.pop(k)
        self._client_served[w.client] += 1
        self._name_served[w.name] += 1
        return w

    def _finished(self, w: _Waiting) -> None:
        """(Under the lock.)  A client or name with nothing waiting or running is forgotten: the counters stay as
        small as the queue, and one that comes back later starts again at 0."""
        for active, served, key in ((self._client_active, self._client_served, w.client),
                                    (self._name_active, self._name_served, w.name)):
            active[key] -= 1
            if not active[key]:
                del active[key]
                served.pop(key, None)

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                if self._running >= self.workers or not self._queue:
                    return
                w = self._take()
                if not w.done.set_running_or_notify_cancel():
                    self._finished(w)
                    continue  # the request went away
                self._running += 1
            _verify_pool.submit(self._run, w)

    def _run(self, w: _Waiting) -> None:
        try:
            w.done.set_result(w.check())
        except BaseException as e:  # handed to the waiting request
            w.done.set_exception(e)
        finally:
            with self._lock:
                self._running -= 1
                self._finished(w)
            self._dispatch()


password_queue = PasswordQueue()


async def authenticate_async(db: AnnotationDB, name: str, password: str, client: str = "unknown",
                             trusted: bool = False) -> User:
    """:func:`authenticate` on the password pool (``VERIFY_CONCURRENCY`` threads), off the request workers, queued
    per client address (:class:`PasswordQueue`; ``trusted``: the browser holds the name's device cookie)."""
    return await asyncio.wrap_future(password_queue.submit(client, lambda: authenticate(db, name, password), name, trusted))


class TooManyAttempts(AuthError):
    """Too many failed logins (HTTP 429)."""


@dataclass
class Ticket:
    """One reserved login attempt: the buckets it counts in."""

    keys: list[tuple[str, ...]]
    id: int = field(default=0)


class LoginThrottle:
    """Failed logins within ``window`` seconds, counted per (name, client), per client and per name.

    :meth:`reserve` is called *before* the password check and counts the attempt at once in every bucket
    (under one lock), so 40 simultaneous guesses cannot all pass a check made before any of them failed.
    A success releases the reservation and clears the (name, client) bucket; a failure leaves it counted; an
    attempt whose password was not checked (503) only gives its reservation back (:meth:`released`).

    * per (name, client): ``limit`` (10): guessing one name from one client;
    * per client: ``client_limit`` (100): guessing across many names from one client (high enough for a
      class of 60 behind one NAT address logging in at once: pending attempts count too);
    * per name: ``name_limit`` (100), from all clients together, for distributed guessing.  It is skipped for a
      client holding this user's signed device cookie (set at each successful log-in).  And a full per-name bucket
      stops only the clients that have been guessing this name: a client with fewer than ``fresh_limit`` (3)
      failures for it in the window may still try.  Before, 100 wrong tries from 10 addresses locked the real user
      out of every browser without the device cookie for 15 minutes; now each of those addresses is stopped by its
      own (name, client) bucket, and the real user on a new browser gets ``fresh_limit`` tries.  The price: past
      the per-name limit, every *new* address still gets ``fresh_limit`` guesses (an attacker needs real addresses
      for that, since the client address cannot be spoofed, see ``app.make_server``).
    """

    def __init__(self, limit: int = 10, window: float = 900.0, client_limit: int = 100, name_limit: int = 100,
                 fresh_limit: int = 3) -> None:
        self.limit = limit
        self.window = window
        self.client_limit = client_limit
        self.name_limit = name_limit
        self.fresh_limit = fresh_limit
        self._attempts: dict[tuple[str, ...], dict[int, float]] = {}
        self._lock = threading.Lock()
        self._next = 0

    def _recent(self, key: tuple[str, ...], now: float) -> dict[int, float]:
        got = {i: t for i, t in self._attempts.get(key, {}).items() if now - t < self.window}
        self._attempts[key] = got
        return got

    def reserve(self, name: str, client: str, trusted_device: bool = False) -> Ticket:
        """Count one attempt in every bucket, or raise :class:`TooManyAttempts` (counting nothing)."""
        name = normalize_name(name)
        buckets = [(("nc", name, client), self.limit), (("c", client), self.client_limit)]
        if not trusted_device:
            buckets.append((("n", name), self.name_limit))
        with self._lock:
            now = time.monotonic()
            if len(self._attempts) > 10_000:  # many distinct names or clients: forget the stale ones
                for key in [k for k, ts in self._attempts.items() if not ts or now - max(ts.values()) >= self.window]:
                    del self._attempts[key]
            for key, limit in buckets:
                if len(self._recent(key, now)) >= limit:
                    if key[0] == "n" and len(self._recent(buckets[0][0], now)) < self.fresh_limit:
                        continue  # the name is under attack, but not from this client: it may try a few times
                    what = "for this user" if key[0] != "c" else "from this address"
                    raise TooManyAttempts(f"too many failed logins {what}; try again in {int(self.window // 60)} minutes")
            self._next += 1
            for key, _ in buckets:
                self._attempts[key][self._next] = now
            return Ticket([k for k, _ in buckets], self._next)

    def succeeded(self, ticket: Ticket) -> None:
        """The right password: the reservation is released and the (name, client) bucket cleared."""
        with self._lock:
            self._release(ticket)
            self._attempts.pop(ticket.keys[0], None)

    def released(self, ticket: Ticket) -> None:
        """No password was checked (the server was busy, 503) or it was not a guess (a disabled account): only this
        attempt's reservation is released; every bucket keeps its failures.  (Before, a 503 cleared the (name,
        client) bucket as a success does, so an address that hit the queue limit got 19 checks instead of 10.)"""
        with self._lock:
            self._release(ticket)

    def _release(self, ticket: Ticket) -> None:
        for key in ticket.keys:
            self._attempts.get(key, {}).pop(ticket.id, None)

    def failed(self, ticket: Ticket) -> None:
        """The reserved attempt stays counted (nothing to do; here for symmetry and logging)."""


# --------------------------------------------------------------------------- sessions and CSRF
def bearer(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer …`` header (other schemes, e.g. a proxy's Basic auth, are not ours)."""
    if authorization and authorization[:7].lower() == "bearer ":
        return authorization[7:].strip() or None
    return None


class Sessions:
    """Signs session tokens into cookies, looks them up, and derives their CSRF tokens."""

    def __init__(self, db: AnnotationDB, secret: bytes) -> None:
        from itsdangerous import URLSafeTimedSerializer

        self.db = db
        self._secret = secret
        self._signer = URLSafeTimedSerializer(secret, salt="thoughtsource-session")
        self._login_signer = URLSafeTimedSerializer(secret, salt="thoughtsource-login")
        self._device_signer = URLSafeTimedSerializer(secret, salt="thoughtsource-device")

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

    # Device cookies: a browser that logged in as NAME before may keep trying NAME while strangers are throttled.
    def device_cookie(self, user: User) -> str:
        return self._device_signer.dumps(user.name)

    def device_trusted(self, cookie: str | None, name: str) -> bool:
        from itsdangerous import BadSignature

        if not cookie:
            return False
        try:
            return self._device_signer.loads(cookie, max_age=DEVICE_DAYS * 86400) == normalize_name(name)
        except BadSignature:
            return False

    # Read-only API tokens (scripted export).
    def create_api_token(self, user: User, label: str) -> tuple[int, str]:
        """(id, token); the token is shown once and only its sha256 is stored."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        return self.db.create_token(self._digest(token), user, label), token

    def api_user(self, authorization: str | None) -> User | None:
        token = bearer(authorization)
        return self.db.token_user(self._digest(token)) if token and token.startswith(TOKEN_PREFIX) else None

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


def require_writer(user: User) -> None:
    if not user.can_write:
        raise Forbidden("viewers cannot change annotations")


def visible_annotator(user: User, requested: str | None) -> str | None:
    """Whose annotations ``user`` may read: admins and viewers anyone's (None = all), annotators only their own."""
    if user.is_admin or user.role == "viewer":
        return requested
    if requested not in (None, user.name):
        raise Forbidden("annotators see only their own annotations")
    return user.name


def can_change(user: User, row: AnnotationRow) -> None:
    """Only the author of an annotation changes or deletes it (admins included)."""
    if row.annotator != user.name:
        raise Forbidden("you can change only your own annotations")
