"""Issue 42, finding 4: one rule for step labels on every path (a step saved from the keyboard or the API, /adjudicate
and its step form, ``annotations import``), and stored rows that break it reported by ``annotations export`` and
refused with ``--strict``.  The rule: ``first_error`` names a step labelled -1, and no step before it is -1;
adjudicating a CoT whose steps nobody labelled takes a label for every step.  Against a live uvicorn as ``serve``
runs it (``conftest.live_server``) and the real CLI, on the merged model runs."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import closing

import pytest

from thoughtsource.web.data import Item, ServedData
from thoughtsource.web.db import STEP_KEY, AnnotationDB, CotRef, step_labels_problem
from thoughtsource.web.similarity import sentences

from .conftest import add_user, live_server
from .test_hardening import http_login

# the three bodies the issue's /adjudicate accepted
CONTRADICTIONS = (
    ({"labels": [1, 1, 1], "first_error": 1}, "first_error"),  # the first error on a step labelled correct
    ({"labels": [-1, 1, 1], "first_error": 2}, "first_error"),  # a wrong step before the "first" error (and +1 there)
    ({"labels": [-1, 1, -1], "first_error": 2}, "labels"),  # ... with the first error itself labelled -1
)
UNLABELLED = {"labels": [], "first_error": 0}  # on a CoT nobody labelled


def _cots(served: ServedData, n: int = 2) -> tuple[Item, list[str]]:
    """A sample with ``n`` CoTs of at least 4 steps each, and their ids."""
    for it in served.items:
        ids = [cid for cid, c in zip(it.cot_ids, it.sample.generated_cot, strict=True) if len(sentences(c.cot or "")) >= 4]
        if len(ids) >= n:
            return it, ids[:n]
    raise AssertionError("no such sample")


def _ref(it: Item, cid: str) -> dict[str, str]:
    return {"dataset": it.dataset, "split": it.split, "sample_id": it.sample.id, "cot_id": cid}


def test_the_rule_by_hand() -> None:
    assert step_labels_problem({"labels": [1, -1, -1], "first_error": 1}, 3) is None
    assert step_labels_problem({"labels": [1, 0], "first_error": None}, 3) is None
    assert step_labels_problem({"labels": [1, 1, 1], "first_error": 1}, 3)[0] == "first_error"
    assert step_labels_problem({"labels": [-1, 1, -1], "first_error": 2}, 3)[0] == "labels"
    assert step_labels_problem({"labels": [], "first_error": 0}, 3)[0] == "first_error"
    assert step_labels_problem({"labels": [-1], "first_error": 0}, 3, explicit=True)[0] == "labels"
    assert step_labels_problem({"labels": [1, 1, -1], "first_error": 2}, 3, explicit=True) is None
    assert step_labels_problem({"labels": [1], "first_error": 5}, 3)[0] == "first_error"


def test_keyboard_and_api_step_saves_never_store_a_contradiction(make_app, served) -> None:
    """The keyboard saves through PUT /api/steps one change at a time.  e then + on one step stored a first error on a
    +1 step; - on a step before the first error, and e after a -1, stored a wrong step before the "first" error.
    Each is now a 422 naming the field, and the stored value stays as it was."""
    app = make_app()
    add_user(app, "alice")
    it, [cid] = _cots(served, 1)
    db: AnnotationDB = app.state.db
    ref = CotRef(it.dataset, it.split, it.sample.id, cid)

    def stored() -> dict | None:
        rows = [r for r in db.annotations(annotator="alice") if r.ref == ref and r.key == STEP_KEY]
        return rows[0].value if rows else None

    with live_server(app) as url:
        alice, csrf = http_login(url, "alice")
        with closing(alice):
            def put(step: int, **change: object) -> tuple[int, str]:
                r = alice.put("/api/steps", headers={"X-CSRF-Token": csrf}, json={**_ref(it, cid), "step": step, **change})
                return r.status_code, r.json().get("detail", "")

            assert put(1, first_error=True)[0] == 200  # e on step 1: labelled -1, the first error
            before = stored()
            assert before == {"labels": [None, -1, *[None] * (len(before["labels"]) - 2)], "first_error": 1}
            for change, step, field in (({"label": 1}, 1, "label"),  # e then + on the same step
                                        ({"label": 0}, 1, "label"),
                                        ({"label": None}, 1, "label"),  # Delete on the first error
                                        ({"label": -1}, 0, "label"),  # a -1 before the first error
                                        ({"first_error": True}, 3, "first_error")):  # a first error after a -1
                status, detail = put(step, **change)
                assert status == 422 and f"field '{field}'" in detail, (change, step, status, detail)
                assert stored() == before, change
            assert put(1, first_error=False)[0] == 200  # e again unmarks it (the -1 stays)
            assert put(0, label=-1)[0] == 200 and put(0, first_error=True)[0] == 200
            assert put(1, label=1)[0] == 200  # after the first error, any label
            value = stored()
            assert value["first_error"] == 0 and value["labels"][:2] == [-1, 1]
            assert step_labels_problem(value, len(value["labels"])) is None


def test_adjudicate_refuses_the_three_contradicting_bodies_and_an_unlabelled_cot_without_labels(make_app, served) -> None:
    app = make_app()
    add_user(app, "root", "admin")
    it, (cid, unlabelled) = _cots(served)
    db: AnnotationDB = app.state.db
    db.set_step(CotRef(it.dataset, it.split, it.sample.id, cid), "alice", len(sentences(it.cot(cid).cot or "")), 0, label=1)
    n_unlabelled = len(sentences(it.cot(unlabelled).cot or ""))
    with live_server(app) as url:
        root, csrf = http_login(url, "root")
        with closing(root):
            def adjudicate(target: str, value: dict) -> tuple[int, str]:
                r = root.post("/adjudicate", headers={"Accept": "application/json"},
                              data={**_ref(it, target), "key": STEP_KEY, "value": json.dumps(value), "csrf_token": csrf})
                return r.status_code, r.json().get("detail", "") if r.status_code != 303 else ""

            for body, field in CONTRADICTIONS:
                status, detail = adjudicate(cid, body)
                assert status == 422 and f"field '{field}'" in detail, (body, status, detail)
            status, detail = adjudicate(unlabelled, UNLABELLED)
            assert status == 422 and "field 'labels'" in detail and "nobody labelled" in detail, detail
            status, detail = adjudicate(unlabelled, {"labels": [1] * (n_unlabelled - 1), "first_error": None})
            assert status == 422 and "field 'labels'" in detail  # one step left without a label
            # the step form: a -1 before the step marked the first error
            form = {**_ref(it, cid), "csrf_token": csrf, "step_0": "-1", "step_1": "1", "first_error": "2"}
            r = root.post("/adjudicate/steps", data=form, headers={"Accept": "application/json"})
            assert r.status_code == 422 and "field 'labels'" in r.json()["detail"]
            assert db.adjudications() == []
            # what the rule allows is stored: a consistent value, and explicit labels on the CoT nobody labelled
            assert adjudicate(cid, {"labels": [1, -1, -1], "first_error": 1})[0] == 303
            assert adjudicate(unlabelled, {"labels": [1, -1] + [0] * (n_unlabelled - 2), "first_error": 1})[0] == 303
            form = {**_ref(it, cid), "csrf_token": csrf, "step_0": "1", "first_error": "1"}  # marking labels it -1
            assert root.post("/adjudicate/steps", data=form).status_code == 303
    assert sorted(r.value["first_error"] for r in db.adjudications()) == [1, 1]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "thoughtsource", *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_export_reports_stored_contradictions_and_strict_refuses_them_and_import_refuses_them(served, model_run_files,
                                                                                              tmp_path) -> None:
    """Rows stored before the rule (as the issue's /adjudicate and e-then-+ stored them) are listed by `annotations
    export` (one line each, on stderr) and make `--strict` exit 1 with nothing written; `annotations import` of a
    file carrying such a value stores nothing of it."""
    it, (cid, other) = _cots(served)
    db = AnnotationDB(tmp_path / "a.sqlite")
    bad, good = CotRef(it.dataset, it.split, it.sample.id, cid), CotRef(it.dataset, it.split, it.sample.id, other)
    db.upsert(bad, "alice", STEP_KEY, {"labels": [1, 1, 1], "first_error": 1})  # written past the checks, as before
    db.adjudicate(good, STEP_KEY, {"labels": [], "first_error": 0}, "root")
    db.upsert(good, "bob", STEP_KEY, {"labels": [1, -1], "first_error": 1})
    files = [str(f) for f in model_run_files]
    out = tmp_path / "steps.prm.jsonl"
    p = _run("annotations", "export", *files, "--db", str(tmp_path / "a.sqlite"), "--format", "prm-jsonl", "-o", str(out))
    assert p.returncode == 0, p.stderr
    warnings = [line for line in p.stderr.splitlines() if line.startswith("warning: inconsistent step labels")]
    assert len(warnings) == 2 and any(f"CoT {cid} (alice): field 'first_error'" in w for w in warnings), p.stderr
    assert any("final value by root" in w for w in warnings)
    out.unlink()
    p = _run("annotations", "export", *files, "--db", str(tmp_path / "a.sqlite"), "--format", "prm-jsonl", "-o", str(out),
             "--strict")
    assert p.returncode == 1 and not out.exists() and "Traceback" not in p.stderr, p.stderr
    assert "\nerror: 2 stored step-label value(s) break the rule" in p.stderr and f"CoT {cid} (alice)" in p.stderr

    # import: a file whose annotations carry the e-then-+ value
    exported = tmp_path / "export.json"
    assert _run("annotations", "export", *files, "--db", str(tmp_path / "a.sqlite"), "-o", str(exported)).returncode == 0
    fresh = tmp_path / "fresh.sqlite"
    p = _run("annotations", "import", str(exported), "--db", str(fresh))
    assert p.returncode == 1 and "field 'first_error'" in p.stderr and "nothing of this file imported" in p.stderr, p.stderr
    assert AnnotationDB(fresh).annotations() == [] and AnnotationDB(fresh).adjudications() == []
