"""Fuzzing the command line's file inputs: real files from ``../shared/data``, truncated and mutated at random (seeded),
fed to every command that reads a ThoughtSource file.  Whatever the damage, a command ends with a result or one
clear error line (exit 0, 1 or 2), never a traceback.

Byte damage (truncation, flipped and deleted bytes, invalid UTF-8) and structural damage (a key removed, a value of
another type, a list where a string belongs) of JSON, JSONL and Parquet inputs, and of a fragments file (generate
--fragments).  Seeded: a failure repeats.  Found so far: invalid UTF-8 in JSONL, a non-string or empty dataset/split
name (UnicodeDecodeError, TypeError and a pandas ValueError tracebacks).
"""

from __future__ import annotations

import copy
import json
import random
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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


def _run(args: list[str]) -> str | None:
    """None when the command ended as a command should (exit 0, 1 or 2); else what escaped it."""
    try:
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
