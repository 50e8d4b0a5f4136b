"""The annotator's commands: users add/list, serve (wiring), annotations export, agreement."""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cli_in_process import run_cli
from thoughtsource.cli import app
from thoughtsource.errors import AuthError, StoreError
from thoughtsource.web.db import AnnotationDB, CotRef

from .test_agreement import LABEL, example_rows

runner = CliRunner()


def test_users_add_and_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "a.sqlite"
    monkeypatch.setattr("thoughtsource.cli.web._has_terminal", lambda: True)  # CliRunner's input plays the terminal
    r = runner.invoke(app, ["users", "add", "alice", "--db", str(db)], input="s3cret-pass\ns3cret-pass\n")
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["users", "add", "root", "--role", "admin", "--db", str(db), "--password-stdin"], input="adm1n-pass\n")
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["users", "list", "--db", str(db)])
    assert r.exit_code == 0 and "alice" in r.output and "admin" in r.output
    stored = AnnotationDB(db).user_credentials("alice")
    assert stored is not None and stored[1].startswith("$argon2id$") and "s3cret" not in stored[1]
    r = runner.invoke(app, ["users", "add", "alice", "--db", str(db), "--password-stdin"], input="another-pass\n")
    assert isinstance(r.exception, StoreError) and "already exists" in str(r.exception)
    r = runner.invoke(app, ["users", "add", "bob", "--db", str(db), "--password-stdin"], input="short\n")
    assert isinstance(r.exception, AuthError) and "at least 8" in str(r.exception)
    r = runner.invoke(app, ["users", "passwd", "alice", "--db", str(db), "--password-stdin"], input="new-secret-pass\n")
    assert r.exit_code == 0, r.output
    from thoughtsource.web.auth import authenticate

    assert authenticate(AnnotationDB(db), "alice", "new-secret-pass").name == "alice"
    r = runner.invoke(app, ["users", "passwd", "nobody", "--db", str(db), "--password-stdin"], input="new-secret-pass\n")
    assert isinstance(r.exception, StoreError) and "no user named" in str(r.exception)


