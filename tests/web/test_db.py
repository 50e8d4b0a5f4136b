"""The annotation database: WAL mode, one row per (CoT, annotator, key), one star per sample, migrations once."""

from __future__ import annotations

import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from thoughtsource.errors import StoreError
from thoughtsource.web.db import MIGRATIONS, STEP_KEY, AnnotationDB, CotRef

REF = CotRef("worldtree", "test", "s1", "c1")
REF2 = CotRef("worldtree", "test", "s1", "c2")


def test_wal_mode_and_migrations_applied_once(tmp_path: Path) -> None:
    db = AnnotationDB(tmp_path / "a.sqlite")
    AnnotationDB(tmp_path / "a.sqlite")  # reopening applies nothing twice
    conn = sqlite3.connect(tmp_path / "a.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert [r[0] for r in conn.execute("SELECT name FROM _migrations")] == [m[0] for m in MIGRATIONS]
    assert db.count() == 0
    for suffix in ("", "-wal", "-shm"):  # it holds password hashes
        assert stat.S_IMODE((tmp_path / f"a.sqlite{suffix}").stat().st_mode) == 0o600, suffix


def test_upsert_is_unique_per_cot_annotator_key(tmp_path: Path) -> None:
    db = AnnotationDB(tmp_path / "a.sqlite")
    first = db.upsert(REF, "alice", "Too verbose", True)
    second = db.upsert(REF, "alice", "Too verbose", False)
    assert first.id == second.id and second.value is False
    db.upsert(REF, "bob", "Too verbose", True)
    db.upsert(REF, "alice", "comment", "long <b>")
    assert db.count() == 3
    assert {(r.annotator, r.key, r.value) for r in db.annotations(sample_id="s1")} == {
        ("alice", "Too verbose", False), ("bob", "Too verbose", True), ("alice", "comment", "long <b>")}
    assert db.delete_key(REF, "alice", "comment") and not db.delete_key(REF, "alice", "comment")
    with pytest.raises(sqlite3.IntegrityError), db.connect(write=True) as conn:
        conn.execute("INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                     "VALUES ('worldtree', 'test', 's1', 'c1', 'bob', 'Too verbose', 'true', '', '')")


def test_one_preferred_cot_per_sample_and_annotator(tmp_path: Path) -> None:
    db = AnnotationDB(tmp_path / "a.sqlite")
    db.set_preferred(REF, "alice", True)
    db.set_preferred(REF2, "alice", True)
    db.set_preferred(REF, "bob", True)
    stars = {(r.annotator, r.ref.cot_id) for r in db.annotations() if r.key == "preferred"}
    assert stars == {("alice", "c2"), ("bob", "c1")}
    db.set_preferred(REF2, "alice", False)
    assert {(r.annotator, r.ref.cot_id) for r in db.annotations() if r.key == "preferred"} == {("bob", "c1")}


def test_delete_by_id_only_by_its_author(tmp_path: Path) -> None:
    db = AnnotationDB(tmp_path / "a.sqlite")
    row = db.upsert(REF, "alice", "Too verbose", True)
    assert not db.delete(row.id, "bob")
    assert db.get(row.id) is not None
    assert db.delete(row.id, "alice") and db.get(row.id) is None


def test_users_unique_and_roles_checked(tmp_path: Path) -> None:
    db = AnnotationDB(tmp_path / "a.sqlite")
    db.add_user("alice", "hash", "admin")
    with pytest.raises(StoreError, match="already exists"):
        db.add_user("alice", "hash", "annotator")
    with pytest.raises(StoreError, match="unknown role"):
        db.add_user("bob", "hash", "root")
    assert [(u.name, u.role) for u in db.users()] == [("alice", "admin")]


def test_concurrent_writers_from_threads_lose_nothing(tmp_path: Path) -> None:
    db = AnnotationDB(tmp_path / "a.sqlite")

    def work(n: int) -> None:
        for k in range(25):
            db.upsert(CotRef("d", "s", f"x{k}", "c"), f"user{n}", "Too verbose", True)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.count() == 200


def _first_release_db(path: Path) -> sqlite3.Connection:
    """A database with the first release's schema (m001 only), open for inserts."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied TEXT NOT NULL)")
    for stmt in MIGRATIONS[0][1].split(";"):
        if stmt.strip():
            conn.execute(stmt)
    conn.execute("INSERT INTO _migrations VALUES ('m001_initial', '2026-01-01')")
    return conn


def test_names_of_users_removed_before_the_upgrade_are_kept_too(tmp_path: Path) -> None:
    """Annotations of a name without an account (removed by an older version, which deleted the row): the upgrade
    keeps the name as a removed account, so a new account cannot take it and inherit the annotations (issue 32)."""
    conn = _first_release_db(tmp_path / "old.sqlite")
    conn.execute("INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                 "VALUES ('d', 's', 'x', 'c', 'gone', 'Too verbose', 'true', '', '')")
    conn.close()
    db = AnnotationDB(tmp_path / "old.sqlite")
    assert db.users() == [] and db.user("gone") is None
    with pytest.raises(StoreError, match="removed account"):
        db.add_user("gone", "h", "annotator")
    db.add_user("new", "h", "annotator")
    assert [r.annotator for r in db.annotations()] == ["gone"]


def test_upgrade_from_the_first_schema_keeps_users_sessions_and_annotations(tmp_path: Path) -> None:
    """A database made by the first release (m001 only): users are renamed to their normalised names, with their
    annotations; sessions survive the rebuilt users table; the new role and columns work."""
    path = tmp_path / "old.sqlite"
    conn = _first_release_db(path)
    conn.execute("INSERT INTO users VALUES (1, 'Alice ', 'h1', 'annotator', '2026-01-01'), (2, 'bob', 'h2', 'admin', '2026-01-01')")
    conn.execute("INSERT INTO sessions VALUES ('t1', 1, '2026-01-01', '2999-01-01')")
    conn.execute("INSERT INTO annotations (dataset, split, sample_id, cot_id, annotator, key, value, created, updated) "
                 "VALUES ('d', 's', 'x', 'c', 'Alice ', 'Too verbose', 'true', '', '')")
    conn.close()
    db = AnnotationDB(path)
    assert [(u.name, u.role, u.disabled) for u in db.users()] == [("alice", "annotator", False), ("bob", "admin", False)]
    assert db.session_user("t1").name == "alice"
    assert [(r.annotator, r.key) for r in db.annotations()] == [("alice", "Too verbose")]
    db.add_user("Carol", "h3", "viewer")
    assert db.user(" CAROL ").role == "viewer"
    db.set_disabled("alice", True)
    assert db.session_user("t1") is None


def test_user_management_and_step_labels(tmp_path: Path) -> None:
    db = AnnotationDB(tmp_path / "a.sqlite")
    db.add_user("  Dora ", "h", "annotator")
    with pytest.raises(StoreError, match="already exists"):
        db.add_user("dora", "h", "admin")
    db.set_role("DORA", "viewer")
    assert db.user("dora").role == "viewer" and not db.user("dora").can_write
    with pytest.raises(StoreError, match="no user named"):
        db.set_role("nobody", "admin")
    db.remove_user("dora")
    assert db.users() == []
    db.set_step(REF, "alice", 4, 0, label=1)
    db.set_step(REF, "alice", 4, 1, label=0)
    row = db.set_step(REF, "alice", 4, 2, first_error=True)
    assert row.key == STEP_KEY and row.value == {"labels": [1, 0, -1, None], "first_error": 2}
    row = db.set_step(REF, "alice", 4, 2, first_error=False)
    assert row.value == {"labels": [1, 0, -1, None], "first_error": None}
    with pytest.raises(StoreError, match="out of range"):
        db.set_step(REF, "alice", 4, 4, label=1)
    with pytest.raises(StoreError, match="one of"):
        db.set_step(REF, "alice", 4, 0, label=2)


def test_a_database_written_by_the_code_before_the_shared_migration_runner_opens(tmp_path: Path) -> None:
    """``fixtures/annotations_e7d55d0.sqlite``: made by the annotation database of commit e7d55d0 (its own runner,
    which recorded ``_migrations (name, applied)``); it opens with nothing to apply and every resource reads back."""
    import shutil

    path = tmp_path / "old.sqlite"
    shutil.copyfile(Path(__file__).parent / "fixtures" / "annotations_e7d55d0.sqlite", path)
    db = AnnotationDB(path)
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM _migrations")] == [m[0] for m in MIGRATIONS]
    assert [(u.name, u.role) for u in db.users()] == [("alice", "annotator"), ("root", "admin")]
    assert db.session_user("tok").name == "alice" and db.token_user("th").name == "alice"
    assert [(r.annotator, r.key, r.value) for r in db.annotations()] == [
        ("alice", "Too verbose", True), ("alice", STEP_KEY, {"labels": [None, 1, None], "first_error": None})]
    assert [(r.annotator, r.key, r.value) for r in db.adjudications()] == [("root", "Too verbose", False)]
    assert db.assigned() == {"alice": [("worldtree", "test", "s1")]}
    assert db.uploads() == ["up1.json"] and db.setting("k") == {"a": 1}
    db.upsert(REF2, "alice", "Too verbose", False)  # and it takes writes
    assert db.count() == 3


def test_each_resource_class_works_alone_and_the_facade_has_them_all(tmp_path: Path) -> None:
    """``AnnotationDB`` is the four resource classes together; each opens (and migrates) the same file by itself."""
    from thoughtsource.web.db import Annotations, Database, Reviews, ServerState, Users

    path = tmp_path / "a.sqlite"
    Users(path).add_user("alice", "h", "annotator")
    Annotations(path).upsert(REF, "alice", "Too verbose", True)
    Reviews(path).replace_assignments([("worldtree", "test", "s1", "alice")])
    ServerState(path).set_setting("blind", True)
    db = AnnotationDB(path)
    assert db.user("alice") is not None and db.count() == 1 and db.assigned() == {"alice": [("worldtree", "test", "s1")]}
    assert db.setting("blind") is True
    own = {n for cls in (Users, Annotations, Reviews, ServerState) for n in vars(cls) if not n.startswith("__")}
    assert own <= set(dir(AnnotationDB)) and all(issubclass(c, Database) for c in (Users, Annotations, Reviews, ServerState))
