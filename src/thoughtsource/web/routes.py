"""Thin handlers: parse → authorize (``auth`` policy) → ``db`` / ``data`` → render.

Every unsafe request (POST/PUT/DELETE) passes :func:`check_csrf` (a dependency of both routers);
every handler but the login form needs a session (:func:`current_user`).
"""

from __future__ import annotations

import io as _io
import json
import logging
import math
from typing import Annotated, Any
from urllib.parse import quote, urlencode, urlsplit

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from .. import io
from ..errors import DataError
from . import agreement as agreement_mod
from . import auth
from .data import Filters, Item, NotFound, ServedData, cot_correct, cot_id, model_name
from .db import AnnotationDB, User
from .similarity import pairwise, segments

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
    else:
        sessions.check_csrf(sessions.token(request.cookies.get(auth.SESSION_COOKIE)), sent)


def current_user(request: Request) -> User:
    sessions: auth.Sessions = request.app.state.sessions
    token = sessions.token(request.cookies.get(auth.SESSION_COOKIE))
    user = sessions.user(token)
    if user is None or token is None:
        raise auth.NotAuthenticated("please log in")
    request.state.csrf = sessions.csrf_token(token)
    return user


CurrentUser = Annotated[User, Depends(current_user)]

pages = APIRouter(dependencies=[Depends(check_csrf)])
api = APIRouter(prefix="/api", dependencies=[Depends(check_csrf)])


def _db(request: Request) -> AnnotationDB:
    return request.app.state.db


def _data(request: Request) -> ServedData:
    return request.app.state.data


def _render(request: Request, name: str, user: User | None, **ctx: Any) -> Response:
    ctx.setdefault("csrf", getattr(request.state, "csrf", ""))
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
    response = _render(request, "login.html", None, csrf=token, next=_safe_next(next), error="")
    _set_cookie(request, response, auth.LOGIN_COOKIE, cookie, max_age=3600)
    return response


@pages.post("/login")
def login(request: Request, name: Annotated[str, Form(max_length=200)], password: Annotated[str, Form(max_length=1000)],
          next: Annotated[str, Form(max_length=2000)] = "") -> Response:
    throttle: auth.LoginThrottle = request.app.state.throttle
    try:
        throttle.check(name)
        user = auth.authenticate(_db(request), name, password)
    except (auth.NotAuthenticated, auth.TooManyAttempts) as e:
        if isinstance(e, auth.NotAuthenticated):
            throttle.failed(name)
            log.warning("failed login for user name %r", name[:100])
        cookie, token = request.app.state.sessions.login_nonce()
        response = _render(request, "login.html", None, csrf=token, next=_safe_next(next), error=str(e))
        response.status_code = 401 if isinstance(e, auth.NotAuthenticated) else 429
        _set_cookie(request, response, auth.LOGIN_COOKIE, cookie, max_age=3600)
        return response
    throttle.succeeded(name)
    response = RedirectResponse(_safe_next(next), status_code=303)
    _set_cookie(request, response, auth.SESSION_COOKIE, request.app.state.sessions.start(user), max_age=auth.SESSION_DAYS * 86400)
    response.delete_cookie(auth.LOGIN_COOKIE, path="/")
    log.info("user %s logged in", user.name)
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


