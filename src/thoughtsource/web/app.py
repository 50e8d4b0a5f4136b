"""``create_app(settings)``: the FastAPI app of the viewer and annotator.

Errors are mapped to HTTP in one place (here): NotFound → 404, NotAuthenticated → 401 (pages
redirect to the login form), Forbidden → 403, DataError → 422, as ``{"detail": ...}`` for the API
and a small error page otherwise; never a stack trace.  Every response carries a strict
Content-Security-Policy (only the app's own script and style sheet), so even a rendering bug cannot
run injected script.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from .. import paths
from ..collection import Collection
from ..errors import DataError, ThoughtSourceError
from . import admin, routes
from .auth import SESSION_COOKIE, Forbidden, LoginThrottle, NotAuthenticated, Sessions, bearer, load_or_create_secret
from .data import UPLOAD_SUFFIXES, NotFound, ServedData, id_clash, legacy_cot_ids
from .db import AnnotationDB, CotRef, User
from .limits import BodyLimits, BodyTooLarge
from .notices import Notices
from .settings import DEFAULT_LABELS, ServeSettings, host_name

__all__ = ["DEFAULT_LABELS", "ServeSettings", "create_app", "default_allowed_hosts", "host_name", "load_served", "make_server",
           "migrate_derived_ids", "migrate_positional_ids"]  # (DEFAULT_LABELS, ServeSettings, host_name live in settings.py; importable from here)

log = logging.getLogger(__name__)

HERE = Path(__file__).parent

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def load_served(settings: ServeSettings, db: AnnotationDB) -> ServedData:
    """The served files, then the uploads in the order they were accepted (``db.uploads()``; files found in
    ``upload_dir`` but not recorded, accepted before the order was, follow by modification time and are recorded).
    Before, uploads were reloaded in name order, which changed the merged CoT order at a restart.  Annotations made
    before CoT ids were stable are then given their CoTs' ids (:func:`migrate_positional_ids`)."""
    folder = settings.upload_dir
    present = {p.name: p for p in folder.glob("*") if p.is_file() and p.suffix in UPLOAD_SUFFIXES} \
        if folder is not None and folder.is_dir() else {}
    recorded = [n for n in db.uploads() if n in present]
    rest = sorted((p for n, p in present.items() if n not in set(recorded)), key=lambda p: (p.stat().st_mtime_ns, p.name))
    for p in rest:
        db.record_upload(p.name)
    accepted = [*settings.files, *(present[n] for n in recorded), *rest]
    if not accepted:
        raise ThoughtSourceError("no data files given")
    loaded = {f: Collection.load(f) for f in accepted}
    data = ServedData.from_collections([(f, loaded[f]) for f in accepted])
    for it in data.items:
        if (clash := id_clash(it.sample)) is not None:
            raise ThoughtSourceError(f"{it.dataset}/{it.split}/{it.sample.id}: the CoT id {clash!r} is also the id derived "
                                     "for a CoT without one in this sample, so a label could land on either; give it "
                                     "another id in the file")
    log.info("serving %d samples and %d generated CoTs from %d file(s)", len(data.items), data.total_cots, len(accepted))
    if db.positional_cot_refs():
        by_name = [*settings.files, *sorted(present.values())]  # the order of the versions before (by name)
        before = data if by_name == accepted else ServedData.from_collections([(f, loaded[f]) for f in by_name])
        migrate_positional_ids(db, data, before)
    migrate_derived_ids(db, data)
    return data


def migrate_derived_ids(db: AnnotationDB, data: ServedData) -> int:
    """Give the annotations that name a CoT by the derived id of a version before issue 42 (which hashed the CoT's
    answers too, so ``evaluate --scored`` changed it) the CoT's id now (:func:`~.data.legacy_cot_ids`).  Only rows of
    served samples whose id names no CoT now are looked at; an old id that is not certain is left as it is."""
    renames: dict[CotRef, str] = {}
    for ref in db.derived_cot_refs():
        it = data.index.get((ref.dataset, ref.split, ref.sample_id))
        if it is None or ref.cot_id in it.cot_ids:
            continue
        new = legacy_cot_ids(it.sample).get(ref.cot_id)
        if new is not None:
            renames[ref] = new
    n_rows = db.rename_cots(renames) if renames else 0
    if n_rows:
        log.warning("%s: %d annotation(s) on %d CoT(s) without an id moved from the derived id of a version before "
                    "issue 42 (which changed when a file was scored) to the CoT's id now", db.path, n_rows, len(renames))
    return n_rows


