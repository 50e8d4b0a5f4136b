"""Streaming reads and writes (``io.iter_samples``, ``io.write_entries``) and the commands that use them (``info``,
``validate``, ``convert``): the same results as the in-memory path on every real ThoughtSource file, malformed records
named, and memory that does not grow with the file (a subprocess under an address-space cap)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_in_process import run_cli
from thoughtsource import io
from thoughtsource.cli import app
from thoughtsource.collection import Collection
from thoughtsource.errors import DataError
from thoughtsource.testing.scale import write_replicated

runner = CliRunner()
GPT35_RUN = "model_runs/thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"


def _real_files(examples_dir: Path) -> list[Path]:
    return sorted(examples_dir.rglob("*.json"))


def _cli(*args: str) -> tuple[int, str, str]:
    r = runner.invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def _run(*args: str) -> tuple[int, str, str]:
    """The command through the real entry point, as a user runs it (errors: one line on stderr, exit 1)."""
    p = run_cli(*args)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.slow
def test_streaming_commands_match_in_memory_on_every_real_file(examples_dir: Path, tmp_path: Path):
    """info --json, validate --json, convert to JSON / JSONL (byte for byte) and Parquet (sample for sample), and
    iter_samples, against Collection.load on each file of thoughtsource_examples; files the in-memory reader refuses
    are refused by the streaming one too."""
    compared = refused = 0
    for i, f in enumerate(_real_files(examples_dir)):
        try:
            c = Collection.load(f)
        except DataError as mem_error:
            with pytest.raises(DataError) as e:
                list(io.iter_samples(f))
            same = ("path", "line", "column", "field") if mem_error.message.startswith("invalid JSON") else ("message", "path",
                    "line", "column", "dataset", "split", "record", "field")
            assert [getattr(e.value, a) for a in same] == [getattr(mem_error, a) for a in same], f
            assert "\n" not in str(e.value)
            refused += 1
            continue
        streamed = [(d, s, x.to_dict()) for d, s, x in io.iter_samples(f)]
        assert streamed == [(d, s, x.to_dict()) for d, s, x in c.samples()], f

        code, out, _ = _cli("info", "--json", str(f))
        assert code == 0 and json.loads(out)["splits"] == c.info(), f

        code, out, _ = _cli("validate", "--json", str(f))
        try:
            Collection.load(f, validate=True)
            assert code == 0 and json.loads(out)["samples"] == len(c), f
        except DataError as e:
            verdict = json.loads(out)
            assert code == 1 and (verdict["error"], verdict["problems"]) == (e.message, e.problems), f

        mem, ours = tmp_path / f"{i}-mem", tmp_path / f"{i}-stream"
        c.dump(mem.with_suffix(".json"))
        c.to_jsonl(mem.with_suffix(".jsonl"))
        assert _cli("convert", str(f), str(ours.with_suffix(".json")), "--to", "thoughtsource-json")[0] == 0
        assert _cli("convert", str(f), str(ours.with_suffix(".jsonl")), "--to", "jsonl")[0] == 0
        assert _cli("convert", str(f), str(ours), "--to", "parquet")[0] == 0
        assert ours.with_suffix(".json").read_bytes() == mem.with_suffix(".json").read_bytes(), f
        assert ours.with_suffix(".jsonl").read_bytes() == mem.with_suffix(".jsonl").read_bytes(), f
        assert Collection.load(ours) == c, f
        # and back: streamed reads of the JSONL and Parquet written give the same info (a Parquet folder is read in
        # the order of its file names, in memory too)
        for other in (ours.with_suffix(".jsonl"), ours):
            code, out, _ = _cli("info", "--json", str(other))
            assert code == 0 and json.loads(out)["splits"] == Collection.load(other).info(), other
        assert json.loads(_cli("info", "--json", str(ours.with_suffix(".jsonl")))[1])["splits"] == c.info()
        compared += 1
    assert compared >= 20 and refused >= 1  # the released runs, annotated files, unit-test files; chat_hard.json is broken


def test_interleaved_jsonl_and_empty_splits_are_grouped_as_in_memory(examples_dir: Path, tmp_path: Path):
    c = Collection.load(examples_dir / "tests_unit_data" / "worldtree_2_merge.json")
    xs = [x.to_dict() for _, _, x in c.samples()]
    lines = [{"dataset": "b" if k % 2 else "a", "split": "test" if k % 3 else "train", **x} for k, x in enumerate(xs)]
    src = tmp_path / "mixed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in lines))
    mem = Collection.load(src)
    for fmt, name in (("thoughtsource-json", "o.json"), ("jsonl", "o.jsonl")):
        assert _cli("convert", str(src), str(tmp_path / name), "--to", fmt)[0] == 0
    mem.dump(tmp_path / "m.json")
    mem.to_jsonl(tmp_path / "m.jsonl")
    assert (tmp_path / "o.json").read_bytes() == (tmp_path / "m.json").read_bytes()
    assert (tmp_path / "o.jsonl").read_bytes() == (tmp_path / "m.jsonl").read_bytes()

    empty = tmp_path / "empty_parts.json"
    empty.write_text(json.dumps({"a": {"train": [], "test": [xs[0]]}, "b": {}}))
    assert _cli("convert", str(empty), str(tmp_path / "e.json"), "--to", "thoughtsource-json")[0] == 0
    Collection.load(empty).dump(tmp_path / "em.json")
    assert (tmp_path / "e.json").read_bytes() == (tmp_path / "em.json").read_bytes()
    assert json.loads(_cli("info", "--json", str(empty))[1])["splits"] == Collection.load(empty).info()


def _with_bad_record(examples_dir: Path, tmp_path: Path) -> tuple[Path, Path, str]:
    """The worldtree file as JSON and JSONL with its 51st sample's type made invalid; returns them and its id."""
    obj = json.loads((examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").read_text())
    xs = obj["worldtree"]["train"]
    assert len(xs) == 100
    xs[50]["type"] = "essay"
    js, jl = tmp_path / "bad.json", tmp_path / "bad.jsonl"
    js.write_text(json.dumps(obj, indent=2))
    jl.write_text("".join(json.dumps({"dataset": "worldtree", "split": "train", **x}) + "\n" for x in xs))
    return js, jl, xs[50]["id"]


def test_malformed_record_in_the_middle_is_one_line_and_skippable(examples_dir: Path, tmp_path: Path):
    js, jl, rid = _with_bad_record(examples_dir, tmp_path)
    for f, where in ((js, f"{js}: worldtree/train/{rid} (#50): field 'type'"), (jl, f"{jl}:51: worldtree/train/{rid}: field 'type'")):
        for command in ("info", "validate", "convert"):
            args = [command, str(f)] + ([str(tmp_path / "out.jsonl"), "--to", "jsonl"] if command == "convert" else [])
            code, out, err = _run(*args)
            assert code == 1 and err.startswith(f"error: {where}") and len(err.strip().splitlines()) == 1, (args, err)
        code, out, err = _run("info", "--json", "--skip-invalid", str(f))
        assert code == 0 and json.loads(out)["splits"][0]["samples"] == 99
        assert f"skipped 1 invalid sample(s); the first: {where}" in err
        code, _, err = _run("convert", "--skip-invalid", str(f), str(tmp_path / "out.jsonl"), "--to", "jsonl")
        assert code == 0 and "skipped 1 invalid sample(s)" in err
        assert len(Collection.load(tmp_path / "out.jsonl")) == 99
    # Parquet: the row is named
    pq_dir = tmp_path / "pq"
    Collection.load(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").to_parquet(pq_dir)
    import pyarrow as pa
    import pyarrow.parquet as pq

    f = pq_dir / "worldtree" / "train.parquet"
    t = pq.read_table(f)
    ids = t.column("id").to_pylist()
    ids[50] = None
    pq.write_table(t.set_column(t.column_names.index("id"), "id", pa.array(ids, pa.string())), f)
    code, _, err = _run("info", str(pq_dir))
    assert code == 1 and f"{f}:51: worldtree/train/#50: field 'id'" in err
    code, out, err = _run("info", "--json", "--skip-invalid", str(pq_dir))
    assert code == 0 and json.loads(out)["splits"][0]["samples"] == 99 and "skipped 1" in err


def test_json_syntax_error_names_line_column_and_sample(examples_dir: Path):
    f = examples_dir / "notebooks" / "internal_documentation" / "newly_annotated" / "chat_hard.json"
    with pytest.raises(DataError) as e:
        for _ in io.iter_samples(f):
            pass
    assert str(e.value).startswith(f"{f}:10146:46: medmc_qa/validation/#51: invalid JSON")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("content", "expected"), [
    (b'{"a": {"b": [', "a/b: invalid JSON: parse error: premature EOF"),
    (b'{"a": {"b": [{"id": "\xff\xfe", "question": "q", "type": "text"}]}}', "a/b/#0: not UTF-8 text"),
    (b'{"a": {"b": []}} extra', "invalid JSON: parse error: trailing garbage"),
    (b'{"a": {"b": [\n  {"id": "1",, }\n]}}', ":2:14: a/b/#0: invalid JSON"),
    (b'{"a": {"b": [' + b"[" * 100 + b"]" * 100 + b"]}}", "a/b/#0: JSON nested more than 100 levels deep"),
    (b'{"a": [1]}', "a: expected an object {split: [samples]}, got list"),
])
def test_damaged_json_is_one_line(tmp_path: Path, content: bytes, expected: str):
    f = tmp_path / "damaged.json"
    f.write_bytes(content)
    with pytest.raises(DataError) as e:
        list(io.iter_samples(f))
    assert str(e.value).startswith(str(f)) and expected in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_iter_samples_from_python(examples_dir: Path, tmp_path: Path):
    """The README's example: a sample at a time, from each format."""
    src = examples_dir / GPT35_RUN
    Collection.load(src).to_parquet(tmp_path / "pq")
    n = {fmt: sum(len(x.generated_cot) for _, _, x in io.iter_samples(p)) for fmt, p in (("json", src), ("pq", tmp_path / "pq"))}
    assert n == {"json": 1206, "pq": 1206}


CAP_MB = 150  # address space of the whole process (the interpreter, typer, pydantic, ijson: ~100 MB of it)


@pytest.mark.slow
def test_commands_finish_under_a_memory_cap_on_a_file_three_times_larger(examples_dir: Path, tmp_path: Path):
    """A JSON file of 450 MB (the released GPT-3.5 run's samples, new ids, each CoT repeated to ~20 KB like a
    reasoning trace): info, validate and convert run under RLIMIT_AS of 150 MB; Collection.load does not."""
    obj = json.loads((examples_dir / GPT35_RUN).read_text())
    big = tmp_path / "big.json"
    n = write_replicated(obj, big, 3 * CAP_MB << 20, trace_chars=20_000).samples
    assert big.stat().st_size > 3 * CAP_MB << 20

    def capped(code: str) -> subprocess.CompletedProcess[str]:
        prog = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({CAP_MB << 20}, {CAP_MB << 20}))\n" + code
        return subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=600)

    cli = "import sys; from thoughtsource.cli import main; sys.argv = ['thoughtsource'] + {args!r}; main()"
    p = capped(cli.format(args=["info", "--json", str(big)]))
    assert p.returncode == 0, p.stderr
    assert sum(r["samples"] for r in json.loads(p.stdout)["splits"]) == n
    p = capped(cli.format(args=["validate", str(big)]))
    assert p.returncode == 0 and f"{n} samples, no schema violations" in p.stdout, p.stderr
    out = tmp_path / "big.jsonl"
    p = capped(cli.format(args=["convert", str(big), str(out), "--to", "jsonl"]))
    assert p.returncode == 0 and f"wrote {n} samples" in p.stderr, p.stderr
    with open(out, "rb") as fh:
        assert sum(1 for _ in fh) == n
    out.unlink()
    p = capped(textwrap.dedent(f"""
        from thoughtsource.collection import Collection
        Collection.load({str(big)!r})
    """))
    assert p.returncode != 0 and "MemoryError" in p.stderr  # the in-memory path needs several times the file