# --------------------------------------------------------------------------- list
@pages.get("/samples")
def samples(request: Request, user: CurrentUser, f: Annotated[Filters, Depends(_filters)],
            page: Annotated[int, Query(ge=1, le=100_000)] = 1) -> Response:
    data, db = _data(request), _db(request)
    annotated = db.annotated_samples(auth.visible_annotator(user, None))
    mine = db.annotated_samples(user.name)
    items = data.select(f, annotated)
    size = request.app.state.settings.page_size
    pages_n = max(1, math.ceil(len(items) / size))
    page = min(page, pages_n)
    shown = items[(page - 1) * size : page * size]
    rows = []
    for it in shown:
        marks = [cot_correct(c) for c in it.sample.generated_cot]
        rows.append({
            "item": it,
            "question": it.sample.question if len(it.sample.question) <= 220 else it.sample.question[:217] + "…",
            "models": sorted({model_name(c) for c in it.sample.generated_cot if model_name(c)}),
            "n_cots": len(it.sample.generated_cot),
            "n_correct": sum(1 for m in marks if m is True),
            "n_wrong": sum(1 for m in marks if m is False),
            "mine": it.key in mine,
            "href": _sample_href(it, f),
        })
    own_rows = db.annotations(annotator=user.name)
    prog = agreement_mod.progress(own_rows, data.total_cots, len(data.items))
    query = f.query()
    return _render(
        request, "list.html", user, rows=rows, f=f, facets=data.facets, total=len(items), page=page, pages=pages_n,
        page_href=lambda p: "/samples?" + urlencode({**query, "page": p}),
        progress=prog[0] if prog else {"cots": 0, "samples": 0, "annotations": 0, "total_cots": data.total_cots,
                                        "total_samples": len(data.items)},
    )


def _sample_href(it: Item, f: Filters) -> str:
    path = "/sample/" + "/".join(quote(p, safe="") for p in (it.dataset, it.split, it.sample.id))
    q = f.query()
    return path + ("?" + urlencode(q) if q else "")


# --------------------------------------------------------------------------- sample page
def _similarity(request: Request, it: Item) -> dict[str, Any]:
    """Pairwise sentence similarities of the sample's CoTs, cached per app (the data never changes)."""
    cache: dict[tuple[str, str, str], dict[str, Any]] = request.app.state.sim_cache
    sim = cache.get(it.key)
    if sim is None:
        sim = pairwise([c.cot or "" for c in it.sample.generated_cot])
        if len(cache) > 512:
            cache.clear()
        cache[it.key] = sim
    return sim


@pages.get("/sample/{ds}/{sp}/{sample_id:path}")
def sample_page(request: Request, ds: str, sp: str, sample_id: str, user: CurrentUser,
                f: Annotated[Filters, Depends(_filters)]) -> Response:
    """One sample: question, gold data and all generated CoTs side by side.  The query string keeps the list's filters."""
    data, db = _data(request), _db(request)
    it = data.item(ds, sp, sample_id)
    dataset, split = it.dataset, it.split
    x = it.sample
    settings = request.app.state.settings
    rows = db.annotations(dataset=dataset, split=split, sample_id=x.id, annotator=auth.visible_annotator(user, None))
    own = [r for r in rows if r.annotator == user.name]
    others = [r for r in rows if r.annotator != user.name]
    cots = []
    state: dict[str, dict[str, Any]] = {}
    for i, c in enumerate(x.generated_cot):
        cid = cot_id(c, i)
        mine = {r.key: r.value for r in own if r.ref.cot_id == cid}
        state[cid] = mine
        cots.append({
            "index": i,
            "id": cid,
            "model": model_name(c) or "unknown model",
            "trigger": c.cot_trigger or "",
            "instruction": c.instruction or "",
            "prompt": c.prompt_text or c.cot_trigger_template or "",
            "segments": segments(c.cot or ""),
            "answers": [{"text": (a.answer or "").strip(), "correct": a.correct_answer} for a in c.answers],
            "correct": cot_correct(c),
            "mine": mine,
            "file_annotations": c.annotations if user.is_admin else [],
            "others": [r for r in others if r.ref.cot_id == cid],
        })
    # neighbours in the filtered list (j/k); fall back to file order when this sample left the filter
    annotated = db.annotated_samples(auth.visible_annotator(user, None))
    items = data.select(f, annotated)
    pos = next((i for i, y in enumerate(items) if y.key == it.key), None)
    if pos is not None:
        prev_it = items[pos - 1] if pos > 0 else None
        next_it = items[pos + 1] if pos + 1 < len(items) else None
    else:
        prev_it = next((y for y in reversed(items) if y.position < it.position), None)
        next_it = next((y for y in items if y.position > it.position), None)
    page_data = {
        "ref": {"dataset": dataset, "split": split, "sample_id": x.id},
        "csrf": request.state.csrf,
        "cots": [c["id"] for c in cots],
        "labels": settings.labels,
        "state": state,
        "similarity": _similarity(request, it),
        "prev": _sample_href(prev_it, f) if prev_it else None,
        "next": _sample_href(next_it, f) if next_it else None,
    }
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    choices = [{"letter": letters[i] if i < 26 else str(i + 1), "text": ch, "gold": ch in x.answer} for i, ch in enumerate(x.choices)]
    return _render(
        request, "sample.html", user, it=it, x=x, cots=cots, choices=choices, labels=settings.labels, page_data=page_data,
        position=(pos + 1) if pos is not None else None, total=len(items),
        back="/samples" + ("?" + urlencode(f.query()) if f.query() else ""),
    )


