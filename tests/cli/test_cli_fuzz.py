"""Fuzzing the command line's file inputs: real files from ``../shared/data``, truncated and mutated at random (seeded),
fed to every command that reads a ThoughtSource file.  Whatever the damage, a command ends with a result or one
clear error line (exit 0, 1 or 2), never a traceback.

Byte damage (truncation, flipped and deleted bytes, invalid UTF-8) and structural damage (a key removed, a value of
another type, a list where a string belongs) of JSON, JSONL and Parquet inputs, and of a fragments file (generate
--fragments).  Seeded: a failure repeats.  Found so far: invalid UTF-8 in JSONL, a non-string or empty dataset/split
name (UnicodeDecodeError, TypeError and a pandas ValueError tracebacks).

``serve`` (the annotator, in its own process: it serves until stopped) with damaged data files, damaged, foreign or
misplaced annotation databases, a damaged upload and odd options; ``star run --config`` with damaged shipped configs
and a user's mistakes (malformed YAML, wrong types, unknown keys, missing files).  Found: another program's SQLite
file as --db (sqlite3.OperationalError), --similarity-threshold/--page-size out of range (pydantic ValidationError),
no or repeated --labels (served), a config that is not UTF-8 (UnicodeDecodeError), task_options of a wrong type
(TypeError), a key given twice in a config (the last one kept silently).
"""

from __future__ import annotations

import copy
import json
import logging
import random
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_in_process import fresh_process_state
from thoughtsource.cli import main

pytestmark = pytest.mark.slow  # ~30 s here: about 280 commands in-process (CI machines are slower)

SEED = 31
ODD_VALUES: list[Any] = [None, 0, -1, 1e308, "", "x", [], {}, [1, [2]], {"a": None}, True, "\udcff".encode("utf-8", "surrogatepass").decode("latin-1")]


def _byte_damage(data: bytes, rng: random.Random) -> bytes:
    kind = rng.choice(["truncate", "flip", "delete", "duplicate", "garbage"])
    i = rng.randrange(1, max(2, len(data)))
    if kind == "truncate":
        return data[:i]
    if kind == "flip":
        out = bytearray(data)
        for j in rng.sample(range(len(out)), min(8, len(out))):
            out[j] = rng.randrange(256)
        return bytes(out)
    if kind == "delete":
        return data[:i] + data[i + rng.randrange(1, 64):]
    if kind == "duplicate":
        return data[:i] + data[max(0, i - 200):i] + data[i:]
    return data[:i] + bytes(rng.randrange(256) for _ in range(16)) + data[i:]


def _paths(obj: Any, at: tuple = ()) -> list[tuple]:
    out = [at]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*at, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            out += _paths(v, (*at, i))
    return out


def _structural_damage(obj: Any, rng: random.Random) -> Any:
    obj = copy.deepcopy(obj)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice([p for p in _paths(obj) if p])
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        if rng.random() < 0.3 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(rng.choice(ODD_VALUES))
    return obj


def _damaged_inputs(shared_data: Path, tmp: Path, per_kind: int) -> list[tuple[str, Path]]:
    """(what was done, file): damaged copies of real ThoughtSource files, as JSON, JSONL and Parquet."""
    from thoughtsource.collection import Collection

    rng = random.Random(SEED)
    examples = shared_data / "thoughtsource_examples"
    sources = [examples / "annotated" / "annotated_wt_davinci.json", examples / "tests_unit_data" / "test_1_delete_cots.json"]
    out: list[tuple[str, Path]] = []
    n = 0

    def put(what: str, suffix: str, data: bytes) -> None:
        nonlocal n
        n += 1
        path = tmp / f"in{n}{suffix}"
        path.write_bytes(data)
        out.append((what, path))

    for src in sources:
        raw = src.read_bytes()
        obj = json.loads(raw)
        for k in range(per_kind):
            put(f"{src.name} bytes #{k}", ".json", _byte_damage(raw, rng))
            put(f"{src.name} structure #{k}", ".json", json.dumps(_structural_damage(obj, rng)).encode())
        jsonl = tmp / f"{src.stem}.jsonl"
        Collection.from_json(src).to_jsonl(jsonl)
        lines = jsonl.read_bytes().splitlines(keepends=True)
        for k in range(per_kind):
            put(f"{src.name} as JSONL bytes #{k}", ".jsonl", _byte_damage(jsonl.read_bytes(), rng))
            i = rng.randrange(len(lines))
            line = json.dumps(_structural_damage(json.loads(lines[i]), rng)).encode() + b"\n"
            put(f"{src.name} as JSONL structure #{k}", ".jsonl", b"".join([*lines[:i], line, *lines[i + 1:]]))
    pq = tmp / "pq"
    Collection.from_json(sources[0]).to_parquet(pq)
    parquet = next(pq.rglob("*.parquet")).read_bytes()
    for k in range(per_kind):
        put(f"parquet bytes #{k}", ".parquet", _byte_damage(parquet, rng))
    return out


