"""The command line's conventions, tested on the real entry point: in process (``run_cli``), and in a subprocess
where the process is the point (Ctrl-C, a terminal that rich sees when it starts).

Usage errors: one line, exit 2.  Ctrl-C: "aborted", exit 130, the store intact, a re-run resumes.
Results on stdout, logs and progress on stderr.  ``--json`` parses.  ``-q`` hides progress bars.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_in_process import run_cli
from thoughtsource import datasets
from thoughtsource.testing.fault_server import run_fault_server

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
ENV.pop("PYTEST_CURRENT_TEST", None)


def ts(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env or ENV)


def ts_process(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """In a process of its own: rich reads TTY_COMPATIBLE and COLUMNS when the console is made, at start-up."""
    return subprocess.run([sys.executable, "-m", "thoughtsource", *args], capture_output=True, text=True, timeout=timeout,
                          env=env or ENV)


@pytest.fixture
def annotated(examples_dir: Path) -> Path:
    return examples_dir / "annotated" / "annotated_wt_davinci.json"


@pytest.mark.parametrize("args, message", [
    (["info", "--bogus", "x"], "No such option: --bogus"),
    (["convert"], "Missing argument 'file'"),
    (["users", "add", "x", "--role", "superuser"], "Invalid value for '--role'"),  # (viewer is a role since issue 15)
    (["serve", "x.json", "--port", "abc"], "Invalid value for '--port'"),
    (["datasets", "list", "--nope"], "No such option: --nope"),
    (["generate", "--file", "x.json"], "Invalid value for '--out': needed unless --dry-run"),
    (["evaluate", "x.json", "--mode", "lenient"], "Invalid value for '--mode'"),
])
def test_usage_error_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    p = ts(*args)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ") and message in lines[0]
    assert "--help'" in lines[0]


def test_user_error_is_exit_1_and_unknown_names_suggest(tmp_path: Path) -> None:
    p = ts("datasets", "export", "gsm8kk", "--out", str(tmp_path))
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == ["error: Unknown dataset 'gsm8kk'. Did you mean: gsm8k? Available: "
                                             + ", ".join(sorted(datasets.names()))]


def test_outputs_in_the_wrong_place_are_one_line_errors(annotated: Path, tmp_path: Path) -> None:
    """A folder where a file is written, a file where a folder is made: one line naming the path, exit 1."""
    a_file = tmp_path / "taken"
    a_file.write_text("keep me")
    cases = [
        (("convert", str(annotated), str(tmp_path), "--to", "thoughtsource-json"),
         f"error: {tmp_path}: is a folder; expected the path of a file to write"),
        (("convert", str(annotated), str(a_file), "--to", "parquet"),
         f"error: {a_file}: is a file; expected a folder to write into"),
        (("evaluate", str(annotated), "--out", str(a_file)),
         f"error: {a_file}: is a file; expected a folder to write into"),
        (("generate", "--file", str(annotated), "--backend", "mock", "--out", str(a_file / "out.json")),
         f"error: {a_file / 'out.json'}: cannot write there: {a_file} is a file, where a folder is needed"),
    ]
    for args, line in cases:
        p = ts(*args)
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert p.stderr.strip().splitlines()[-1] == line
    assert a_file.read_text() == "keep me" and sorted(x.name for x in tmp_path.iterdir()) == ["taken"]  # no temp files left


def test_results_on_stdout_notes_on_stderr(annotated: Path, tmp_path: Path) -> None:
    info = ts("info", str(annotated))
    assert info.returncode == 0 and info.stderr == ""
    assert "worldtree" in info.stdout and "generated" in info.stdout and "│ test " in info.stdout
    validate = ts("validate", str(annotated))
    assert validate.returncode == 0 and validate.stdout.startswith("ok: ") and validate.stderr == ""
    convert = ts("convert", str(annotated), str(tmp_path / "x.jsonl"), "--to", "jsonl")
    assert convert.returncode == 0 and convert.stdout == ""
    assert f"wrote 100 samples to {tmp_path / 'x.jsonl'}" in convert.stderr


def test_json_outputs_parse(annotated: Path) -> None:
    info = json.loads(ts("info", str(annotated), "--json").stdout)
    assert info == {"file": str(annotated), "splits": [{"dataset": "worldtree", "split": "test", "samples": 100,
                                                        "types": "multiplechoice", "reference_cots": 100,
                                                        "generated_cots": 11, "annotations": 9}]}
    listed = json.loads(ts("datasets", "list", "--json").stdout)
    assert [d["name"] for d in listed] == list(datasets.names())
    gsm8k = next(d for d in listed if d["name"] == "gsm8k")
    assert gsm8k["answer_type"] == "number" and gsm8k["splits"] == datasets.spec("gsm8k").counts


# --------------------------------------------------------------------------- generate: progress, Ctrl-C
def _generate_args(src: Path, url: str, db: Path, out: Path, n: int, concurrency: int = 4) -> list[str]:
    return ["generate", "--file", str(src), "--split", "train", "--n-samples", str(n), "--triggers", "kojima-01",
            "--backend", "openai", "--base-url", url, "--model", "fault-echo", "--concurrency", str(concurrency),
            "--db", str(db), "--out", str(out)]


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def test_quiet_hides_the_progress_bar(examples_dir: Path, tmp_path: Path) -> None:
    src = examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"
    tty = {**ENV, "TTY_COMPATIBLE": "1", "COLUMNS": "120"}  # rich draws progress bars as on a terminal
    with run_fault_server(latency_s=0.01) as server:
        loud = ts_process(*_generate_args(src, server.base_url, tmp_path / "a.sqlite", tmp_path / "a.json", 3), env=tty)
        quiet = ts_process("-q", *_generate_args(src, server.base_url, tmp_path / "b.sqlite", tmp_path / "b.json", 3), env=tty)
    assert loud.returncode == 0 and quiet.returncode == 0, loud.stderr + quiet.stderr
    assert "generate" in loud.stderr and "6/6" in loud.stderr  # the bar: 3 CoTs + 3 answers
    assert "6/6" not in quiet.stderr and "━" not in quiet.stderr
    assert quiet.stderr == "" and loud.stdout == quiet.stdout == ""


def test_ctrl_c_exits_130_keeps_the_store_and_resumes(examples_dir: Path, tmp_path: Path) -> None:
    src = examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"
    db, out = tmp_path / "s.sqlite", tmp_path / "out.json"
    # Every answer-extraction request hangs (for an hour): the run cannot finish before SIGINT arrives, however
    # loaded the machine is, while its CoT requests (stage 1) are answered and stored.
    with run_fault_server(then="hang", slow_s=3600, match="Therefore, among A through") as server:
        proc = subprocess.Popen([sys.executable, "-m", "thoughtsource", *_generate_args(src, server.base_url, db, out, 40)],
                                env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while _stored(db) < 6 or not any(r.outcome == "hang" for r in server.requests):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "aborted" and "Traceback" not in stderr
    assert not out.exists()
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    kept = {r[0] for r in con.execute("SELECT request FROM completions")}
    con.close()
    assert 6 <= len(kept) <= 40  # CoTs only: no answer extraction was ever answered
    with run_fault_server() as server:  # a healthy server: the same command resumes
        again = ts(*_generate_args(src, server.base_url, db, out, 40))
        assert again.returncode == 0, again.stderr
        resumed = server.requests
    stored_requests = {json.dumps([json.loads(r)["prompt"], json.loads(r)["params"]["max_tokens"]]) for r in kept}
    asked_again = [r for r in resumed if json.dumps([r.body.get("prompt"), r.body["max_tokens"]]) in stored_requests]
    assert asked_again == []  # nothing committed before Ctrl-C was asked for again
    assert len(resumed) == 80 - len(kept)
    data = json.loads(out.read_text())
    assert sum(len(x["generated_cot"]) for x in data["worldtree"]["train"]) == 40


def _commands(cmd, path: tuple[str, ...] = ()):
    yield path, cmd
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


def test_help_texts_lose_nothing_to_rich_markup() -> None:
    """Typer renders help with rich markup, where '[default: 3]' or "'thoughtsource[serve]'" is a style tag and
    vanishes: every bracket of every command's help and option help must reach the reader (escaped as \\[)."""
    import typer
    from rich.text import Text

    from thoughtsource.cli import app

    eaten = []
    for path, cmd in _commands(typer.main.get_command(app)):
        for where, text in [("help", cmd.help), *((p.name, getattr(p, "help", None)) for p in cmd.params)]:
            if text and Text.from_markup(text).plain != text.replace("\\[", "["):
                eaten.append((" ".join(path), where, text))
    assert eaten == []
    out = ts("serve-model", "--help", env={**ENV, "COLUMNS": "400"}).stdout
    assert "pip install '.[serve,models]' in a clone of thoughtsource" in out and "[default: auto]" in out
