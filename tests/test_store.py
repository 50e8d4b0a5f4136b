from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from thoughtsource.backends.base import Completion, Request
from thoughtsource.errors import StoreError
from thoughtsource.store import MIGRATIONS, CompletionStore, completion_key, m001_initial, migrate

IDENTITY = {"backend": "openai", "model": "m", "server_kind": "vllm"}


def test_put_get_and_wal(tmp_path: Path):
    path = tmp_path / "s.sqlite"
    req = Request(prompt="Q: 2+2?\nAnswer: Let's think step by step.", max_tokens=64)
    key = completion_key(IDENTITY, req)
    assert key.startswith("v1:") and len(key) == 3 + 64
    with CompletionStore(path) as st:
        assert st.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert st.db.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
        assert st.get(key) is None
        row = st.put(key, "openai", IDENTITY, req, Completion(" 4.", prompt_tokens=12, completion_tokens=2, latency_s=0.3, attempts=3,
                                                              finish_reason="stop"))
        assert (row.text, row.prompt_tokens, row.completion_tokens, row.attempts, row.finish_reason) == (" 4.", 12, 2, 3, "stop")
        # the first completion of a key wins
        st.put(key, "openai", IDENTITY, req, Completion("other"))
        assert len(st) == 1
    # committed: visible to a new connection (another process would see the same)
    with CompletionStore(path) as st:
        got = st.get(key)
        assert got is not None and got.text == " 4." and got.latency_s == pytest.approx(0.3)
        assert key in st and st.stats()["completion_tokens"] == 2


def test_key_covers_identity_prompt_params_and_sample_index():
    base = Request(prompt="p", max_tokens=10, temperature=0.7, seed=1)
    keys = {
        completion_key(IDENTITY, base),
        completion_key({**IDENTITY, "model": "other"}, base),
        completion_key(IDENTITY, Request(prompt="p2", max_tokens=10, temperature=0.7, seed=1)),
        completion_key(IDENTITY, Request(prompt="p", max_tokens=11, temperature=0.7, seed=1)),
        completion_key(IDENTITY, Request(prompt="p", max_tokens=10, temperature=0.8, seed=1)),
        completion_key(IDENTITY, Request(prompt="p", max_tokens=10, temperature=0.7, seed=2)),
        completion_key(IDENTITY, Request(prompt="p", max_tokens=10, temperature=0.7, seed=1, sample_index=1)),
        completion_key(IDENTITY, Request(messages=({"role": "user", "content": "p"},), max_tokens=10, temperature=0.7, seed=1)),
    }
    assert len(keys) == 8
    # metadata is not part of the key; dict order of the identity does not matter
    assert completion_key(IDENTITY, base) == completion_key(dict(reversed(list(IDENTITY.items()))),
                                                            Request(prompt="p", max_tokens=10, temperature=0.7, seed=1, metadata={"x": 1}))


def test_upgrade_from_the_first_schema_keeps_rows(tmp_path: Path):
    """A store written by a version that only knew m001 is migrated forward on open."""
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    assert migrate(db, [m001_initial]) == ["m001_initial"]
    db.execute(
        "INSERT INTO completions (key, backend, identity, request, text, created_at) VALUES ('v1:old', 'openai', '{}', '{}', 'kept', 'then')"
    )
    db.close()
    with CompletionStore(path) as st:
        applied = [r[0] for r in st.db.execute("SELECT name FROM _migrations ORDER BY name")]
        assert applied == [m.__name__ for m in MIGRATIONS]
        row = st.get("v1:old")
        assert row is not None and row.text == "kept" and row.finish_reason == ""
        assert "completions_created_at" in {r[1] for r in st.db.execute("PRAGMA index_list(completions)")}
    # opening again applies nothing
    with CompletionStore(path) as st:
        assert migrate(st.db) == []


def test_unusable_file_is_a_store_error(tmp_path: Path):
    bad = tmp_path / "not.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"not\.sqlite"):
        CompletionStore(bad)


def test_a_store_written_by_the_code_before_the_shared_migration_runner_opens(tmp_path: Path):
    """``tests/fixtures/completions_e7d55d0.sqlite``: made by the store of commit e7d55d0 (its own runner, which
    recorded ``_migrations (name, applied_at)``); it opens with nothing to apply and its row reads back whole."""
    import shutil

    path = tmp_path / "old.sqlite"
    shutil.copyfile(Path(__file__).parent / "fixtures" / "completions_e7d55d0.sqlite", path)
    with CompletionStore(path) as st:
        assert migrate(st.db) == []
        row = st.get("v1:abc")
        assert row is not None
        assert (row.text, row.prompt_tokens, row.completion_tokens, row.finish_reason) == ("kept", 1, 2, "stop")
        assert (row.reasoning, row.reasoning_tokens, row.reasoning_source) == ("think", 3, "field")
        assert [r[0] for r in st.db.execute("SELECT name FROM _migrations ORDER BY name")] == [m.__name__ for m in MIGRATIONS]
