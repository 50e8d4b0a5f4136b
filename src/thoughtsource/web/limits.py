"""Request body limits, enforced in ASGI middleware before any handler or FastAPI's body parsing reads a byte.

FastAPI reads and decodes a declared body (JSON, a form) before the dependencies that check the session and the CSRF
token run, so one anonymous 200 MiB ``PUT /api/annotation`` cost ~570 MiB of server memory before its 401.  Here:

* a write (POST/PUT/PATCH/DELETE) with a body needs a session, except the log-in form: without one it is refused
  (401) from its headers alone; a write with an API token is refused (403: tokens are read-only);
* each route has a byte limit (:data:`RULES`; admins get more on the admin routes, e.g. an upload's 512 MiB);
  a declared ``Content-Length`` above it is refused (413) at once, and a body sent without one (chunked) is
  counted as it streams and refused as soon as it passes the limit.

Refusals close the connection (``Connection: close``), so the unread rest of a body is never read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .auth import SESSION_ENDED, bearer
from .db import User

KIB = 1024
MIB = 1024 * KIB
MAX_UPLOAD_BYTES = 512 * MIB
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


@dataclass(frozen=True)
class BodyRule:
    """How large a route's request body may be: ``limit`` bytes, ``admin_limit`` for admins (None: the same);
    ``anonymous``: may be sent without a session (only the log-in form)."""

    limit: int
    admin_limit: int | None = None
    anonymous: bool = False

    def for_user(self, user: User | None) -> int:
        return self.admin_limit if user is not None and user.is_admin and self.admin_limit else self.limit


DEFAULT_RULE = BodyRule(64 * KIB)
RULES: dict[str, BodyRule] = {
    "/login": BodyRule(16 * KIB, anonymous=True),
    "/api/annotation": BodyRule(256 * KIB),  # a 10,000-character comment, every character \u-escaped
    "/api/steps": BodyRule(16 * KIB),
    "/adjudicate": BodyRule(64 * KIB, admin_limit=2 * MIB),  # a step-labels value (200,000 characters)
    "/adjudicate/steps": BodyRule(64 * KIB, admin_limit=2 * MIB),
    "/admin/upload": BodyRule(64 * KIB, admin_limit=MAX_UPLOAD_BYTES + MIB),  # the file and the multipart framing
}


class BodyTooLarge(HTTPException):
    """The body passed its route's limit while streaming (an HTTPException, so FastAPI's body parsing re-raises it
    and the app's handler answers 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body too large: at most {limit} bytes here")


class BodyLimits:
    """ASGI middleware: see the module docstring.  ``session_user`` finds the user of a request's session cookie
    (None without a valid one); ``error`` renders a refusal as the app renders its other errors."""

    def __init__(self, app: ASGIApp, session_user: Callable[[Request], Awaitable[User | None]],
                 error: Callable[[Request, int, str], Response]) -> None:
        self.app = app
        self.session_user = session_user
        self.error = error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        try:
            declared = int(headers.get("content-length", "0"))
        except ValueError:
            declared = -1
        if declared < 0:
            await self._refuse(scope, send, 400, "invalid Content-Length")
            return
        if not chunked and declared == 0:
            await self.app(scope, receive, send)
            return
        rule = RULES.get(scope["path"], DEFAULT_RULE)
        request = Request(scope)
        user = None
        if scope["method"] not in SAFE_METHODS and not rule.anonymous:
            if bearer(headers.get("authorization")) and "cookie" not in headers:
                await self._refuse(scope, send, 403, "API tokens are read-only")
                return
            user = await self.session_user(request)
            if user is None:
                await self._refuse(scope, send, 401, SESSION_ENDED)
                return
        limit = rule.for_user(user)
        if declared > limit:
            await self._refuse(scope, send, 413, BodyTooLarge(limit).detail)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge as e:  # raised where no handler turned it into a response
            if started:
                raise
            await self._refuse(scope, send, 413, str(e.detail))

    async def _refuse(self, scope: Scope, send: Send, status: int, detail: str) -> None:
        response = self.error(Request(scope), status, detail)
        response.headers["Connection"] = "close"

        async def nothing() -> Any:
            return {"type": "http.disconnect"}

        await response(scope, nothing, send)