def _commands(tmp: Path) -> dict[str, Callable[[Path], list[str]]]:
    return {
        "info": lambda f: ["info", str(f)],
        "validate": lambda f: ["validate", str(f)],
        "convert": lambda f: ["convert", str(f), str(tmp / "out.jsonl"), "--to", "jsonl"],
        "evaluate": lambda f: ["evaluate", str(f), "--out", str(tmp / "ev"), "--json"],
        "generate --dry-run": lambda f: ["generate", "--file", str(f), "--dry-run", "--backend", "mock", "--triggers", "kojima-01"],
        "runs compare": lambda f: ["runs", "compare", str(f), str(f)],
        "training-data sft": lambda f: ["training-data", "sft", str(f), "--out", str(tmp / "td")],
        "stats": lambda f: ["stats", "--file", str(f), "--out", str(tmp / "st")],
    }


@pytest.fixture(scope="module", autouse=True)
def _cli_built_once() -> Iterator[None]:
    """The real CLI, its click command built from the Typer app once for the module: ``main`` builds it again on every
    call (``typer.main.get_command(app)``, ~290 commands: over 80 % of each in-process command's time here), where a
    process builds it once.  The same command object parses and runs every argument list; only the rebuild is saved."""
    import typer.main

    from thoughtsource.cli import app

    build = typer.main.get_command
    built = build(app)
    patch = pytest.MonkeyPatch()
    patch.setattr(typer.main, "get_command", lambda typer_app: built if typer_app is app else build(typer_app))
    yield
    patch.undo()


def _run(args: list[str]) -> str | None:
    """None when the command ended as a command should (exit 0, 1 or 2); else what escaped it."""
    try:
        with fresh_process_state(args):
            main(args)
    except SystemExit as e:
        return None if e.code in (0, 1, 2, None) else f"exit {e.code}"
    except BaseException:
        return traceback.format_exc(limit=-3)
    return None


