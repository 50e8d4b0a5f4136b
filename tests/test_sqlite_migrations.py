"""The one migration runner: statements cut by SQLite's grammar, one transaction per migration, both bookkeeping
columns of the runners it replaced read, a foreign file left untouched."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from thoughtsource.sqlite_migrations import Migration, applied, migrate, statements


def _conn(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def test_statements_are_cut_by_sqlite_not_by_every_semicolon() -> None:
    script = """
        CREATE TABLE t (x TEXT DEFAULT 'a;b');
        CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = x || ';'; END;
        INSERT INTO t (x) VALUES ('c;d')
    """
    got = statements(script)
    assert len(got) == 3
    assert got[1].startswith("CREATE TRIGGER") and got[1].endswith("END;")
    with pytest.raises(sqlite3.ProgrammingError, match="incomplete"):
        statements("CREATE TABLE t (x TEXT DEFAULT 'unterminated;")


def test_sql_script_with_a_trigger_runs(tmp_path: Path) -> None:
    conn = _conn(tmp_path / "a.sqlite")
    migrate(conn, [("m001", "CREATE TABLE t (x TEXT DEFAULT 'a;b'); "
                            "CREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = x || ';!'; END; "
                            "INSERT INTO t DEFAULT VALUES")])
    assert conn.execute("SELECT x FROM t").fetchall() == [("a;b;!",)]


def test_each_migration_once_in_order_and_recorded(tmp_path: Path) -> None:
    calls: list[str] = []

    def m001(conn: sqlite3.Connection) -> None:
        calls.append("m001")
        conn.execute("CREATE TABLE t (x INTEGER)")

    ms = [m001, Migration("m002", "ALTER TABLE t ADD COLUMN y TEXT"), ("m003", "CREATE INDEX t_y ON t (y)")]
    conn = _conn(tmp_path / "a.sqlite")
    assert migrate(conn, ms) == ["m001", "m002", "m003"]
    assert migrate(conn, ms) == [] and calls == ["m001"]
    assert applied(conn) == ["m001", "m002", "m003"]
    assert [r[1] for r in conn.execute("PRAGMA table_info(_migrations)")] == ["name", "applied_at"]


def test_a_failed_migration_leaves_the_file_as_the_one_before_left_it(tmp_path: Path) -> None:
    conn = _conn(tmp_path / "a.sqlite")
    ms = [("m001", "CREATE TABLE t (x INTEGER)"), ("m002", "CREATE TABLE u (y INTEGER); INSERT INTO nowhere VALUES (1)")]
    with pytest.raises(sqlite3.OperationalError, match="nowhere"):
        migrate(conn, ms)
    assert not conn.in_transaction
    assert applied(conn) == ["m001"]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"_migrations", "t"}  # m002's first statement was rolled back with it


def test_a_foreign_file_whose_first_migration_fails_is_left_untouched(tmp_path: Path) -> None:
    conn = _conn(tmp_path / "other.sqlite")
    conn.execute("CREATE TABLE users (whatever TEXT)")
    with pytest.raises(sqlite3.OperationalError, match="already exists"):
        migrate(conn, [("m001", "CREATE TABLE users (id INTEGER)")])
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["users"]  # no _migrations table left


@pytest.mark.parametrize("column", ["applied", "applied_at"])
def test_the_bookkeeping_of_both_former_runners_is_read_and_extended(tmp_path: Path, column: str) -> None:
    """The annotation database wrote ``_migrations (name, applied)``, the completion store ``(name, applied_at)``."""
    conn = _conn(tmp_path / "a.sqlite")
    conn.execute(f"CREATE TABLE _migrations (name TEXT PRIMARY KEY, {column} TEXT NOT NULL)")
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.execute("INSERT INTO _migrations VALUES ('m001', '2026/01/01 00:00:00')")
    ms = [("m001", "CREATE TABLE t (x INTEGER)"), ("m002", "ALTER TABLE t ADD COLUMN y TEXT")]
    assert migrate(conn, ms) == ["m002"]
    rows = conn.execute(f"SELECT name, {column} FROM _migrations ORDER BY name").fetchall()
    assert [r[0] for r in rows] == ["m001", "m002"] and rows[1][1]


def test_an_open_transaction_is_refused(tmp_path: Path) -> None:
    conn = _conn(tmp_path / "a.sqlite")
    conn.execute("BEGIN")
    with pytest.raises(sqlite3.ProgrammingError, match="no open transaction"):
        migrate(conn, [("m001", "CREATE TABLE t (x INTEGER)")])
