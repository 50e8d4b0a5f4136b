"""Step labels, prm-jsonl, the ThoughtSource JSON round trip, assignment, adjudication, users, tokens, uploads."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from thoughtsource.cli import app as cli_app
from thoughtsource.schema import model_name
from thoughtsource.web.agreement import agreement
from thoughtsource.web.assign import assign
from thoughtsource.web.data import csv_safe
from thoughtsource.web.db import STEP_KEY, AnnotationDB, CotRef
from thoughtsource.web.similarity import sentences

from .conftest import add_user, first_multi_cot_sample, login

runner = CliRunner()


def _ref(it, i: int = 0) -> dict:
    return {"dataset": it.dataset, "split": it.split, "sample_id": it.sample.id, "cot_id": it.sample.generated_cot[i].id}


def _steps(client, csrf, it, i, changes) -> None:
    for step, change in changes:
        r = client.put("/api/steps", json={**_ref(it, i), "step": step, **change}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 200, r.text


@pytest.mark.slow
def test_step_labels_prm_jsonl_and_round_trip(app, served, tmp_path: Path) -> None:
    for name in ("alice", "bob"):
        add_user(app, name)
    add_user(app, "root", "admin")
    it = next(x for x in served.items if len(x.sample.generated_cot) >= 2
              and all(len(sentences(c.cot or "")) >= 3 for c in x.sample.generated_cot[:2]))
    cot0, cot1 = it.sample.generated_cot[:2]
    n0, n1 = len(sentences(cot0.cot)), len(sentences(cot1.cot))
    assert n0 >= 2 and n1 >= 2
    alice, a = login(app, "alice")
    bob, b = login(app, "bob")
    # alice: CoT 0 all correct; CoT 1 step 0 correct, step 1 first error.  bob: CoT 0 the same, CoT 1 neutral, then -1
    _steps(alice, a, it, 0, [(k, {"label": 1}) for k in range(n0)])
    _steps(alice, a, it, 1, [(0, {"label": 1}), (1, {"first_error": True})])
    _steps(bob, b, it, 0, [(k, {"label": 1}) for k in range(n0)])
    _steps(bob, b, it, 1, [(0, {"label": 0}), (1, {"label": -1})])
    h = {"X-CSRF-Token": a}
    assert alice.put("/api/steps", json={**_ref(it, 0), "step": n0, "label": 1}, headers=h).status_code == 422
    assert alice.put("/api/steps", json={**_ref(it, 0), "step": 0, "label": 2}, headers=h).status_code == 422
    assert alice.put("/api/steps", json={**_ref(it, 0), "step": 0}, headers=h).status_code == 422
    stored = {(r.annotator, r.ref.cot_id): r.value for r in app.state.db.annotations() if r.key == STEP_KEY}
    assert stored[("alice", cot1.id)] == {"labels": [1, -1] + [None] * (n1 - 2), "first_error": 1}
    assert stored[("bob", cot1.id)] == {"labels": [0, -1] + [None] * (n1 - 2), "first_error": None}

    # prm-jsonl: CoT 0 (both agree) is exported, CoT 1 (disagreement, not adjudicated) is left out ...
    db_path = app.state.db.path
    out = tmp_path / "steps.jsonl"
    files = [str(f) for f in served.files]
    r = runner.invoke(cli_app, ["annotations", "export", *files, "--db", str(db_path), "--out", str(out), "--format", "prm-jsonl"])
    assert r.exit_code == 0, r.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [rec["cot_id"] for rec in records] == [cot0.id]
    rec = records[0]
    assert rec["steps"] == sentences(cot0.cot) and rec["labels"] == [1] * n0 and rec["first_error"] is None
    assert rec["annotators"] == ["alice", "bob"] and rec["adjudicated_by"] is None
    assert rec["question"] == it.sample.question and rec["model"] == model_name(cot0)
    assert rec["final_answer_correct"] == (all(x.correct_answer for x in cot0.answers) if cot0.answers else None)
    # ... until an admin adjudicates it: step by step on the adjudication page (preselected: the majority, here
    # only where the two agree), or by taking one annotator's labels; --all-annotators gives a record per annotator
    root, rc = login(app, "root")
    page = root.get("/adjudicate").text
    assert 'name="step_1"' in page and 'name="first_error"' in page
    fields = {**_ref(it, 1), "csrf_token": rc, "step_0": "0", "step_1": "", "first_error": "1"}
    r = root.post("/adjudicate/steps", data=fields, follow_redirects=False)
    assert r.status_code == 303
    assert [a.value for a in app.state.db.adjudications()] == [{"labels": [0, -1] + [None] * (n1 - 2), "first_error": 1}]
    assert root.post("/adjudicate/steps", data={**fields, "step_0": "5"}).status_code == 422
    assert root.post("/adjudicate/steps", data={**fields, "first_error": str(n1)}).status_code == 422
    assert alice.post("/adjudicate/steps", data={**fields, "csrf_token": a}).status_code == 403
    final = {"labels": [1, -1] + [None] * (n1 - 2), "first_error": 1}
    r = root.post("/adjudicate", data={**_ref(it, 1), "key": STEP_KEY, "value": json.dumps(final), "csrf_token": rc},
                  follow_redirects=False)
    assert r.status_code == 303
    r = runner.invoke(cli_app, ["annotations", "export", *files, "--db", str(db_path), "--out", str(out), "--format", "prm-jsonl"])
    records = {rec["cot_id"]: rec for rec in map(json.loads, out.read_text().splitlines())}
    assert records[cot1.id]["labels"] == final["labels"] and records[cot1.id]["adjudicated_by"] == "root"
    assert records[cot1.id]["steps"] == sentences(cot1.cot)
    r = runner.invoke(cli_app, ["annotations", "export", *files, "--db", str(db_path), "--out", str(out), "--format", "prm-jsonl",
                                "--all-annotators"])
    every = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((x["cot_id"], x["annotator"], tuple(x["labels"])) for x in every) == sorted(
        (ref, ann, tuple(v["labels"])) for (ann, ref), v in stored.items())

    # round trip: export ThoughtSource JSON, import into a fresh database, export again: nothing lost
    alice.put("/api/annotation", json={**_ref(it, 0), "key": "comment", "value": "=HYPERLINK(\"x\")"}, headers=h)
    first = tmp_path / "first.json"
    r = runner.invoke(cli_app, ["annotations", "export", *files, "--db", str(db_path), "--out", str(first)])
    assert r.exit_code == 0, r.output
    fresh = tmp_path / "fresh.sqlite"
    r = runner.invoke(cli_app, ["annotations", "import", str(first), "--db", str(fresh)])
    assert r.exit_code == 0, r.output
    again = tmp_path / "again.json"
    r = runner.invoke(cli_app, ["annotations", "export", *files, "--db", str(fresh), "--out", str(again)])
    assert json.loads(again.read_text()) == json.loads(first.read_text())
    old = {(r.ref, r.annotator, r.key, json.dumps(r.value)) for r in AnnotationDB(db_path).annotations()}
    new = {(r.ref, r.annotator, r.key, json.dumps(r.value)) for r in AnnotationDB(fresh).annotations()}
    assert old <= new
    assert [(r.ref, r.key, r.value, r.annotator) for r in AnnotationDB(fresh).adjudications()] == [
        (CotRef(it.dataset, it.split, it.sample.id, cot1.id), STEP_KEY, final, "root")]
    steps2 = tmp_path / "steps2.jsonl"
    runner.invoke(cli_app, ["annotations", "export", *files, "--db", str(fresh), "--out", str(steps2), "--format", "prm-jsonl"])
    runner.invoke(cli_app, ["annotations", "export", *files, "--db", str(db_path), "--out", str(out), "--format", "prm-jsonl"])
    assert steps2.read_text() == out.read_text()

    # agreement has a row for step labels; CSV cells that a spreadsheet would run are defused
    results = {x.label: x for x in agreement(AnnotationDB(db_path).annotations())}
    assert results["step labels"].units == n0 + 2
    # per value: CoT 0 all +1 by both; CoT 1 step 0 (+1 vs 0) and step 1 (-1 vs -1)
    assert results["step labels: −1 incorrect"].units == n0 + 2 and results["step labels: −1 incorrect"].positive == 2
    assert results["step labels: +1 correct"].positive == 2 * n0 + 1
    table = list(csv.reader(io.StringIO(root.get("/export?format=csv").text)))
    assert [row[8] for row in table if row[7] == "comment"] == ["'=HYPERLINK(\"x\")"]
    assert csv_safe("-1") == "'-1" and csv_safe("plain") == "plain"


def test_viewer_reads_but_never_writes(app, served) -> None:
    add_user(app, "vera", "viewer")
    add_user(app, "alice")
    it = first_multi_cot_sample(served)
    alice, a = login(app, "alice")
    alice.put("/api/annotation", json={**_ref(it), "key": "Too verbose", "value": True}, headers={"X-CSRF-Token": a})
    vera, v = login(app, "vera")
    h = {"X-CSRF-Token": v}
    assert vera.put("/api/annotation", json={**_ref(it), "key": "Too verbose", "value": True}, headers=h).status_code == 403
    assert vera.put("/api/steps", json={**_ref(it), "step": 0, "label": 1}, headers=h).status_code == 403
    row_id = app.state.db.annotations()[0].id
    assert vera.delete(f"/api/annotations/{row_id}", headers=h).status_code == 403
    assert vera.get("/agreement").status_code == 403 and vera.get("/admin/users").status_code == 403
    assert [r["annotator"] for r in vera.get("/api/annotations").json()["annotations"]] == ["alice"]
    page = vera.get(f"/sample/{it.dataset}/{it.split}/{it.sample.id}")
    assert page.status_code == 200 and '"readonly": true' in page.text
    assert app.state.db.count() == 1


def test_users_cli_and_admin_page(app, tmp_path: Path) -> None:
    db = str(app.state.db.path)
    r = runner.invoke(cli_app, ["users", "add", "  Eve ", "--db", db, "--password-stdin"], input="correct horse battery\n")
    assert r.exit_code == 0 and "eve" in r.output
    client, _ = login(app, "EVE ")  # names are normalised at log-in too
    for args, check in ((["role", "eve", "viewer"], lambda u: u.role == "viewer"), (["disable", "eve"], lambda u: u.disabled),
                        (["enable", "eve"], lambda u: not u.disabled)):
        r = runner.invoke(cli_app, ["users", *args, "--db", db])
        assert r.exit_code == 0, r.output
        assert check(app.state.db.user("eve"))
    assert client.get("/api/annotations").status_code == 401  # the role change ended the session
    add_user(app, "root", "admin")
    root, rc = login(app, "root")
    r = root.post("/admin/users", data={"name": "eve", "action": "disable", "csrf_token": rc}, follow_redirects=False)
    assert r.status_code == 303 and app.state.db.user("eve").disabled
    assert "disabled" in root.get("/admin/users").text
    c = TestClient(app)
    token = re.search(r'name="csrf_token" value="([^"]+)"', c.get("/login").text).group(1)
    r = c.post("/login", data={"name": "eve", "password": "correct horse battery", "csrf_token": token})
    assert r.status_code == 403 and "disabled" in r.text
    r = root.post("/admin/users", data={"name": "root", "action": "remove", "csrf_token": rc}, follow_redirects=True)
    assert "your own account" in r.text and app.state.db.user("root") is not None
    r = runner.invoke(cli_app, ["users", "remove", "eve", "--db", db])
    assert r.exit_code == 0 and app.state.db.user("eve") is None


def test_read_only_api_token_exports_and_never_writes(app, served) -> None:
    add_user(app, "root", "admin")
    db = str(app.state.db.path)
    r = runner.invoke(cli_app, ["tokens", "create", "root", "--db", db, "--label", "nightly"])
    assert r.exit_code == 0, r.output
    token = r.output.strip().splitlines()[-1]
    assert token.startswith("tsk_")
    c = TestClient(app)
    h = {"Authorization": f"Bearer {token}"}
    assert c.get("/export?format=prm-jsonl", headers=h).status_code == 200
    assert c.get("/export?format=thoughtsource-json&file=0", headers=h).status_code == 200
    it = first_multi_cot_sample(served)
    assert c.put("/api/annotation", json={**_ref(it), "key": "Too verbose", "value": True}, headers=h).status_code == 403
    assert c.get("/export", headers={"Authorization": "Bearer tsk_forged"}).status_code == 401
    r = runner.invoke(cli_app, ["tokens", "list", "--db", db])
    assert "nightly" in r.output and token not in r.output
    runner.invoke(cli_app, ["tokens", "revoke", "1", "--db", db])
    assert c.get("/export", headers=h).status_code == 401
    # a reverse proxy's Basic auth header is not an API token: browser writes behind it still work
    add_user(app, "alice")
    alice, csrf = login(app, "alice")
    r = alice.put("/api/annotation", json={**_ref(it), "key": "Too verbose", "value": True},
                  headers={"X-CSRF-Token": csrf, "Authorization": "Basic YWxpY2U6eA=="})
    assert r.status_code == 200


def test_assign_spreads_samples_with_overlap(app, served, tmp_path: Path) -> None:
    keys = [it.key for it in served.items[:100]]
    plan = assign(keys, ["a", "b", "c"], 2, seed=1)
    per = {n: [k for *k, a in plan if a == n] for n in "abc"}
    assert sorted(len(v) for v in per.values()) == [66, 67, 67]
    by_sample: dict = {}
    for *k, a in plan:
        by_sample.setdefault(tuple(k), set()).add(a)
    assert len(by_sample) == 100 and all(len(v) == 2 for v in by_sample.values())
    for name in ("ann", "ben"):
        add_user(app, name)
    f = tmp_path / "small.json"
    served.collection.select(split=None, number_samples=3, seed=0).dump(f)
    r = runner.invoke(cli_app, ["tasks", "assign", str(f), "--overlap", "2", "--db", str(app.state.db.path)])
    assert r.exit_code == 0, r.output
    queues = app.state.db.assigned()
    assert set(queues) == {"ann", "ben"} and sorted(queues["ann"]) == sorted(queues["ben"]) and len(queues["ann"]) >= 3
    r = runner.invoke(cli_app, ["tasks", "assign", str(f), "--overlap", "3", "--db", str(app.state.db.path)])
    assert r.exit_code != 0


def test_dataset_names_with_a_slash_have_pages(make_app, tmp_path: Path) -> None:
    sample = {"id": "q/1", "question": "Is it?", "type": "bool", "choices": [], "answer": ["true"],
              "generated_cot": [{"id": "c1", "cot": "Yes. It is.", "answers": [], "model": {"name": "m"}}]}
    f = tmp_path / "slash.json"
    f.write_text(json.dumps({"org/data": {"test/hard": [sample]}}))
    app = make_app(data=None, files=[f])
    add_user(app, "alice")
    client, _ = login(app, "alice")
    href = re.search(r'href="(/sample/[^"]+)"', client.get("/samples").text).group(1)
    assert href == "/sample/org%2Fdata/test%2Fhard/q%2F1"
    assert client.get(href).status_code == 200
    assert client.get("/sample/org/data/test/hard/q/1").status_code == 200
    assert client.get("/sample/org/data/test/q/1").status_code == 404


def test_annotator_export_has_only_their_own_annotations(make_app, examples_dir) -> None:
    from thoughtsource.web.data import ServedData

    data = ServedData.load([examples_dir / "annotated" / "annotated_set.json"])
    assert any(a.author == "Rob" for it in data.items for c in it.sample.generated_cot for a in c.annotations)
    app = make_app(data=data)
    add_user(app, "alice")
    client, csrf = login(app, "alice")

    def authors() -> list[tuple[str, str, object]]:
        body = json.loads(client.get("/export?format=thoughtsource-json").text)
        return [(c["id"], a["author"], a["value"]) for sp in body.values() for xs in sp.values() for x in xs
                for c in x["generated_cot"] for a in c["annotations"]]

    assert authors() == []  # the input file's annotations by others (Rob) never reach alice's export
    it = data.items[0]
    r = client.put("/api/annotation", json={**_ref(it), "key": "Too verbose", "value": True}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200, r.text
    assert authors() == [(it.sample.generated_cot[0].id, "alice", True)]  # her own annotation is kept