# --------------------------------------------------------------------------- agreement and export
@pages.get("/agreement")
def agreement_page(request: Request, user: CurrentUser) -> Response:
    auth.require_admin(user)
    data, db = _data(request), _db(request)
    rows = db.annotations()
    served = {(it.dataset, it.split, it.sample.id) for it in data.items}
    rows = [r for r in rows if (r.ref.dataset, r.ref.split, r.ref.sample_id) in served]
    return _render(
        request, "agreement.html", user,
        results=agreement_mod.agreement(rows, request.app.state.settings.labels),
        progress=agreement_mod.progress(rows, data.total_cots, len(data.items)),
    )


@pages.get("/export")
def export(request: Request, user: CurrentUser, format: Annotated[str, Query(pattern="^(thoughtsource-json|csv)$")]
           = "thoughtsource-json") -> Response:
    """Download the served data with annotations (admins: everyone's; annotators: their own)."""
    data, db = _data(request), _db(request)
    rows = db.annotations(annotator=auth.visible_annotator(user, None))
    if format == "csv":
        import csv

        buf = _io.StringIO()
        csv.writer(buf).writerows(data.csv_rows(rows))
        body, media, name = buf.getvalue(), "text/csv; charset=utf-8", "annotations.csv"
    else:
        collection, _, _ = data.with_annotations(rows)
        body = json.dumps(io.data_to_obj(collection.data), ensure_ascii=False, indent=2)
        media, name = "application/json", "annotated.json"
    return Response(body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"'})


# --------------------------------------------------------------------------- JSON API
class AnnotationIn(BaseModel):
    """One annotation of the logged-in user; ``value`` null deletes it.  The annotator is never sent."""

    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(max_length=500)
    split: str = Field(max_length=500)
    sample_id: str = Field(max_length=500)
    cot_id: str = Field(max_length=500)
    key: str = Field(max_length=200)
    value: bool | str | None = None


@api.put("/annotation")
def put_annotation(request: Request, body: AnnotationIn, user: CurrentUser) -> dict[str, Any]:
    data, db = _data(request), _db(request)
    ref = data.cot_ref(body.dataset, body.split, body.sample_id, body.cot_id)
    labels = request.app.state.settings.labels
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
    return {"ok": True, "annotation": row.to_dict() if row else None}


@api.get("/annotations")
def get_annotations(request: Request, user: CurrentUser, dataset: str | None = None, split: str | None = None,
                    sample_id: str | None = None, annotator: str | None = None) -> dict[str, Any]:
    rows = _db(request).annotations(dataset=dataset, split=split, sample_id=sample_id,
                                    annotator=auth.visible_annotator(user, annotator))
    return {"annotations": [r.to_dict() for r in rows]}


@api.delete("/annotations/{annotation_id}")
def delete_annotation(request: Request, annotation_id: int, user: CurrentUser) -> dict[str, Any]:
    db = _db(request)
    row = db.get(annotation_id)
    if row is None or (row.annotator != user.name and not user.is_admin):
        raise NotFound("no such annotation")  # do not reveal other annotators' row ids
    auth.can_change(user, row)
    db.delete(annotation_id, user.name)
    return {"ok": True}


@api.get("/similarity/{dataset}/{split}/{sample_id:path}")
def similarity(request: Request, dataset: str, split: str, sample_id: str, user: CurrentUser) -> dict[str, Any]:
    return _similarity(request, _data(request).item(dataset, split, sample_id))