def migrate_positional_ids(db: AnnotationDB, data: ServedData, before: ServedData) -> int:
    """Give the annotations made before CoT ids were stable their CoTs' ids, where that is certain.

    Those versions named a CoT without an id ``cot-<n>``, its position in the merged sample, and merged the uploads
    by name at a start but in upload order while running: which CoT such a label was given to is certain only where
    both orders put the same CoT at that position (always, without uploads).  If one is not certain, nothing is
    changed and ``serve`` refuses to start, saying what to do: labels are never re-attached by a guess.  Rows of
    samples that are not served are left as they are (no CoT has such an id now, so they attach to nothing)."""
    renames: dict[CotRef, str] = {}
    unsure: list[CotRef] = []
    for ref in db.positional_cot_refs():
        it = data.index.get((ref.dataset, ref.split, ref.sample_id))
        if it is None or ref.cot_id in it.cot_ids:  # not served, or a file's own id that happens to read cot-<n>
            continue
        n = int(ref.cot_id[len("cot-"):])
        old = before.index.get(it.key)
        now_at = it.cot_ids[n] if n < len(it.cot_ids) and not it.sample.generated_cot[n].id else None
        then_at = old.cot_ids[n] if old is not None and n < len(old.cot_ids) and not old.sample.generated_cot[n].id else None
        if now_at is not None and now_at == then_at:
            renames[ref] = now_at
        else:
            unsure.append(ref)
    if unsure:
        shown = ", ".join(f"{r.dataset}/{r.split}/{r.sample_id}/{r.cot_id}" for r in unsure[:3])
        raise ThoughtSourceError(
            f"{db.path}: made by a version that named CoTs without an id by their position (cot-<n>); for {len(unsure)} "
            f"of them ({shown}{', ...' if len(unsure) > 3 else ''}) the position depends on the order of the uploads, so "
            "which CoT their labels belong to is not certain and nothing was changed. Export the annotations with the "
            "version that made them (`thoughtsource annotations export FILES... --db DB --out annotated.json`, the "
            "uploads in the order they were accepted), then `thoughtsource annotations import annotated.json --db "
            "NEW.sqlite` with this version and serve NEW.sqlite")
    n_rows = db.rename_cots(renames) if renames else 0
    if n_rows:
        log.warning("%s: %d annotation(s) on %d CoT(s) without an id moved from their position (cot-<n>) to the CoT's "
                    "stable id", db.path, n_rows, len(renames))
    return n_rows


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def default_allowed_hosts(host: str) -> list[str] | None:
    """``serve --allowed-hosts``'s default: the bound address, and ``localhost`` when it is loopback (a page on
    another site that rebinds its own name to 127.0.0.1 sends its name as Host, and is refused).  A wildcard bind
    (``0.0.0.0``, ``::``) has no name of its own to check: None (any), and ``serve`` warns."""
    if host in ("0.0.0.0", "::", ""):
        return None
    return [host, "localhost"] if host in LOOPBACK or host.startswith("127.") else [host]


def create_app(settings: ServeSettings, data: ServedData | None = None) -> FastAPI:
    """The app: its state (database, served data, sessions, ...), pages, API and admin routes, middleware (body
    limits, security headers, Host check) and the mapping of errors to HTTP.  ``settings`` were validated when made."""
    db = AnnotationDB(settings.db)
    secret = load_or_create_secret(settings.secret_dir or paths.home())
    app = FastAPI(title="thoughtsource annotator", docs_url=None, redoc_url=None, openapi_url=None)
    _init_state(app, settings, db, data, secret)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    app.include_router(routes.pages)
    app.include_router(routes.api)
    app.include_router(admin.admin)
    error = _error_page(app.state.templates)
    _add_middleware(app, settings, error)
    _add_error_handlers(app, error)
    return app


def _init_state(app: FastAPI, settings: ServeSettings, db: AnnotationDB, data: ServedData | None, secret: bytes) -> None:
    app.state.settings = settings
    app.state.db = db
    if settings.upload_dir and settings.upload_dir.is_dir():
        import shutil

        for tmp in settings.upload_dir.glob(".upload-*"):  # of an upload whose process ended before it cleaned up
            shutil.rmtree(tmp, ignore_errors=True)
    if data is None:
        data = load_served(settings, db)
    app.state.data = data
    app.state.new_tokens = {}
    app.state.notices = Notices()
    app.state.upload_lock = asyncio.Lock()  # one upload at a time: each builds on the data the last one left
    app.state.stopping = threading.Event()  # set on SIGTERM/SIGINT (Server below): long work stops
    app.state.sessions = Sessions(db, secret)
    # the key of blind review's CoT aliases and order (presenters.blind_alias): derived from the secret, never sent
    app.state.blind_key = hmac.new(secret, b"thoughtsource blind review", hashlib.sha256).digest()
    app.state.sim_cache = {}
    app.state.throttle = LoginThrottle()
    app.state.templates = _templates()


def _templates() -> Jinja2Templates:
    import jinja2

    # autoescape=True for every template (not only *.html): nothing from the data is ever marked safe.
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(HERE / "templates")), autoescape=True)
    templates = Jinja2Templates(env=env)
    templates.env.filters["urlpart"] = lambda s: quote(str(s), safe="")
    return templates


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or "application/json" in request.headers.get("accept", "")


ErrorPage = Callable[[Request, int, str], Response]


def _error_page(templates: Jinja2Templates) -> ErrorPage:
    """``error(request, status, detail)``: ``{"detail": ...}`` for the API, the small error page otherwise."""

    def error(request: Request, status: int, detail: str) -> Response:
        if wants_json(request):
            return JSONResponse({"detail": detail}, status_code=status)
        return templates.TemplateResponse(request, "error.html", {"status": status, "detail": detail, "user": None},
                                          status_code=status)

    return error


def _add_middleware(app: FastAPI, settings: ServeSettings, error: ErrorPage) -> None:
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

    if settings.allowed_hosts is not None and "*" not in settings.allowed_hosts:
        allowed = set(settings.allowed_hosts)  # (hosts, checked when the settings were made: settings.allowed_host)

        @app.middleware("http")  # added last, so outermost: a foreign Host reaches nothing else
        async def check_host(request: Request, call_next: Any) -> Response:
            if host_name(request.headers.get("host", "")) not in allowed:  # (None: not a host[:port])
                log.warning("refused a request for host %r (allowed: %s)", request.headers.get("host", "")[:100],
                            ", ".join(sorted(allowed)))
                return Response("unknown host (serve --allowed-hosts)", status_code=400, media_type="text/plain",
                                headers={"Connection": "close"})
            return await call_next(request)


def _add_error_handlers(app: FastAPI, error: ErrorPage) -> None:
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
