"""``create_app(settings)``: the FastAPI app of the viewer and annotator.

Errors are mapped to HTTP in one place (here): NotFound → 404, NotAuthenticated → 401 (pages
redirect to the login form), Forbidden → 403, DataError → 422, as ``{"detail": ...}`` for the API
and a small error page otherwise; never a stack trace.  Every response carries a strict
Content-Security-Policy (only the app's own script and style sheet), so even a rendering bug cannot
run injected script.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from .. import paths
from ..errors import DataError, ThoughtSourceError
from .auth import SESSION_COOKIE, Forbidden, LoginThrottle, NotAuthenticated, Sessions, bearer, load_or_create_secret
from .data import NotFound, ServedData
from .db import AnnotationDB, User
from .limits import BodyLimits, BodyTooLarge
from .notices import Notices
from .similarity import DEFAULT_THRESHOLD

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
DEFAULT_LABELS = ["Incorrect reasoning", "Insufficient knowledge", "Incorrect reading comprehension", "Too verbose"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


class ServeSettings(BaseModel):
    """Settings of ``thoughtsource serve``."""

    model_config = ConfigDict(extra="forbid")

    files: list[Path] = Field(description="ThoughtSource JSON/JSONL/Parquet files to serve (merged).")
    db: Path = Field(default_factory=lambda: paths.home() / "annotations.sqlite", description="Annotation database (SQLite).")
    labels: list[str] = Field(default_factory=lambda: list(DEFAULT_LABELS), description="Label set, toggled by keys 1-9.")
    page_size: int = Field(25, ge=1, le=500, description="Samples per list page.")
    secure_cookies: bool = Field(False, description="Mark cookies Secure (set when served over HTTPS).")
    secret_dir: Path | None = Field(None, description="Where the secret key lives (default: paths.home()).")
    blind: bool = Field(False, description="Blind review for the whole server: annotators see no model, trigger or "
                                           "correctness, and each sees a sample's CoTs in their own shuffled order.")
    similarity_threshold: float = Field(DEFAULT_THRESHOLD, ge=0.05, le=1.0,
                                        description="Initial threshold of the similar-sentence highlighting.")
    upload_dir: Path | None = Field(None, description="Where files uploaded by admins are kept and served from on the "
                                                      "next start (default: an 'uploads' folder next to the database).")

    def model_post_init(self, __context: Any) -> None:
        if self.upload_dir is None:
            self.upload_dir = self.db.parent / "uploads"


def create_app(settings: ServeSettings, data: ServedData | None = None) -> FastAPI:
    from . import admin, routes

    if len(settings.labels) > 9:
        raise DataError(f"at most 9 labels (keys 1-9), got {len(settings.labels)}", field="labels")
    if len(set(settings.labels)) != len(settings.labels) or any(k in ("comment", "preferred", "reviewed") for k in settings.labels):
        raise DataError("labels must be distinct and not 'comment', 'preferred' or 'reviewed'", field="labels")
    db = AnnotationDB(settings.db)
    secret = load_or_create_secret(settings.secret_dir or paths.home())
    app = FastAPI(title="thoughtsource annotator", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.settings = settings
    app.state.db = db
    if settings.upload_dir and settings.upload_dir.is_dir():
        import shutil

        for tmp in settings.upload_dir.glob(".upload-*"):  # of an upload whose process ended before it cleaned up
            shutil.rmtree(tmp, ignore_errors=True)
    if data is None:
        uploaded = sorted(p for p in settings.upload_dir.glob("*") if p.suffix in (".json", ".jsonl", ".parquet")) \
            if settings.upload_dir and settings.upload_dir.is_dir() else []
        data = ServedData.load([*settings.files, *uploaded])
    app.state.data = data
    app.state.new_tokens = {}
    app.state.notices = Notices()
    app.state.upload_lock = asyncio.Lock()  # one upload at a time: each builds on the data the last one left
    app.state.stopping = threading.Event()  # set on SIGTERM/SIGINT (Server below): long work stops
    app.state.sessions = Sessions(db, secret)
    app.state.sim_cache = {}
    app.state.throttle = LoginThrottle()
    import jinja2

    # autoescape=True for every template (not only *.html): nothing from the data is ever marked safe.
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True)
    templates = Jinja2Templates(env=env)
    templates.env.filters["urlpart"] = lambda s: quote(str(s), safe="")
    app.state.templates = templates

    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    app.include_router(routes.pages)
    app.include_router(routes.api)
    app.include_router(admin.admin)

    def wants_json(request: Request) -> bool:
        return request.url.path.startswith("/api/") or "application/json" in request.headers.get("accept", "")

    def error(request: Request, status: int, detail: str) -> Response:
        if wants_json(request):
            return JSONResponse({"detail": detail}, status_code=status)
        return templates.TemplateResponse(request, "error.html", {"status": status, "detail": detail, "user": None},
                                          status_code=status)

    async def session_user(request: Request) -> User | None:
        sessions: Sessions = app.state.sessions
        token = sessions.token(request.cookies.get(SESSION_COOKIE))
        return await run_in_threadpool(sessions.user, token) if token else None

    # added before security_headers, so inside it: its refusals carry the security headers too
    app.add_middleware(BodyLimits, session_user=session_user, error=error)

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers.setdefault("Cache-Control", "no-store")
        return response

    @app.exception_handler(NotAuthenticated)
    async def _unauth(request: Request, exc: NotAuthenticated) -> Response:
        if wants_json(request) or request.method != "GET" or bearer(request.headers.get("authorization")):
            return error(request, 401, str(exc))  # (an API token is a script: no redirect to a form)
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)

    @app.exception_handler(Forbidden)
    async def _forbidden(request: Request, exc: Forbidden) -> Response:
        return error(request, 403, str(exc))

    @app.exception_handler(NotFound)
    async def _notfound(request: Request, exc: NotFound) -> Response:
        return error(request, 404, str(exc))

    @app.exception_handler(DataError)
    async def _dataerror(request: Request, exc: DataError) -> Response:
        return error(request, 422, str(exc))

    @app.exception_handler(ThoughtSourceError)
    async def _other(request: Request, exc: ThoughtSourceError) -> Response:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return error(request, 400, str(exc))

    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        response = error(request, exc.status_code, str(exc.detail))
        if isinstance(exc, BodyTooLarge):
            response.headers["Connection"] = "close"  # do not read the rest of the body
        return response

    return app


def make_server(app: FastAPI, forwarded_allow_ips: str | None = None, **config: Any) -> Any:
    """The uvicorn server of ``thoughtsource serve`` (tests start the same one).

    Proxy headers (``X-Forwarded-For``/``-Proto``) are trusted only from the addresses in ``forwarded_allow_ips``
    (``serve --forwarded-allow-ips``); without it the client address is the socket's peer, always.  (uvicorn's
    default trusts them from 127.0.0.1, so any local process, or a proxy that passes the header through, could
    choose its client address: 40 of 40 wrong passwords with a new address each reached the check.)  A shutdown
    signal also sets ``app.state.stopping``, which long work (an upload's merge) watches, so the server stops
    within seconds instead of waiting for it.
    """
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            app.state.stopping.set()
            super().handle_exit(sig, frame)

    config.setdefault("log_level", "warning")
    return Server(uvicorn.Config(app, proxy_headers=forwarded_allow_ips is not None,
                                 forwarded_allow_ips=forwarded_allow_ips, **config))