def test_damaged_files_never_end_in_a_traceback(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    inputs = _damaged_inputs(shared_data, tmp_path, per_kind=4)
    escaped = []
    for what, path in inputs:
        for name, args in _commands(tmp_path).items():
            if name == "validate" and path.suffix != ".json":
                continue
            problem = _run(args(path))
            if problem is not None:
                escaped.append(f"{name} on {what} ({path.name}):\n{problem}")
        capsys.readouterr()  # the commands' own output is not the test's
    good = shared_data / "thoughtsource_examples" / "tests_unit_data" / "test_1_dataset.json"
    fragments = shared_data / "thoughtsource_examples" / "fragments.json"
    rng = random.Random(SEED)
    for k in range(8):
        damaged = tmp_path / f"fragments{k}.json"
        damaged.write_bytes(_byte_damage(fragments.read_bytes(), rng) if k % 2 else
                            json.dumps(_structural_damage(json.loads(fragments.read_bytes()), rng)).encode())
        problem = _run(["generate", "--file", str(good), "--fragments", str(damaged), "--dry-run", "--backend", "mock",
                        "--triggers", "kojima-01"])
        if problem is not None:
            escaped.append(f"generate --fragments on damaged fragments.json #{k}:\n{problem}")
        capsys.readouterr()
    kinds = {e.strip().splitlines()[-1]: e for e in escaped}  # one example of each distinct error
    assert not escaped, "\n\n".join(kinds.values()) + f"\n\n({len(escaped)} in all)"


def _one_error_line(args: list[str], capsys: pytest.CaptureFixture) -> tuple[str | None, str]:
    """(None, the error line) when the command failed as a user's mistake should: exit 1 or 2, one 'error:' line (a
    config error's list of problems may follow it), no traceback; else (what went wrong, "")."""
    try:
        with fresh_process_state(args):  # `-q` sets the package logger to WARNING: not for the tests that follow
            main(args)
    except SystemExit as e:
        code = e.code
    except BaseException:
        capsys.readouterr()
        return traceback.format_exc(limit=-3), ""
    else:
        code = 0
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    if code not in (1, 2) or len(errors) != 1 or "Traceback" in err:
        return f"exit {code}, {len(errors)} error lines:\n{err[-2000:]}", ""
    return None, errors[0]


def _star_configs(shared_data: Path, tmp: Path) -> list[tuple[str, Path, bool]]:
    """(what was done, file, whether the config itself is wrong): shipped STaR run configs (one on a ThoughtSource file
    from ../shared/data) damaged at random, and the mistakes a user makes by hand: malformed YAML, wrong types,
    unknown keys, missing files."""
    import yaml

    from thoughtsource.star.config import CONFIGS_DIR

    rng = random.Random(SEED)
    dataset = shared_data / "thoughtsource_examples" / "tests_unit_data" / "test_1_dataset.json"
    on_file = yaml.safe_load((CONFIGS_DIR / "gsm8k_cpu.yaml").read_text()) | {"task": str(dataset), "task_options": {"n_test": 2}}
    sources = {name: (CONFIGS_DIR / f"{name}.yaml").read_text() for name in ("arithmetic_cpu", "unlabelled_majority")}
    sources["on_a_file"] = yaml.safe_dump(on_file)
    out: list[tuple[str, Path, bool]] = []

    def put(what: str, data: bytes | str, wrong: bool = False) -> None:
        path = tmp / f"star{len(out)}.yaml"
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        out.append((what, path, wrong))

    for name, text in sources.items():
        for k in range(4):
            put(f"{name} bytes #{k}", _byte_damage(text.encode(), rng))
            put(f"{name} structure #{k}", yaml.safe_dump(_structural_damage(yaml.safe_load(text), rng)))
    arithmetic = yaml.safe_load(sources["arithmetic_cpu"])
    by_hand = {
        "malformed YAML": "task: [arithmetic\niterations: 2\n",
        "a tab indent": "task: arithmetic\ntask_options:\n\tmin_digits: 1\n",
        "a list, not a mapping": "- task: arithmetic\n",
        "a scalar": "arithmetic\n",
        "empty": "",
        "invalid UTF-8": b"task: arithm\xff\xfetic\n",
        "duplicate key": "task: arithmetic\ntask: gsm8k\n",
        "iterations a word": {**arithmetic, "iterations": "two"},
        "negative iterations": {**arithmetic, "iterations": -1},
        "steps a number": {**arithmetic, "steps": 5},
        "lr a mapping": {**arithmetic, "lr": {"value": 1}},
        "task_options a list": {**arithmetic, "task_options": [1, 2]},
        "task_options of a wrong type": {**arithmetic, "task_options": {"min_digits": "one", "max_digits": 3}},
        "task_options out of range": {**arithmetic, "task_options": {"min_digits": 5, "max_digits": 1}},
        "task a number": {**arithmetic, "task": 7},
        "task null": {**arithmetic, "task": None},
        "task empty": {**arithmetic, "task": ""},
        "unknown top-level key": {**arithmetic, "iteratons": 2},
        "unknown nested key": {**arithmetic, "steps": {"frist": 4}},
        "task_options typo": {**arithmetic, "task_options": {"min_digit": 1}},
        "generation engine unknown": {**arithmetic, "generation": {"engine": "tgi"}},
        "generation's removed backend key": {**arithmetic, "generation": {"backend": "transformers"}},
        "a missing task file": {**on_file, "task": str(tmp / "missing" / "data.json")},
        "a task file that is a folder": {**on_file, "task": str(tmp)},
        "a damaged task file": {**on_file, "task": str(tmp / "damaged.json")},
        "an unknown task": {**arithmetic, "task": "arithmetics"},
    }
    (tmp / "damaged.json").write_bytes(dataset.read_bytes()[:5000])
    for what, data in by_hand.items():
        put(what, data if isinstance(data, str | bytes) else yaml.safe_dump(data), wrong=what != "empty")
    return out


def test_a_quiet_command_in_process_leaves_the_package_logging_as_it_was(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    """``-q`` sets the package logger to WARNING; run in process by the helpers here, it did so for every later test on
    the worker, and ``test_published_keys_and_bad_templates`` lost its INFO records in CI."""
    problem, line = _one_error_line(["-q", "info", str(tmp_path / "missing.json")], capsys)
    assert problem is None and "missing.json" in line
    assert _run(["-q", "info", str(tmp_path / "missing.json")]) is None
    capsys.readouterr()
    with caplog.at_level(logging.INFO):
        logging.getLogger("thoughtsource.generation.published").info("an info record")
    assert [r.getMessage() for r in caplog.records] == ["an info record"]


def test_damaged_star_configs_end_in_one_error_line(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``star run --config F``: every damaged or mistaken config ends in one error line with a non-zero exit.  The
    model given is a folder that cannot load, so a config that survives its checks fails there, after every input
    the config names was read, and no run starts."""
    model = tmp_path / "not_a_model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "nonsense"}')
    cases = _star_configs(shared_data, tmp_path)
    cases += [("a config that is not there", tmp_path / "nowhere.yaml", True), ("a config that is a folder", tmp_path, True),
              ("an unknown shipped name", Path("arithmetic_cpuu"), True)]
    escaped = []
    for k, (what, path, wrong) in enumerate(cases):
        problem, line = _one_error_line(["-q", "star", "run", "--config", str(path), "--model", str(model),
                                         "--out", str(tmp_path / f"run{k}")], capsys)
        if problem is None and wrong and "cannot load model" in line:
            problem = f"not refused as a wrong config: {line}"
        if problem is not None:
            escaped.append(f"star run --config on {what} ({path.name}):\n{problem}")
    kinds = {e.strip().splitlines()[-1]: e for e in escaped}
    assert not escaped, "\n\n".join(kinds.values()) + f"\n\n({len(escaped)} in all)"


def _serve(args: list[str], home: Path) -> tuple[str | None, str]:
    """``thoughtsource serve ARGS --port 0`` in its own process: (None, how it ended) when it served (stopped with
    Ctrl-C once it says so) or failed with exit 1 or 2 and one error line, no traceback; else (what went wrong, "")."""
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "THOUGHTSOURCE_HOME": str(home), "COLUMNS": "250",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "thoughtsource", "serve", *args, "--port", "0"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        for line in proc.stderr:  # ends when the process ends
            lines.append(line)
            if line.startswith("serving "):
                proc.send_signal(signal.SIGINT)  # once: a second Ctrl-C would interrupt the shutdown
                break
        try:  # a guard against a hang (a lost Ctrl-C kept the server serving), not a time the test measures
            _, rest = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            return "a Ctrl-C after 'serving' did not stop the server within 120 s:\n" + "".join(lines)[-2000:], ""
        lines += rest.splitlines(keepends=True)
        code = proc.returncode
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(lines)
    if any(line.startswith("serving ") for line in lines):
        return (None, "served") if "Traceback" not in err else (err[-2000:], "")
    errors = [line for line in lines if line.startswith("error:")]
    if code not in (1, 2) or len(errors) != 1 or "Traceback" in err:
        return f"exit {code}, {len(errors)} error lines:\n{err[-2000:]}", ""
    return None, errors[0].strip()


#: the options the settings refuse: an error line, never a server
REFUSED_OPTIONS = {
    "labels that are all empty": ["--labels", " , ,"],
    "a label given twice": ["--labels", "good,good"],
    "a threshold above 1": ["--similarity-threshold", "5"],
    "a threshold that is not a number": ["--similarity-threshold", "nan"],
    "a page size of 0": ["--page-size", "0"],
}
#: every case of ``serve_cases``, one test id each (a case is one ``serve`` process: ~26 in one test ran past its
#: timeout at load 4, and a test id per case says which input failed)
SERVE_CASES = [
    *(f"{src}{kind} #0" for src in ("annotated_wt_davinci.json", "test_1_delete_cots.json")
      for kind in (" bytes", " structure", " as JSONL bytes", " as JSONL structure")),
    "parquet bytes #0",
    *(f"a {what} database" for what in ("garbage", "truncated", "damaged", "empty", "text")),
    "another program's SQLite database", "a folder as the database", "a database under a file",
    "a damaged upload next to the database",
    "a missing data file", "a folder as the data file", "an empty data file",
    *REFUSED_OPTIONS,
]


@pytest.fixture(scope="module")
def serve_cases(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """{what: ``serve`` arguments}: damaged data files, annotation databases that are damaged, foreign or not files,
    a damaged upload waiting next to the database, missing or odd data paths, options the settings refuse."""
    import sqlite3

    from thoughtsource.web.db import AnnotationDB

    tmp_path = tmp_path_factory.mktemp("serve_fuzz")
    good = shared_data / "thoughtsource_examples" / "tests_unit_data" / "test_1_dataset.json"
    rng = random.Random(SEED)
    real_db = tmp_path / "real" / "annotations.sqlite"
    AnnotationDB(real_db)
    raw_db = real_db.read_bytes()
    dbs: dict[str, Path] = {}
    for what, data in {"garbage": bytes(rng.randrange(256) for _ in range(4096)), "truncated": raw_db[: len(raw_db) // 3],
                       "damaged": _byte_damage(raw_db, rng), "empty": b"", "text": b"users: admin\n"}.items():
        dbs[f"a {what} database"] = tmp_path / f"db_{what}" / "annotations.sqlite"
        dbs[f"a {what} database"].parent.mkdir()
        dbs[f"a {what} database"].write_bytes(data)
    foreign = tmp_path / "db_foreign" / "annotations.sqlite"
    foreign.parent.mkdir()
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE users (name INTEGER, role BLOB)")
        conn.execute("CREATE TABLE annotations (x)")
    dbs["another program's SQLite database"] = foreign
    dbs["a folder as the database"] = tmp_path / "db_folder"
    dbs["a folder as the database"].mkdir()
    (tmp_path / "a_file").write_text("x")
    dbs["a database under a file"] = tmp_path / "a_file" / "annotations.sqlite"
    uploads = tmp_path / "db_uploads" / "annotations.sqlite"
    AnnotationDB(uploads)
    (uploads.parent / "uploads").mkdir()
    (uploads.parent / "uploads" / "upload.json").write_bytes(good.read_bytes()[:3000])
    dbs["a damaged upload next to the database"] = uploads

    cases: dict[str, list[str]] = {}
    (tmp_path / "inputs").mkdir()
    for what, path in _damaged_inputs(shared_data, tmp_path / "inputs", per_kind=1):
        cases[what] = [str(path), "--db", str(tmp_path / "fresh" / f"{path.stem}.sqlite")]
    for what, db in dbs.items():
        cases[what] = [str(good), "--db", str(db)]
    fresh = str(tmp_path / "fresh" / "annotations.sqlite")
    cases["a missing data file"] = [str(tmp_path / "missing.json"), "--db", fresh]
    cases["a folder as the data file"] = [str(tmp_path / "inputs"), "--db", fresh]
    (tmp_path / "inputs" / "empty.json").write_bytes(b"")
    cases["an empty data file"] = [str(tmp_path / "inputs" / "empty.json"), "--db", fresh]
    for what, option in REFUSED_OPTIONS.items():
        cases[what] = [str(good), "--db", fresh, *option]
    assert list(cases) == SERVE_CASES, "SERVE_CASES must name every case the fixture builds, in its order"
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("what", SERVE_CASES)
def test_serve_inputs_never_end_in_a_traceback(serve_cases: dict[str, list[str]], what: str, tmp_path: Path) -> None:
    """``serve`` on one odd input serves (then stops on Ctrl-C) or ends in one error line, never a traceback; a
    refused option never serves."""
    problem, outcome = _serve(serve_cases[what], tmp_path / "home")
    if problem is None and what in REFUSED_OPTIONS and outcome == "served":
        problem = "served instead of refusing the option"
    assert problem is None, f"serve on {what}:\n{problem}"
