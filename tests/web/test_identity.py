"""Issue 42, finding 5: the identity of a CoT without an id, and what may claim it.

A derived id (``h-...``) covers only what says which CoT it is, never what is added later: ``evaluate --scored``,
``convert`` and ``runs merge`` keep every id, so labels made on a file still attach to its scored copy.  Databases
made by the versions whose ids covered the answers are moved at start.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from thoughtsource.collection import Collection
from thoughtsource.errors import ThoughtSourceError
from thoughtsource.web.data import ServedData, cot_ids
from thoughtsource.web.db import AnnotationDB, CotRef

from .conftest import CSRF_FIELD_RE, PASSWORD, add_user, live_server

GPT4 = "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json"
GPT35 = "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"


def id_less(src: Path, out: Path, per_split: int = 10) -> Path:
    """The first ``per_split`` samples of each split of a real model-run file, as another tool writes them: no CoT
    ids and not scored yet (``correct_answer`` null)."""
    data = json.loads(src.read_text())
    for splits in data.values():
        for s, xs in splits.items():
            splits[s] = xs[:per_split]
            for x in splits[s]:
                for c in x["generated_cot"]:
                    c["id"] = None
                    for a in c["answers"]:
                        a["correct_answer"] = None
    out.write_text(json.dumps(data))
    return out


def ids_of(path: Path) -> dict[tuple[str, str, str], list[str]]:
    return {(d, s, x.id): cot_ids(x) for d, s, x in Collection.load(path).samples()}


def ts(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "thoughtsource", "-q", *args], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr


def _login(base: str) -> tuple[httpx.Client, str]:
    client = httpx.Client(base_url=base, timeout=60)
    token = CSRF_FIELD_RE.search(client.get("/login").text).group(1)
    assert client.post("/login", data={"name": "alice", "password": PASSWORD, "csrf_token": token}).status_code == 303
    return client, CSRF_FIELD_RE.search(client.get("/samples").text).group(1)


@pytest.mark.slow
def test_labels_made_on_a_file_attach_to_its_scored_copy(make_app, model_run_files, tmp_path) -> None:
    """Serve a real file, save 60 labels, ``evaluate --scored`` it, serve the scored file with the same database:
    every label attaches (before: 0 of 60, the id covered ``correct_answer``)."""
    run = id_less(next(f for f in model_run_files if f.name == GPT4), tmp_path / "run.json")
    app = make_app(files=[run])
    add_user(app, "alice")
    refs = [CotRef(it.dataset, it.split, it.sample.id, c) for it in app.state.data.items for c in it.cot_ids]
    assert len(refs) == 60 and all(r.cot_id.startswith("h-") for r in refs)
    with live_server(app) as base:
        alice, csrf = _login(base)
        with closing(alice):
            for r in refs:
                body = {"dataset": r.dataset, "split": r.split, "sample_id": r.sample_id, "cot_id": r.cot_id,
                        "key": "Too verbose", "value": True}
                assert alice.put("/api/annotation", json=body, headers={"X-CSRF-Token": csrf}).status_code == 200
    scored = tmp_path / "scored.json"
    ts("evaluate", str(run), "--out", str(tmp_path / "eval"), "--scored", str(scored))
    marks = [a.correct_answer for _, _, x in Collection.load(scored).samples() for c in x.generated_cot for a in c.answers]
    assert None not in marks and True in marks  # the scored copy really differs from what was labelled

    app2 = make_app(files=[scored])
    with live_server(app2) as base:
        alice, _ = _login(base)
        with closing(alice):
            exported = alice.get("/export").json()
    attached = [a for splits in exported.values() for xs in splits.values() for x in xs for c in x["generated_cot"]
                for a in c["annotations"] if a["author"] == "alice"]
    assert len(attached) == 60
    assert {CotRef(it.dataset, it.split, it.sample.id, c) for it in app2.state.data.items for c in it.cot_ids} == set(refs)


@pytest.mark.slow
def test_convert_and_merge_keep_every_derived_id(model_run_files, tmp_path) -> None:
    files = {f.name: f for f in model_run_files}
    a = id_less(files[GPT4], tmp_path / "a.json", per_split=5)
    b = id_less(files[GPT35], tmp_path / "b.json", per_split=5)
    want = ids_of(a)
    for suffix in (".jsonl", ".parquet"):
        ts("convert", str(a), str(tmp_path / f"a{suffix}"), "--to", suffix[1:])
        assert ids_of(tmp_path / f"a{suffix}") == want, suffix
    ts("runs", "merge", str(a), str(b), "--out", str(tmp_path / "ab.json"))
    merged = ids_of(tmp_path / "ab.json")
    for key, ids in {**ids_of(b), **want}.items():
        assert set(ids) <= set(merged[key]), key


def _old_derived_id(cot) -> str:
    """The derived id of the versions before issue 42 (every field but id and annotations)."""
    content = cot.model_dump(mode="json", exclude={"id", "annotations"}, exclude_defaults=True)
    return "h-" + hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


@pytest.mark.slow
def test_a_database_of_the_old_derived_ids_is_moved_at_start_even_after_scoring(make_app, model_run_files, tmp_path) -> None:
    """Labels saved by the old version on the unscored file (its ids hashed the answers) attach when this version
    serves the scored file: the old ids of the CoT as it is and without ``correct_answer`` are both recognised."""
    run = id_less(next(f for f in model_run_files if f.name == GPT4), tmp_path / "run.json", per_split=3)
    before = ServedData.load([run])
    db = AnnotationDB(tmp_path / "annotations.sqlite")
    for it in before.items:
        for c in it.sample.generated_cot:
            db.upsert(CotRef(it.dataset, it.split, it.sample.id, _old_derived_id(c)), "alice", "Too verbose", True)
    scored = tmp_path / "scored.json"
    ts("evaluate", str(run), "--out", str(tmp_path / "eval"), "--scored", str(scored))
    app = make_app(files=[scored])
    served = {CotRef(it.dataset, it.split, it.sample.id, c) for it in app.state.data.items for c in it.cot_ids}
    rows = app.state.db.annotations()
    assert len(rows) == 18 and {r.ref for r in rows} == served


@pytest.mark.slow
def test_an_upload_claiming_another_cots_derived_id_is_refused_with_one_line(make_app, model_run_files, tmp_path) -> None:
    """The attacker copies a served CoT's derived id onto a CoT of her own (same sample): before, it was accepted,
    both CoTs had the id and a label on one landed on the other.  Also refused: the same the other way round (her
    explicit ``h-`` id first, then an upload of the CoT without an id that derives it)."""
    from .test_hardening import http_login

    run = id_less(next(f for f in model_run_files if f.name == GPT4), tmp_path / "run.json", per_split=2)
    app = make_app(files=[run])
    add_user(app, "root", "admin")
    it = app.state.data.items[0]
    victim = it.cot_ids[0]
    forged = it.sample.model_copy(deep=True)
    forged.generated_cot[0] = forged.generated_cot[0].model_copy(update={"id": victim, "cot": "I am another CoT."})
    evil = tmp_path / "evil.json"
    evil.write_text(json.dumps({it.dataset: {it.split: [forged.model_dump(mode="json")]}}))
    with live_server(app) as base:
        root, csrf = http_login(base, "root")
        with closing(root):
            r = root.post("/admin/upload", data={"csrf_token": csrf}, files={"file": ("evil.json", evil.read_bytes(), "application/json")})
            page = root.get(r.headers["location"]).text
    assert f"the CoT id &#39;{victim}&#39; is also the id derived for a CoT without one" in page
    assert app.state.data.item(it.dataset, it.split, it.sample.id).cot_ids == [victim]
    assert not (app.state.settings.upload_dir / "evil.json").exists()
    # the other order: a served explicit h- id, then the CoT without an id that derives it, as a start would load them
    with pytest.raises(ThoughtSourceError, match="is also the id derived"):
        make_app(files=[evil, run])


@pytest.mark.parametrize("name", ["bob\u200b", "b\u200bob", "\u202ebob", "b\u043eb", "b\u03bfb",
                                  "BOB", "\uff42\uff4f\uff42", "b0b", "bo\u0301b"])
def test_an_account_name_confusable_with_an_existing_one_is_refused(name: str, tmp_path: Path) -> None:
    """``users add`` (the one way accounts are made) refuses look-alikes of ``bob``: invisible characters (zero-width
    space, a bidi override), a Cyrillic о, a Greek ο, case, full-width letters (NFKC), a digit 0, a combining accent."""
    from thoughtsource.errors import StoreError

    db = AnnotationDB(tmp_path / "a.sqlite")
    db.add_user("bob", "(a password hash)", "annotator")
    with pytest.raises(StoreError, match="bob"):
        db.add_user(name, "(a password hash)", "annotator")
    assert [u.name for u in db.users()] == ["bob"]


def test_users_add_refuses_a_cyrillic_look_alike_with_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "400", "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    add = [sys.executable, "-m", "thoughtsource", "users", "add", "--db", str(tmp_path / "a.sqlite"), "--password-stdin"]
    assert subprocess.run([*add, "bob"], input=PASSWORD + "\n", text=True, capture_output=True, env=env).returncode == 0
    p = subprocess.run([*add, "b\u043eb"], input=PASSWORD + "\n", text=True, capture_output=True, env=env)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1
    assert "looks like the existing user 'bob'" in p.stderr
    assert subprocess.run([*add, "alice"], input=PASSWORD + "\n", text=True, capture_output=True, env=env).returncode == 0


@pytest.mark.slow
def test_reupload_replaces_an_identical_one_changes_nothing_and_an_admin_removes_an_upload(make_app, model_run_files,
                                                                                           tmp_path) -> None:
    """On a live serve: an upload, labelled; the same bytes again (nothing stored); a corrected file of the same
    name (replaces it in place: labels stay on the CoTs still there, those of the CoT it dropped are kept and
    listed); then the admin removes it on the data page (labels kept and listed), and a restart serves without it."""
    import re

    from .test_hardening import http_login

    run = id_less(next(f for f in model_run_files if f.name == GPT4), tmp_path / "run.json", per_split=2)
    src = json.loads(next(f for f in model_run_files if f.name == GPT35).read_text())
    extra = {d: {s: xs[:2] for s, xs in splits.items()} for d, splits in list(src.items())[:2]}
    first = json.dumps(extra).encode()
    app = make_app(files=[run])
    add_user(app, "root", "admin")
    add_user(app, "alice")
    folder = app.state.settings.upload_dir

    def upload(client: httpx.Client, csrf: str, content: bytes) -> str:
        r = client.post("/admin/upload", data={"csrf_token": csrf}, files={"file": ("extra.json", content, "application/json")})
        assert r.status_code == 303
        page = client.get(r.headers["location"]).text
        return re.search(r'<p class="(?:notice|error)"[^>]*>(.*?)</p>', page, re.S).group(1)

    def served_ids() -> set[str]:
        return {c for it in app.state.data.items for c in it.cot_ids}

    with live_server(app) as base:
        root, csrf = http_login(base, "root")
        alice, acsrf = _login(base)
        with closing(root), closing(alice):
            assert upload(root, csrf, first).startswith("added extra.json")
            ids = [c["id"] for splits in extra.values() for xs in splits.values() for x in xs for c in x["generated_cot"]]
            assert set(ids) <= served_ids()
            for d, splits in extra.items():
                for s, xs in splits.items():
                    for x in xs:
                        for c in x["generated_cot"]:
                            body = {"dataset": d, "split": s, "sample_id": x["id"], "cot_id": c["id"], "key": "Too verbose", "value": True}
                            assert alice.put("/api/annotation", json=body, headers={"X-CSRF-Token": acsrf}).status_code == 200
            n_rows = len(app.state.db.annotations())
            assert n_rows == len(ids)

            assert "is the same file as the upload extra.json" in upload(root, csrf, first)
            assert sorted(p.name for p in folder.iterdir()) == ["extra.json"]

            d0, s0 = next(iter(extra)), next(iter(extra[next(iter(extra))]))
            dropped = extra[d0][s0][0]["generated_cot"].pop(0)
            notice = upload(root, csrf, json.dumps(extra).encode())
            assert notice.startswith("replaced extra.json")
            assert f"{d0}/{s0}/{extra[d0][s0][0]['id']}/{dropped['id']}" in notice and "are kept" in notice
            assert sorted(p.name for p in folder.iterdir()) == ["extra.json"]  # not extra-2.json beside it
            assert dropped["id"] not in served_ids() and set(ids) - {dropped["id"]} <= served_ids()
            assert len(app.state.db.annotations()) == n_rows

            page = root.get("/admin/data").text
            assert page.count('action="/admin/upload/remove"') == 1 and 'name="name" value="extra.json"' in page
            r = root.post("/admin/upload/remove", data={"csrf_token": csrf, "name": "extra.json"})
            notice = root.get(r.headers["location"]).text
            assert "removed extra.json" in notice and f"the labels of {len(ids) - 1} CoT(s) no longer served are kept" in notice
            r = root.post("/admin/upload/remove", data={"csrf_token": csrf, "name": "run.json"})
            assert "no upload named" in root.get(r.headers["location"]).text
            r = alice.post("/admin/upload/remove", data={"csrf_token": acsrf, "name": "extra.json"})
            assert r.status_code == 403
    assert not set(ids) & served_ids() and list(folder.iterdir()) == []
    assert len(app.state.db.annotations()) == n_rows
    restarted = make_app(files=[run])
    assert not set(ids) & {c for it in restarted.state.data.items for c in it.cot_ids}
    assert len(restarted.state.db.annotations()) == n_rows
