"""Admin pages: agreement and progress, adjudication, users, data upload, blind review, API tokens.

Thin handlers like ``routes``: parse → authorize (``auth.require_admin``) → ``db`` / ``data`` → render.
Every write is a POST form carrying the CSRF token (``routes.check_csrf`` guards this router too) and
redirects back (POST/redirect/GET), so a reload never repeats it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import re
import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, BinaryIO

from fastapi import APIRouter, Depends, Form, Request, UploadFile
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from ..collection import Collection
from ..errors import Cancelled, DataError, StoreError, ThoughtSourceError
from . import agreement as agreement_mod
from . import auth
from .data import UPLOAD_SUFFIXES, ServedData, id_clash, sample_done
from .db import ROLES, STEP_KEY, STEP_VALUES, AnnotationDB, CotRef, User, step_labels_problem
from .limits import MAX_UPLOAD_BYTES
from .routes import DB, CurrentUser, Data, Settings, annotation_db, check_csrf, render, sample_path, served_data
from .similarity import sentences

log = logging.getLogger(__name__)

admin = APIRouter(dependencies=[Depends(check_csrf)])



def _back(request: Request, user: User, url: str, notice: str = "", error: str = "") -> Response:
    """Redirect to ``url``, which shows ``notice`` or ``error`` by a message id (``?msg=``), never by text in the URL."""
    q = "?msg=" + request.app.state.notices.put(user, notice, error) if notice or error else ""
    return RedirectResponse(url + q, status_code=303)


def _message(request: Request, user: User, msg: str) -> dict[str, str]:
    notice, error = request.app.state.notices.get(user, msg) if msg else ("", "")
    return {"notice": notice, "error": error}


# --------------------------------------------------------------------------- agreement and progress
@admin.get("/agreement")
def agreement_page(request: Request, user: CurrentUser, data: Data, db: DB, settings: Settings) -> Response:
    auth.require_admin(user)
    served = set(data.index)
    rows = [r for r in db.annotations() if (r.ref.dataset, r.ref.split, r.ref.sample_id) in served]
    progress = agreement_mod.progress(rows, data.total_cots, len(data.items))
    queues = {}
    done: dict[str, set[CotRef]] = {}
    for r in rows:
        done.setdefault(r.annotator, set()).add(r.ref)
    for name, keys in db.assigned().items():
        items = [it for k in keys if (it := data.index.get(k)) is not None]
        queues[name] = {"total": len(items), "done": sum(1 for it in items if sample_done(it, done.get(name, set())))}
    # an annotator with a queue who has not started yet gets a row too (0 of everything), not silently none
    started = {p["annotator"] for p in progress}
    progress += [{"annotator": name, "annotations": 0, "cots": 0, "samples": 0, "total_cots": data.total_cots,
                  "total_samples": len(data.items)} for name in queues if name not in started]
    progress.sort(key=lambda p: p["annotator"])
    return render(request, "agreement.html", user, results=agreement_mod.agreement(rows, settings.labels),
                   progress=progress, queues=queues)


# --------------------------------------------------------------------------- adjudication
def _step_text(value: Any) -> str:
    if not isinstance(value, dict):
        return str(value)
    marks = {1: "+", 0: "0", -1: "−", None: "·"}
    labels = "".join(marks.get(v, "?") for v in value.get("labels") or [])
    first = value.get("first_error")
    return labels + (f"  (first error: step {first + 1})" if first is not None else "")


@admin.get("/adjudicate")
def adjudicate_page(request: Request, user: CurrentUser, data: Data, db: DB, settings: Settings, msg: str = "") -> Response:
    """Every CoT and label where annotators disagree, with a confusion matrix per label; set the final label."""
    auth.require_admin(user)
    served = set(data.index)
    rows = [r for r in db.annotations() if (r.ref.dataset, r.ref.split, r.ref.sample_id) in served]
    items, confusions = agreement_mod.disagreements(rows, settings.labels, db.adjudications())
    shown = []
    for d in items[:500]:
        it = data.index[(d.ref.dataset, d.ref.split, d.ref.sample_id)]
        editor = _step_editor(data, d) if d.key == STEP_KEY else None
        shown.append({
            "editor": editor,
            "d": d, "href": sample_path(it), "question": it.sample.question[:160],
            "values": {a: (_step_text(v) if d.key == STEP_KEY else ("yes" if v else "no")) for a, v in d.values.items()},
            "raw": {a: json.dumps(v) for a, v in d.values.items()},
            "final": None if d.final is None else (_step_text(d.final) if d.key == STEP_KEY else ("yes" if d.final else "no")),
        })
    return render(request, "adjudicate.html", user, items=shown, total=len(items), confusions=confusions,
                   open=sum(1 for d in items if d.final is None), **_message(request, user, msg))


def _step_editor(data: ServedData, d: agreement_mod.Disagreement) -> dict[str, Any]:
    """Per step: its text and the value to preselect (the final one, else the annotators' majority, else none)."""
    from collections import Counter

    steps = sentences(data.cot(d.ref).cot or "")
    start = d.final if isinstance(d.final, dict) else None
    rows = []
    for i, text in enumerate(steps):
        if start is not None:
            final = start.get("labels") or []
            pick = final[i] if i < len(final) else None
        else:
            votes = Counter(v["labels"][i] for v in d.values.values()
                            if isinstance(v, dict) and i < len(v.get("labels") or []) and v["labels"][i] is not None)
            top = votes.most_common(2)
            pick = top[0][0] if top and (len(top) == 1 or top[0][1] > top[1][1]) else None
        rows.append({"index": i, "text": text if len(text) <= 90 else text[:87] + "…", "pick": pick})
    firsts = {v.get("first_error") for v in d.values.values() if isinstance(v, dict)}
    first = start.get("first_error") if start is not None else (firsts.pop() if len(firsts) == 1 else None)
    return {"steps": rows, "first_error": first}


@admin.post("/adjudicate/steps")
async def adjudicate_steps(request: Request, user: CurrentUser) -> Response:
    """Final step labels set step by step (form fields ``step_0`` … ``step_{n-1}``: 1, 0, -1 or empty; ``first_error``)."""
    auth.require_admin(user)
    form = await request.form()
    field = {k: v for k, v in form.items() if isinstance(v, str)}
    data = served_data(request)
    ref = data.cot_ref(field.get("dataset", ""), field.get("split", ""), field.get("sample_id", ""), field.get("cot_id", ""))
    n = len(sentences(data.cot(ref).cot or ""))
    choice = {"": None, "1": 1, "0": 0, "-1": -1}
    try:
        labels = [choice[field.get(f"step_{i}", "")] for i in range(n)]
        first = int(field["first_error"]) if field.get("first_error") else None
    except (KeyError, ValueError):
        raise DataError("a step label is 1, 0, -1 or empty; first_error a step number or empty", field="value") from None
    if first is not None:
        if not 0 <= first < n:
            raise DataError(f"first_error {first} out of range: this CoT has {n} steps", field="first_error")
        if labels[first] is None:  # marking the first error labels it -1 (as the keyboard's e does)
            labels[first] = -1
    db = annotation_db(request)
    if all(v is None for v in labels):  # a form left empty is no decision (it was stored, and prm-jsonl exported it)
        await run_in_threadpool(db.adjudicate, ref, STEP_KEY, None, user.name)
        return _back(request, user, "/adjudicate", notice="no step was set: nothing stored (a final value there was cleared)")
    value = {"labels": labels, "first_error": first}
    await run_in_threadpool(check_final_steps, db, ref, value, n)
    await run_in_threadpool(db.adjudicate, ref, STEP_KEY, value, user.name)
    log.info("%s adjudicated the step labels of %s", user.name, ref)
    return _back(request, user, "/adjudicate", notice="final step labels saved")


def check_final_steps(db: AnnotationDB, ref: CotRef, value: dict[str, Any], n_steps: int) -> None:
    """Refuse final step labels that break :func:`db.step_labels_problem` (a 422 naming the field): the first
    error labelled other than -1, a -1 before it, or, on a CoT whose steps no annotator labelled, a step left
    without a label (``{"labels": [], "first_error": 0}`` made a first error of a step nobody had seen)."""
    labelled = any(r.key == STEP_KEY and r.ref == ref
                   for r in db.annotations(dataset=ref.dataset, split=ref.split, sample_id=ref.sample_id))
    problem = step_labels_problem(value, n_steps, explicit=not labelled)
    if problem is not None:
        raise DataError(problem[1], field=problem[0])


MAX_FINAL_VALUE = 200_000  # characters of a final value's JSON: a step-labels object of a CoT of ~50,000 steps


class BadFinalValue(ThoughtSourceError):
    """A final value that is not one (HTTP 400): not JSON, nested too deeply, too long, or of the wrong shape."""


@admin.post("/adjudicate")
def adjudicate(request: Request, user: CurrentUser, data: Data, db: DB, settings: Settings,
               dataset: Annotated[str, Form(max_length=500)],
               split: Annotated[str, Form(max_length=500)], sample_id: Annotated[str, Form(max_length=500)],
               cot_id: Annotated[str, Form(max_length=500)], key: Annotated[str, Form(max_length=200)],
               value: Annotated[str, Form()] = "") -> Response:
    """Set the final value of (CoT, key): ``value`` is JSON (true/false for a label, a step-labels object), or "" to clear.

    (The default matters: FastAPI reads an empty form field as a missing one, so without it "" was a 422.)  A value
    that is not one is a 400 with the reason: a deeply nested one was a 500 (``json`` raised RecursionError)."""
    auth.require_admin(user)
    ref = data.cot_ref(dataset, split, sample_id, cot_id)
    labels = settings.labels
    if value == "":
        db.adjudicate(ref, key, None, user.name)
        return _back(request, user, "/adjudicate", notice="final label cleared")
    if len(value) > MAX_FINAL_VALUE:
        raise BadFinalValue(f"the final value has {len(value)} characters; at most {MAX_FINAL_VALUE}")
    if key not in (*labels, STEP_KEY):
        raise DataError(f"cannot adjudicate {key!r}; one of {', '.join([*labels, STEP_KEY])}", field="key")
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        raise BadFinalValue("the final value is not JSON (or nested too deeply)") from None
    if key in labels:
        if not isinstance(parsed, bool):
            raise BadFinalValue(f"{key!r} takes true or false")
    else:
        n = len(sentences(data.cot(ref).cot or ""))
        steps = parsed.get("labels") if isinstance(parsed, dict) else None
        first = parsed.get("first_error") if isinstance(parsed, dict) else None
        ok = (isinstance(steps, list) and len(steps) <= n and set(parsed) <= {"labels", "first_error"}
              and all(v is None or (type(v) is int and v in STEP_VALUES) for v in steps)
              and (first is None or (type(first) is int and 0 <= first < n)))
        if not ok or not isinstance(steps, list):  # isinstance: ok says so; for the type checker
            raise BadFinalValue(f"step labels are {{\"labels\": [1|0|-1|null, ...] (at most {n}, one per step), "
                                "\"first_error\": a step number or null}")
        parsed = {"labels": steps, "first_error": first}
        if first is None and all(v is None for v in steps):  # no decision: clear, never store an all-empty one
            db.adjudicate(ref, key, None, user.name)
            return _back(request, user, "/adjudicate", notice="no step was set: nothing stored (a final value there was cleared)")
        check_final_steps(db, ref, parsed, n)
    db.adjudicate(ref, key, parsed, user.name)
    log.info("%s adjudicated %s on %s", user.name, key, ref)
    return _back(request, user, "/adjudicate", notice="final label saved")


# --------------------------------------------------------------------------- users
@admin.get("/admin/users")
def users_page(request: Request, user: CurrentUser, db: DB, msg: str = "") -> Response:
    auth.require_admin(user)
    return render(request, "users.html", user, users=db.users(), roles=ROLES, **_message(request, user, msg))


@admin.post("/admin/users")
def change_user(request: Request, user: CurrentUser, db: DB, name: Annotated[str, Form(max_length=200)],
                action: Annotated[str, Form(pattern="^(role|disable|enable|remove)$")],
                role: Annotated[str, Form(max_length=20)] = "") -> Response:
    """Change the role of, disable, enable or remove an account (never your own: that could lock out the last admin)."""
    auth.require_admin(user)
    target = db.user(name)
    if target is None:
        return _back(request, user, "/admin/users", error=f"no user named {name!r}")
    if target.id == user.id:
        return _back(request, user, "/admin/users", error="change your own account from the command line")
    try:  # each checks, in its own transaction, that you are still an admin and another active admin remains
        if action == "role":
            db.set_role(target.name, role, acting=user)
        elif action == "remove":
            db.remove_user(target.name, acting=user)
        else:
            db.set_disabled(target.name, action == "disable", acting=user)
    except StoreError as e:
        return _back(request, user, "/admin/users", error=str(e))
    log.info("%s: %s %s %s", user.name, action, target.name, role)
    return _back(request, user, "/admin/users", notice=f"{target.name}: {action} {role}".strip())


# --------------------------------------------------------------------------- data: upload, per-file export, blind, tokens
@admin.get("/admin/data")
def data_page(request: Request, user: CurrentUser, data: Data, db: DB, settings: Settings, msg: str = "",
              token: str = "") -> Response:
    auth.require_admin(user)
    folder = settings.upload_dir
    files = [{"index": i, "name": name, "samples": sum(1 for _ in c.samples()),
              "upload": folder is not None and _served_upload(data, folder, name) is not None}
             for i, (name, c) in enumerate(data.sources)]
    return render(request, "data.html", user, files=files, blind_db=bool(db.setting("blind", False)),
                   blind_server=settings.blind, tokens=db.tokens(), **_message(request, user, msg),
                   new_token=request.app.state.new_tokens.pop(token, None) if token else None)


MAX_UPLOAD_NAME = 120


def _upload_name(filename: str) -> str:
    """A safe file name for an upload: ``[A-Za-z0-9._-]``, at most ``MAX_UPLOAD_NAME`` characters *with* its suffix
    (lower-cased, as the start-up scan of ``upload_dir`` expects).  Before, a long name was cut after the suffix
    check, so it was stored without ``.json``, served until the next restart, then silently dropped."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(filename or "upload.json").name).lstrip(".") or "upload.json"
    suffix = next((s for s in UPLOAD_SUFFIXES if name.lower().endswith(s)), None)
    if suffix is None:
        raise DataError(f"{name[:MAX_UPLOAD_NAME]}: expected a ThoughtSource file ending in {', '.join(UPLOAD_SUFFIXES)}")
    stem = name[: -len(suffix)][: MAX_UPLOAD_NAME - len(suffix) - 8].rstrip(".") or "upload"  # room for "-<n>"
    return stem + suffix


def _same_bytes(a: Path, b: Path) -> bool:
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while chunk := fa.read(1 << 20):
            if chunk != fb.read(len(chunk)):
                return False
    return True


def _served_upload(data: ServedData, folder: Path, name: str) -> Path | None:
    """The served file that is the upload ``name`` (None: no such upload; files given to ``serve`` are not uploads)."""
    return next((Path(f) for f in data.files if Path(f).name == name and Path(f).parent.resolve() == folder.resolve()), None)


def _without(data: ServedData, drop: Path, instead: tuple[Path, Collection] | None = None,
             stop: threading.Event | None = None) -> ServedData:
    """The served data merged again without the file ``drop`` (with ``instead`` in its place: a replaced upload
    keeps its position, as the next start's upload order does)."""
    pairs: list[tuple[Path, Collection]] = []
    for f, (_, c) in zip(data.files, data.sources, strict=True):
        if Path(f) != drop:
            pairs.append((Path(f), c))
        elif instead is not None:
            pairs.append(instead)
    if not pairs:
        raise DataError(f"{drop.name} is the only served file; it cannot be removed")
    if stop is not None and stop.is_set():
        raise Cancelled("the server is shutting down")
    return ServedData.from_collections(pairs)


def unserved_labels(db: Any, before: ServedData, after: ServedData) -> list[CotRef]:
    """The CoTs with annotations or adjudications that ``before`` served and ``after`` does not (a removed or
    replaced upload): their rows stay in the database (a later upload of the CoT finds them again) and are listed."""
    refs = {r.ref for r in [*db.annotations(), *db.adjudications()]}

    def served(data: ServedData, ref: CotRef) -> bool:
        it = data.index.get((ref.dataset, ref.split, ref.sample_id))
        return it is not None and ref.cot_id in it.cot_ids

    gone = [r for r in refs if served(before, r) and not served(after, r)]
    return sorted(gone, key=lambda r: (r.dataset, r.split, r.sample_id, r.cot_id))


def _listed(refs: list[CotRef], shown: int = 10) -> str:
    if not refs:
        return ""
    names = ", ".join(f"{r.dataset}/{r.split}/{r.sample_id}/{r.cot_id}" for r in refs[:shown])
    return (f"; the labels of {len(refs)} CoT(s) no longer served are kept: {names}"
            f"{f' and {len(refs) - shown} more' if len(refs) > shown else ''}")


def _load_upload(path: Path, name: str) -> Collection:
    """Validate like ``thoughtsource validate`` (the strict schema, duplicate sample ids, nesting depth); errors
    name the uploaded file, never the server's temp path."""
    try:
        collection = Collection.load(path, validate=True)
    except ThoughtSourceError as e:
        raise DataError(str(e).replace(str(path), name)) from None
    except (ValueError, OSError, RecursionError) as e:  # e.g. a broken Parquet file
        raise DataError(f"{name}: not a readable ThoughtSource file ({e.__class__.__name__})") from None
    if not any(True for _ in collection.samples()):
        raise DataError(f"{name}: no samples")
    return collection


@dataclass
class Uploaded:
    data: ServedData
    target: Path
    samples: int
    merged: int  # samples already served, whose CoTs the upload adds to
    new_cots: int
    replaced: bool = False  # an upload of the same name was replaced
    identical: str | None = None  # the stored upload with the same bytes (nothing was changed)
    unserved: list[CotRef] | None = None  # CoTs with labels that the replaced upload had and this one has not


def store_upload(source: BinaryIO, name: str, folder: Path, data: ServedData, stop: threading.Event,
                 record: Callable[[str], None] | None = None, db: Any = None) -> Uploaded:
    """The upload pipeline, off the event loop: copy to a private temp folder in ``folder`` → validate → merge with
    the served data (refusing conflicts) → only then store under its name (one rename).  A failure or ``stop``
    (the server shutting down: the merge checks it) leaves ``folder`` as it was, so a restart never loads a file
    that was not accepted.  ``record(stored name)`` after the rename: the upload order, which the next start keeps.

    The same bytes as a stored upload (any name) change nothing.  An upload of a name already uploaded replaces it
    (merged again in its place, issue 42: before, it was stored beside it as ``name-2``): labels stay on the CoTs
    that are still served, and those of CoTs it no longer has (from ``db``) are kept and listed."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".upload-", dir=folder))
    try:
        path = tmp / name
        with open(path, "wb") as fh:
            copied = 0
            while chunk := source.read(1 << 20):
                copied += len(chunk)
                if copied > MAX_UPLOAD_BYTES:
                    raise DataError(f"{name}: larger than {MAX_UPLOAD_BYTES // 2**20} MiB")
                fh.write(chunk)
        collection = _load_upload(path, name)
        same = next((f for f in map(Path, data.files) if f.parent.resolve() == folder.resolve() and f.is_file()
                     and _same_bytes(f, path)), None)
        if same is not None:
            return Uploaded(data, same, sum(1 for _ in collection.samples()), 0, 0, identical=same.name)
        target = folder / name
        served_before = data.total_cots
        old = _served_upload(data, folder, name)
        new = data.with_file(target, collection, cancel=stop) if old is None else _without(data, old, (target, collection), stop)
        before = set(data.collection.merge_conflicts)
        conflicts = [c for c in new.collection.merge_conflicts if c not in before]
        if conflicts:
            shown = "; ".join(conflicts[:3]) + (f"; and {len(conflicts) - 3} more" if len(conflicts) > 3 else "")
            raise DataError(f"{name}: {len(conflicts)} conflict(s) with the served data (a sample id or CoT id reused "
                            f"for different content): {shown}")
        for d, s, x in collection.samples():
            if (clash := id_clash(new.index[(d, s, x.id)].sample)) is not None:
                raise DataError(f"{name}: {d}/{s}/{x.id}: the CoT id {clash!r} is also the id derived for a CoT "
                                "without one in this sample (ids h-... name CoTs stored without an id); give it another id")
        if stop.is_set():
            raise Cancelled("the server is shutting down")
        os.replace(path, target)
        if record is not None:
            record(target.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    samples = sum(1 for _ in collection.samples())
    merged = sum(1 for d, s, x in collection.samples() if (d, s, x.id) in data.index)
    unserved = unserved_labels(db, data, new) if old is not None and db is not None else []
    return Uploaded(new, target, samples, merged, new.total_cots - served_before, old is not None, None, unserved)


async def _off_loop(stop: threading.Event, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a daemon thread; stops waiting once ``stop`` is set (the server shutting down), so neither
    the request nor the process waits for long work (a daemon thread does not hold up the exit)."""
    done: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(fn(*args))
        except BaseException as e:  # handed to the waiting request
            done.set_exception(e)

    threading.Thread(target=run, name="ts-upload", daemon=True).start()
    waiting = asyncio.wrap_future(done)
    while not waiting.done():
        await asyncio.wait([waiting], timeout=0.25)
        if stop.is_set() and not waiting.done():
            raise Cancelled("the server is shutting down")
    return waiting.result()


@admin.post("/admin/upload")
async def upload(request: Request, user: CurrentUser, file: UploadFile) -> Response:
    """Add a ThoughtSource file to the served data; a file that does not validate or merge cleanly changes nothing."""
    auth.require_admin(user)
    lock: asyncio.Lock = request.app.state.upload_lock
    if lock.locked():  # one upload at a time (each builds on the data the last one left): say so, do not queue
        return _back(request, user, "/admin/data", error="another upload is being processed; try again when it is done")
    async with lock:
        try:
            name = _upload_name(file.filename or "")
            done: Uploaded = await _off_loop(request.app.state.stopping, store_upload, file.file, name,
                                             request.app.state.settings.upload_dir, served_data(request),
                                             request.app.state.stopping, annotation_db(request).record_upload,
                                             annotation_db(request))
        except DataError as e:
            log.warning("%s: upload refused: %s", user.name, e)
            return _back(request, user, "/admin/data", error=str(e))
        except Cancelled:
            log.warning("%s: upload of %s stopped: the server is shutting down; nothing stored", user.name, file.filename)
            return _back(request, user, "/admin/data", error="the server is shutting down; the upload was not stored")
        if done.identical is not None:
            return _back(request, user, "/admin/data", notice=f"{name} is the same file as the upload {done.identical}, "
                                                              "already served: nothing changed")
        request.app.state.data = done.data  # one reference swap: requests in flight keep the old data
        request.app.state.sim_cache = {}
    log.info("%s uploaded %s: now serving %d samples", user.name, done.target.name, len(done.data.items))
    merged = f", {done.merged} of them already served (their CoTs were added)" if done.merged else ""
    what = (f"replaced {done.target.name}: {done.samples} samples{merged}, {done.new_cots:+d} CoTs served"
            if done.replaced else f"added {done.target.name}: {done.samples} samples{merged}, {done.new_cots} new CoTs")
    return _back(request, user, "/admin/data", notice=what + _listed(done.unserved or []))


@admin.post("/admin/upload/remove")
async def remove_upload(request: Request, user: CurrentUser, db: DB, name: Annotated[str, Form(max_length=200)]) -> Response:
    """Stop serving an upload and delete its file; the labels of its CoTs stay in the database and are listed."""
    auth.require_admin(user)
    lock: asyncio.Lock = request.app.state.upload_lock
    if lock.locked():
        return _back(request, user, "/admin/data", error="an upload is being processed; try again when it is done")
    async with lock:
        folder = request.app.state.settings.upload_dir
        data = served_data(request)
        path = _served_upload(data, folder, name)
        if path is None:
            return _back(request, user, "/admin/data", error=f"no upload named {name!r} (files given to serve stay)")
        try:
            new = await _off_loop(request.app.state.stopping, _without, data, path, None, request.app.state.stopping)
        except (DataError, Cancelled) as e:
            return _back(request, user, "/admin/data", error=str(e))
        unserved = await run_in_threadpool(unserved_labels, db, data, new)
        path.unlink()
        db.forget_upload(name)
        request.app.state.data = new
        request.app.state.sim_cache = {}
    log.info("%s removed the upload %s: now serving %d samples; %d CoT(s) with labels no longer served", user.name, name,
             len(new.items), len(unserved))
    return _back(request, user, "/admin/data", notice=f"removed {name}: now serving {len(new.items)} samples{_listed(unserved)}")


@admin.post("/admin/blind")
def set_blind(request: Request, user: CurrentUser, db: DB, on: Annotated[bool, Form()]) -> Response:
    auth.require_admin(user)
    db.set_setting("blind", on)
    return _back(request, user, "/admin/data", notice="blind review " + ("on" if on else "off"))


@admin.post("/admin/tokens")
def create_token(request: Request, user: CurrentUser, label: Annotated[str, Form(min_length=1, max_length=100)]) -> Response:
    """A read-only API token for the admin's own account; shown once on the next page."""
    auth.require_admin(user)
    _, token = request.app.state.sessions.create_api_token(user, label)
    key = secrets.token_urlsafe(16)
    request.app.state.new_tokens[key] = token
    return RedirectResponse(f"/admin/data?token={key}", status_code=303)


@admin.post("/admin/tokens/revoke")
def revoke_token(request: Request, user: CurrentUser, db: DB, token_id: Annotated[int, Form()]) -> Response:
    auth.require_admin(user)
    db.revoke_token(token_id)
    return _back(request, user, "/admin/data", notice=f"token {token_id} revoked")