def test_serve_builds_the_app_from_the_files(tmp_path: Path, examples_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    seen: dict = {}

    def fake_run(server: uvicorn.Server, sockets: list[socket.socket]) -> None:
        seen.update(app=server.config.app, address=sockets[0].getsockname())
        sockets[0].close()

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    f = examples_dir / "annotated" / "annotated_set.json"
    r = runner.invoke(app, ["serve", str(f), "--db", str(tmp_path / "a.sqlite"), "--port", "0", "--labels", "Good, Bad"])
    assert r.exit_code == 0, r.output
    host, port = seen["address"]
    assert host == "127.0.0.1" and port > 0
    assert f"serving 36 samples on http://127.0.0.1:{port} " in r.output and "no users yet" in r.output
    assert seen["app"].state.settings.labels == ["Good", "Bad"]
    assert TestClient(seen["app"], base_url=f"http://127.0.0.1:{port}").get("/login").status_code == 200
    assert TestClient(seen["app"], base_url="http://localhost").get("/login").status_code == 200
    # the default --allowed-hosts of a loopback bind: a name rebound to 127.0.0.1 by another site is refused
    assert TestClient(seen["app"], base_url="http://rebind.example").get("/login").status_code == 400


def test_serve_on_a_port_in_use_is_one_error_before_loading(tmp_path: Path, examples_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p = subprocess.run([sys.executable, "-m", "thoughtsource", "serve", str(examples_dir / "annotated" / "annotated_set.json"),
                            "--db", str(tmp_path / "a.sqlite"), "--port", str(port)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"]
    assert "serving" not in p.stdout + p.stderr and not (tmp_path / "a.sqlite").exists()


def _cot_refs(path: Path, n: int) -> list[CotRef]:
    data = json.loads(path.read_text())
    return [CotRef(d, s, x["id"], c["id"]) for d, sp in data.items() for s, xs in sp.items() for x in xs
            for c in x["generated_cot"]][:n]


def test_export_writes_into_generated_cot_annotations(tmp_path: Path, examples_dir: Path) -> None:
    f = examples_dir / "annotated" / "annotated_set.json"
    db = AnnotationDB(tmp_path / "a.sqlite")
    refs = _cot_refs(f, 3)
    db.upsert(refs[0], "alice", "Too verbose", True)
    db.upsert(refs[0], "alice", "comment", 'says "floor", then <carpet>')
    db.upsert(refs[1], "bob", "Incorrect reasoning", False)
    db.set_preferred(refs[2], "bob", True)
    db.upsert(CotRef("no_such", "test", "x", "y"), "bob", "Too verbose", True)  # not in the file: reported, skipped
    out = tmp_path / "out.json"
    args = ["annotations", "export", str(f), "--db", str(db.path), "--out", str(out)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "wrote 4 annotation(s)" in r.output

    def annotations(path: Path) -> dict[str, list[dict]]:
        d = json.loads(path.read_text())
        return {c["id"]: c["annotations"] for sp in d.values() for xs in sp.values() for x in xs for c in x["generated_cot"]}

    before, after = annotations(f), annotations(out)
    first = after[refs[0].cot_id]
    assert first[: len(before[refs[0].cot_id])] == before[refs[0].cot_id]  # Rob's annotations from the file are kept
    ours = [a for a in first if a["author"] == "alice"]
    assert [(a["key"], a["value"]) for a in ours] == [("Too verbose", True), ("comment", 'says "floor", then <carpet>')]
    assert all(a["date"] for a in ours)
    assert [(a["author"], a["key"], a["value"]) for a in after[refs[2].cot_id] if a["author"] == "bob"] == [("bob", "preferred", True)]
    total = sum(len(v) for v in after.values())
    assert total == sum(len(v) for v in before.values()) + 4
    # exporting again over the exported file replaces instead of duplicating
    r = runner.invoke(app, ["annotations", "export", str(out), "--db", str(db.path), "--out", str(tmp_path / "again.json")])
    assert r.exit_code == 0
    assert sum(len(v) for v in annotations(tmp_path / "again.json").values()) == total

    r = runner.invoke(app, [*args[:-2], "--out", str(tmp_path / "out.csv"), "--format", "csv", "--annotator", "alice"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader((tmp_path / "out.csv").open(newline="")))
    assert [(x["annotator"], x["key"], x["value"], x["model"]) for x in rows] == [
        ("alice", "Too verbose", "true", "text-davinci-003"), ("alice", "comment", 'says "floor", then <carpet>', "text-davinci-003")]


def test_agreement_command(tmp_path: Path) -> None:
    db = AnnotationDB(tmp_path / "a.sqlite")
    for row in example_rows():
        db.upsert(row.ref, row.annotator, row.key, row.value)
    r = runner.invoke(app, ["agreement", "--db", str(db.path), "--json"])
    assert r.exit_code == 0, r.output
    res = {x["label"]: x for x in json.loads(r.output)}
    assert res[LABEL]["units"] == 5 and res[LABEL]["alpha"] == pytest.approx(1 / 3)
    assert {(k["a"], k["b"]): k["kappa"] for k in res[LABEL]["kappas"]} == {
        ("A", "B"): pytest.approx(0.4), ("A", "C"): pytest.approx(1.0), ("B", "C"): pytest.approx(-1.0)}
    r = runner.invoke(app, ["agreement", "--db", str(db.path)])
    assert r.exit_code == 0 and "0.333" in r.output and "A-B (3): 0.400" in r.output


@pytest.mark.parametrize("args", [
    ["annotations", "export", "FILE", "--out", "OUT"],
    ["users", "list"],
    ["users", "role", "alice", "viewer"],
    ["tasks", "progress", "FILE"],
    ["tokens", "list"],
    ["agreement"],
])
def test_reading_a_database_that_is_not_there_is_an_error(args: list[str], tmp_path: Path, examples_dir: Path) -> None:
    """A mistyped --db must not become a new empty database and an empty export that looks like success."""
    db = tmp_path / "anotations.sqlite"
    f = examples_dir / "annotated" / "annotated_wt_davinci.json"
    args = [str(f) if a == "FILE" else str(tmp_path / "out.json") if a == "OUT" else a for a in args]
    r = runner.invoke(app, [*args, "--db", str(db)])
    assert isinstance(r.exception, StoreError), r.output
    assert str(r.exception).startswith(f"{db}: no annotation database here")
    assert not db.exists() and not (tmp_path / "out.json").exists()


def test_users_add_without_a_terminal_needs_password_stdin_and_results_go_to_stdout(tmp_path: Path) -> None:
    """Without a terminal, users add exited 130 with a GetPassWarning; users list and agreement printed to stderr."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTEST_CURRENT_TEST"}
    db = tmp_path / "a.sqlite"

    def ts(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--db", str(db), input=stdin, env=env)  # stdin a buffer: no terminal

    p = ts("users", "add", "alice", stdin="s3cret-pass\ns3cret-pass\n")
    assert p.returncode == 1 and p.stderr.startswith("error: no terminal to ask for the password") and "--password-stdin" in p.stderr
    assert "Traceback" not in p.stderr and "GetPassWarning" not in p.stderr and not db.exists()
    p = ts("users", "add", "alice", "--password-stdin", stdin="")
    assert p.returncode == 1 and "the password is empty" in p.stderr
    p = ts("users", "add", "alice", "--password-stdin", stdin="s3cret-pass\n")
    assert p.returncode == 0, p.stderr
    p = ts("users", "list")
    assert p.returncode == 0 and "alice" in p.stdout and "alice" not in p.stderr
    p = ts("agreement")
    assert p.returncode == 0 and "inter-annotator agreement" in p.stdout


#: ``serve`` with a Ctrl-C delivered at a chosen moment of uvicorn's start: "serve" as the server's task starts (asyncio's
#: runner had put its own SIGINT handler in: the task was cancelled and a CancelledError traceback came out), "run" just
#: before ``Server.run`` with SIGINT ignored by inheritance, as for a command started with ``&`` by a script (the
#: Ctrl-C was lost until uvicorn put its handler in, and the server went on serving: a test hung for an hour)
_CTRL_C_AT = """
import os, signal, sys
import uvicorn
when = sys.argv[1]
if when == "serve":
    original = uvicorn.Server.serve
    async def patched(self, sockets=None):
        os.kill(os.getpid(), signal.SIGINT)
        return await original(self, sockets)
    uvicorn.Server.serve = patched
else:
    original_run = uvicorn.Server.run
    def patched_run(self, sockets=None):
        os.kill(os.getpid(), signal.SIGINT)
        return original_run(self, sockets)
    uvicorn.Server.run = patched_run
from thoughtsource.cli import main
main(sys.argv[2:])
"""


@pytest.mark.slow
@pytest.mark.parametrize("when", ["serve", "run"])
def test_ctrl_c_while_serve_starts_exits_130_with_one_line(shared_data: Path, tmp_path: Path, when: str) -> None:
    import os
    import signal

    good = shared_data / "thoughtsource_examples" / "tests_unit_data" / "test_1_dataset.json"
    env = {**os.environ, "THOUGHTSOURCE_HOME": str(tmp_path / "home"), "COLUMNS": "250"}
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if when == "run" else None
    proc = subprocess.Popen([sys.executable, "-c", _CTRL_C_AT, when, "serve", str(good), "--db", str(tmp_path / "a.sqlite"),
                             "--port", "0"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ignore)
    try:
        _, err = proc.communicate(timeout=120)  # a guard against a server that goes on serving, not a measured time
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"Ctrl-C at {when!r} was lost: the server was still serving after 120 s")
    assert "Traceback" not in err and "Error" not in err, err[-2000:]
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "aborted", (proc.returncode, err[-500:])
