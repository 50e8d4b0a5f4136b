"""Thin handlers: parse → authorize (``auth`` policy) → ``db`` / ``data`` → render.

Every unsafe request (POST/PUT/DELETE) passes :func:`check_csrf` (a dependency of both routers);
every handler but the login form needs a session (:func:`current_user`).
"""

from __future__ import annotations

import io as _io
import json
import logging
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from .. import io
from ..errors import DataError, StoreError
from . import auth, presenters
from .data import Filters, Item, NotFound, ServedData, sample_done, write_csv
from .db import AnnotationDB, CotRef, User
from .presenters import sample_path
from .settings import ServeSettings
from .similarity import pairwise, sentences

log = logging.getLogger(__name__)

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
MAX_COMMENT = 10_000


# --------------------------------------------------------------------------- dependencies
async def check_csrf(request: Request) -> None:
    """Reject a cross-site or token-less write before anything else looks at it."""
    if request.method in SAFE_METHODS:
        return
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise auth.Forbidden("cross-site request refused")
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host", ""):
        raise auth.Forbidden("cross-origin request refused")
    sent = request.headers.get(auth.CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(("application/x-www-form-urlencoded", "multipart/")):
        value = (await request.form()).get(auth.CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    sessions: auth.Sessions = request.app.state.sessions
    if request.url.path == "/login":
        sessions.check_login_csrf(request.cookies.get(auth.LOGIN_COOKIE), sent)
        return
    if auth.bearer(request.headers.get("authorization")):
        raise auth.Forbidden("API tokens are read-only")
    token = sessions.token(request.cookies.get(auth.SESSION_COOKIE))
    if token is None:  # the session cookie expired or was removed (log-out in another tab): not a CSRF problem
        raise auth.NotAuthenticated(SESSION_ENDED)
    sessions.check_csrf(token, sent)


SESSION_ENDED = auth.SESSION_ENDED


def current_user(request: Request) -> User:
    """The session's user; for GET requests also the owner of a read-only API token (``Authorization: Bearer``)."""
    sessions: auth.Sessions = request.app.state.sessions
    if request.method in SAFE_METHODS and auth.bearer(request.headers.get("authorization")):
        user = sessions.api_user(request.headers.get("authorization"))
        if user is None:
            raise auth.NotAuthenticated("unknown or revoked API token")
        request.state.csrf = ""
        return user
    token = sessions.token(request.cookies.get(auth.SESSION_COOKIE))
    user = sessions.user(token)
    if user is None or token is None:
        raise auth.NotAuthenticated(SESSION_ENDED if token else "please log in")
    request.state.csrf = sessions.csrf_token(token)
    return user


CurrentUser = Annotated[User, Depends(current_user)]

pages = APIRouter(dependencies=[Depends(check_csrf)])
api = APIRouter(prefix="/api", dependencies=[Depends(check_csrf)])


def annotation_db(request: Request) -> AnnotationDB:
    return request.app.state.db


def served_data(request: Request) -> ServedData:
    return request.app.state.data


# typed dependencies of the handlers (async: reading the app's state needs no worker thread)
async def _state_db(request: Request) -> AnnotationDB:
    return request.app.state.db


async def _state_data(request: Request) -> ServedData:
    return request.app.state.data


async def _state_settings(request: Request) -> ServeSettings:
    return request.app.state.settings


DB = Annotated[AnnotationDB, Depends(_state_db)]
Data = Annotated[ServedData, Depends(_state_data)]
Settings = Annotated[ServeSettings, Depends(_state_settings)]


def render(request: Request, name: str, user: User | None, **ctx: Any) -> Response:
    ctx.setdefault("csrf", getattr(request.state, "csrf", ""))
    ctx.setdefault("blind", blind(request, user) if user else False)
    return request.app.state.templates.TemplateResponse(request, name, {"user": user, **ctx})


def _safe_next(target: str | None) -> str:
    """Only same-site paths: "/x" but not "//evil.example" or "https://…"."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/samples"
    return target


def _filters(
    dataset: str = "", split: str = "", type: str = "", model: str = "", trigger: str = "",
    correct: str = "", annotated: str = "", q: str = "",
) -> Filters:
    return Filters(dataset, split, type, model, trigger, correct, annotated, q[:200])


# --------------------------------------------------------------------------- login / logout
@pages.get("/")
def index() -> Response:
    return RedirectResponse("/samples", status_code=303)


@pages.get("/login")
def login_form(request: Request, next: str = "") -> Response:
    cookie, token = request.app.state.sessions.login_nonce()
    response = render(request, "login.html", None, csrf=token, next=_safe_next(next), error="")
    _set_cookie(request, response, auth.LOGIN_COOKIE, cookie, max_age=3600)
    return response


@pages.post("/login")
async def login(request: Request, name: Annotated[str, Form(max_length=200)], password: Annotated[str, Form(max_length=1000)],
                next: Annotated[str, Form(max_length=2000)] = "") -> Response:
    """Reserve an attempt in the throttle, verify on the password pool (never on a request worker), start a session."""
    throttle: auth.LoginThrottle = request.app.state.throttle
    sessions: auth.Sessions = request.app.state.sessions
    client = request.client.host if request.client else "unknown"
    trusted = sessions.device_trusted(request.cookies.get(auth.DEVICE_COOKIE), name)
    try:
        ticket = throttle.reserve(name, client, trusted)
    except auth.TooManyAttempts as e:
        return _login_failed(request, next, str(e), 429)
    try:
        user = await auth.authenticate_async(annotation_db(request), name, password, client, trusted)
    except auth.NotAuthenticated as e:
        throttle.failed(ticket)
        log.warning("failed login for user name %r from %s", name[:100], client)
        return _login_failed(request, next, str(e), 401)
    except (auth.AccountDisabled, auth.ServerBusy) as e:  # not a wrong guess: give back the reservation, nothing more
        throttle.released(ticket)
        return _login_failed(request, next, str(e), 403 if isinstance(e, auth.AccountDisabled) else 503)
    throttle.succeeded(ticket)
    response = RedirectResponse(_safe_next(next), status_code=303)
    _set_cookie(request, response, auth.SESSION_COOKIE, await run_in_threadpool(sessions.start, user),
                max_age=auth.SESSION_DAYS * 86400)
    _set_cookie(request, response, auth.DEVICE_COOKIE, sessions.device_cookie(user), max_age=auth.DEVICE_DAYS * 86400)
    response.delete_cookie(auth.LOGIN_COOKIE, path="/")
    log.info("user %s logged in", user.name)
    return response


def _login_failed(request: Request, next: str, error: str, status: int) -> Response:
    cookie, token = request.app.state.sessions.login_nonce()
    response = render(request, "login.html", None, csrf=token, next=_safe_next(next), error=error)
    response.status_code = status
    _set_cookie(request, response, auth.LOGIN_COOKIE, cookie, max_age=3600)
    return response


@pages.post("/logout")
def logout(request: Request, user: CurrentUser) -> Response:
    sessions: auth.Sessions = request.app.state.sessions
    sessions.end(sessions.token(request.cookies.get(auth.SESSION_COOKIE)))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(auth.SESSION_COOKIE, path="/")
    return response


def _set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    secure = request.app.state.settings.secure_cookies or request.url.scheme == "https"
    response.set_cookie(name, value, max_age=max_age, path="/", httponly=True, samesite="lax", secure=secure)


# --------------------------------------------------------------------------- helpers shared by the pages
def blind(request: Request, user: User) -> bool:
    """Blind review (``serve --blind`` or the admin's switch): model, trigger and correctness are hidden from the
    pages of annotators and viewers, and each sees a sample's CoTs in their own shuffled order.  Admins see all.
    Exports (which name the models) are refused to annotators only: viewers and API tokens observe, never label."""
    return not user.is_admin and (request.app.state.settings.blind or bool(annotation_db(request).setting("blind", False)))


def _own_cots(db: AnnotationDB, user: User) -> set[CotRef]:
    return {r.ref for r in db.annotations(annotator=user.name)}


def queue(request: Request, user: User) -> tuple[list[Item], bool]:
    """:func:`presenters.work_queue` of the app's data and database."""
    return presenters.work_queue(served_data(request), annotation_db(request), user)


# --------------------------------------------------------------------------- list
@pages.get("/samples")
def samples(request: Request, user: CurrentUser, f: Annotated[Filters, Depends(_filters)], data: Data, db: DB,
            settings: Settings, page: Annotated[int, Query(ge=1, le=100_000)] = 1, notice: str = "") -> Response:
    ctx = presenters.list_page(data, db, f, viewer(request, user), settings, page, notice)
    return render(request, "list.html", user, **ctx)


@pages.get("/next")
def next_for_me(request: Request, user: CurrentUser, db: DB) -> Response:
    """The first sample of the user's queue that they have not finished (every CoT annotated)."""
    q, _ = queue(request, user)
    done = _own_cots(db, user)
    for it in q:
        if not sample_done(it, done):
            return RedirectResponse(sample_path(it) + "?from=queue", status_code=303)
    return RedirectResponse("/samples?notice=queue-done", status_code=303)


# --------------------------------------------------------------------------- sample page
def _similarity(request: Request, user: User, it: Item) -> dict[str, Any]:
    """:func:`similarity.pairwise` of the sample's CoTs in the order ``user`` sees them (:meth:`Viewer.order`), cached
    per app and order (the data never changes).  Computed on the shown order, not renumbered from the file order:
    which CoT is "a" in a pair, the pairs' order and the tie-breaks of the top partners then follow the shown
    order alone (renumbered, the file order stayed in them: the CoT first in a pair was the first in the file)."""
    order = viewer(request, user).order(it)
    cache: dict[tuple[tuple[str, str, str], tuple[int, ...]], dict[str, Any]] = request.app.state.sim_cache
    key = (it.key, tuple(order))
    sim = cache.get(key)
    if sim is None:
        sim = pairwise([it.sample.generated_cot[i].cot or "" for i in order])
        if len(cache) > 1024:  # (three 20 KB traces are ~120 KB each: at most ~125 MB)
            cache.clear()
        cache[key] = sim
    return sim


def blind_alias(app: Any, user: User, it: Item, cid: str) -> str:
    """:func:`presenters.blind_alias` with the app's key."""
    return presenters.blind_alias(app.state.blind_key, user, it, cid)


def blind_order(app: Any, user: User, it: Item) -> list[int]:
    """:func:`presenters.blind_order` with the app's key."""
    return presenters.blind_order(app.state.blind_key, user, it)


def real_cot_id(request: Request, user: User, it: Item, shown: str) -> str:
    """The CoT id behind ``shown``: during blind review ``shown`` must be one of the user's aliases (a file's own id
    is not taken then: the reply would pair it with its alias); an unknown one gives "" (not found)."""
    if not blind(request, user):
        return shown
    return next((cid for cid in it.cot_ids if blind_alias(request.app, user, it, cid) == shown), "")


def viewer(request: Request, user: User) -> presenters.Viewer:
    return presenters.Viewer(user, blind(request, user), request.app.state.blind_key)


@pages.get("/sample/{path:path}")
def sample_page(request: Request, path: str, user: CurrentUser, f: Annotated[Filters, Depends(_filters)], data: Data,
                db: DB, settings: Settings) -> Response:
    """One sample: question, gold data and all generated CoTs side by side.  The query string keeps the list's filters.

    The path is ``dataset/split/sample id``; names containing "/" are resolved against the served data.
    """
    it = data.resolve(path)
    ctx = presenters.sample_page(data, db, it, f, viewer(request, user), settings, _similarity(request, user, it),
                                 csrf=request.state.csrf)
    return render(request, "sample.html", user, **ctx)


# --------------------------------------------------------------------------- export
ExportFormat = Literal["thoughtsource-json", "csv", "prm-jsonl"]


@pages.get("/export")
def export(request: Request, user: CurrentUser, data: Data, db: DB, format: ExportFormat = "thoughtsource-json",
           file: Annotated[int | None, Query(ge=0)] = None) -> Response:
    """Download the served data with annotations: admins and viewers everyone's (with adjudicated labels),
    annotators only their own (other authors' annotations already in the files left out).  ``file``: only
    the samples of that input file.  Works with a read-only API token (``Authorization: Bearer``)."""
    if blind(request, user) and user.role == "annotator":
        raise auth.Forbidden("exports name the models, so they are off for annotators during blind review")
    if file is not None and file >= len(data.sources):
        raise NotFound("no such input file")
    rows = db.annotations(annotator=auth.visible_annotator(user, None))
    own = user.role == "annotator"
    final = [] if own else db.adjudications()
    stem = "annotated" if file is None else data.sources[file][0].rsplit(".", 1)[0] + ".annotated"
    if format == "csv":
        buf = _io.StringIO()
        write_csv(data.csv_rows(rows, final), buf)
        body, media, name = buf.getvalue(), "text/csv; charset=utf-8", "annotations.csv"
    elif format == "prm-jsonl":
        records, _ = data.prm_records(rows, final)
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        media, name = "application/x-ndjson", "step_labels.prm.jsonl"
    else:
        collection, _, _ = data.with_annotations(rows, final=final, only_author=user.name if own else None, source=file)
        body = json.dumps(io.data_to_obj(collection.data), ensure_ascii=False, indent=2)
        media, name = "application/json", stem + ".json"
    name = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)
    return Response(body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'})


# --------------------------------------------------------------------------- JSON API
class CotIn(BaseModel):
    """A generated CoT as the API addresses it; extra fields (an ``annotator``!) are refused."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(max_length=500)
    split: str = Field(max_length=500)
    sample_id: str = Field(max_length=500)
    cot_id: str = Field(max_length=500)


class AnnotationIn(CotIn):
    """One annotation of the logged-in user; ``value`` null deletes it.  The annotator is never sent."""

    key: str = Field(max_length=200)
    value: bool | str | None = None


def _api_ref(request: Request, user: User, body: CotIn) -> CotRef:
    """The CoT a request names (during blind review by its alias, :func:`blind_alias`)."""
    data = served_data(request)
    it = data.item(body.dataset, body.split, body.sample_id)
    return data.cot_ref(body.dataset, body.split, body.sample_id, real_cot_id(request, user, it, body.cot_id))


def _api_row(request: Request, user: User, row: Any, is_blind: bool | None = None) -> dict[str, Any] | None:
    """An annotation row as the API returns it: during blind review with the CoT's alias instead of its id."""
    if row is None:
        return None
    out = row.to_dict()
    if blind(request, user) if is_blind is None else is_blind:
        it = served_data(request).index.get((row.ref.dataset, row.ref.split, row.ref.sample_id))
        out["cot_id"] = blind_alias(request.app, user, it, row.ref.cot_id) if it is not None else ""
    return out


@api.put("/annotation")
def put_annotation(request: Request, body: AnnotationIn, user: CurrentUser, db: DB, settings: Settings) -> dict[str, Any]:
    auth.require_writer(user)
    ref = _api_ref(request, user, body)
    labels = settings.labels
    key, value = body.key, body.value
    if key == "comment":
        if value is not None and not isinstance(value, str):
            raise DataError("a comment is text", field="value")
        if isinstance(value, str) and len(value) > MAX_COMMENT:
            raise DataError(f"a comment has at most {MAX_COMMENT} characters", field="value")
        if value == "":
            value = None
    elif key in (*labels, "preferred", "reviewed"):
        if value is not None and not isinstance(value, bool):
            raise DataError(f"{key!r} takes true or false", field="value")
    else:
        raise DataError(f"unknown annotation key {key!r}; one of {', '.join([*labels, 'comment', 'preferred', 'reviewed'])}",
                        field="key")
    if key == "preferred":
        row = db.set_preferred(ref, user.name, bool(value))
    elif value is None:
        db.delete_key(ref, user.name, key)
        row = None
    else:
        row = db.upsert(ref, user.name, key, value)
    return {"ok": True, "annotation": _api_row(request, user, row)}


class StepIn(CotIn):
    """One step of one CoT: ``label`` +1 / 0 / -1 (null clears), and/or ``first_error`` true / false."""

    step: int = Field(ge=0, le=100_000)
    label: Literal[-1, 0, 1] | None = None
    first_error: bool | None = None


@api.put("/steps")
def put_step(request: Request, body: StepIn, user: CurrentUser, data: Data, db: DB) -> dict[str, Any]:
    """Label one step (PRM800K's +1 / 0 / -1) or mark it the first error; the steps are the CoT's displayed sentences."""
    auth.require_writer(user)
    ref = _api_ref(request, user, body)
    n_steps = len(sentences(data.cot(ref).cot or ""))
    if body.step >= n_steps:
        raise DataError(f"step {body.step} out of range: this CoT has {n_steps} steps", field="step")
    change: dict[str, Any] = {}
    if "label" in body.model_fields_set:
        change["label"] = body.label
    if body.first_error is not None:
        change["first_error"] = body.first_error
    if not change:
        raise DataError("send a label (1, 0, -1 or null) or first_error (true or false)", field="label")
    try:
        row = db.set_step(ref, user.name, n_steps, body.step, **change)
    except StoreError as e:
        raise DataError(str(e), field="step") from None
    return {"ok": True, "annotation": _api_row(request, user, row)}


@api.get("/annotations")
def get_annotations(request: Request, user: CurrentUser, db: DB, dataset: str | None = None, split: str | None = None,
                    sample_id: str | None = None, annotator: str | None = None) -> dict[str, Any]:
    rows = db.annotations(dataset=dataset, split=split, sample_id=sample_id, annotator=auth.visible_annotator(user, annotator))
    is_blind = blind(request, user)
    return {"annotations": [_api_row(request, user, r, is_blind) for r in rows]}


@api.delete("/annotations/{annotation_id}")
def delete_annotation(request: Request, annotation_id: int, user: CurrentUser, db: DB) -> dict[str, Any]:
    auth.require_writer(user)
    row = db.get(annotation_id)
    if row is None or (row.annotator != user.name and not user.is_admin):
        raise NotFound("no such annotation")  # do not reveal other annotators' row ids
    auth.can_change(user, row)
    db.delete(annotation_id, user.name)
    return {"ok": True}


@api.get("/similarity/{path:path}")
def similarity(request: Request, path: str, user: CurrentUser, data: Data) -> dict[str, Any]:
    """The sample's sentence similarities, CoTs numbered as the user's sample page shows them: during blind review
    in the user's shuffled order (the file order groups CoTs by model, so it would name the models)."""
    return _similarity(request, user, data.resolve(path))
