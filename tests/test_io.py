from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cli_in_process import run_cli
from thoughtsource import io
from thoughtsource.collection import Collection
from thoughtsource.errors import DataError


def ts_json_files(examples_dir: Path) -> list[Path]:
    """Every JSON file under the examples folder that is in ThoughtSource format (and parses)."""
    out = []
    for p in sorted(examples_dir.rglob("*.json")):
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            continue
        if (
            isinstance(obj, dict)
            and obj
            and all(isinstance(v, dict) and v and all(isinstance(x, list) for x in v.values()) for v in obj.values())
        ):
            out.append(p)
    return out


def test_every_example_file_loads_and_round_trips(examples_dir: Path, tmp_path: Path):
    files = ts_json_files(examples_dir)
    assert len(files) >= 20, files  # fixtures, annotated files, model runs
    for f in files:
        raw = json.loads(f.read_text(encoding="utf-8"))
        c = Collection.from_json(f)
        assert len(c) == sum(len(x) for v in raw.values() for x in v.values())
        out = tmp_path / f.name
        c.dump(out)
        again = Collection.from_json(out)
        assert again == c, f
        # nothing was lost against the raw file: every key of every record keeps its value
        # (old spellings are renamed, ids become strings, null lists become [])
        assert_contains(json.loads(out.read_text()), raw, str(f))


RENAMED = {"templates_version": "fragments_version", "annotation": "annotations"}


def assert_contains(new, old, where: str) -> None:
    if isinstance(old, dict):
        assert isinstance(new, dict), where
        for k, v in old.items():
            key = RENAMED.get(k, k)
            assert key in new, f"{where}: key {k} lost"
            assert_contains(new[key], v, f"{where}.{k}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(new) == len(old), where
        for i, (a, b) in enumerate(zip(new, old, strict=True)):
            assert_contains(a, b, f"{where}[{i}]")
    elif old is None and new == []:
        pass
    elif isinstance(old, int) and not isinstance(old, bool) and isinstance(new, str):
        assert new == str(old), where
    else:
        assert new == old, where


def test_annotated_file_keeps_annotations_and_extras(examples_dir: Path):
    c = Collection.from_json(examples_dir / "annotated" / "annotated_st_davinci.json")
    x = c["strategy_qa"]["train"][0]
    assert x.id == "1b29d402c3e17cb3b435"
    assert x.model_extra["subsetType"] == "train"
    ann = x.generated_cot[0].annotations[0]
    assert (ann.key, ann.value, ann.author) == ("Incorrect reasoning", "true", "Rob")


def test_invalid_json_names_file_line_and_column(tmp_path: Path):
    p = tmp_path / "broken.json"
    p.write_text('{"gsm8k": {"test": [\n  {"id": "1",, }\n]}}')
    with pytest.raises(DataError) as e:
        Collection.from_json(p)
    assert e.value.line == 2 and e.value.column == 14
    assert str(p) in str(e.value) and ":2:14" in str(e.value)


def test_malformed_published_file_is_reported(examples_dir: Path):
    p = examples_dir / "notebooks" / "internal_documentation" / "newly_annotated" / "chat_hard.json"
    with pytest.raises(DataError, match=r"chat_hard.json:10146:46: invalid JSON"):
        Collection.from_json(p)


def _one(sample: dict) -> dict:
    return {"worldtree": {"train": [sample]}}


def test_wrong_answer_type_is_a_structural_error(tmp_path: Path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_one({"id": "7", "question": "?", "type": "essay"})))
    with pytest.raises(DataError, match=r"worldtree/train/7: field 'type'"):
        Collection.from_json(p)


def test_number_answer_that_is_not_a_number(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_one({"id": "n1", "question": "?", "type": "number", "answer": ["twelve"]})))
    with caplog.at_level(logging.WARNING):
        c = Collection.from_json(p)  # lenient: loads, warns
    assert len(c) == 1 and "expected a number, got 'twelve'" in caplog.text
    with pytest.raises(DataError, match="expected a number, got 'twelve'"):
        Collection.from_json(p, validate=True)


def test_multiplechoice_answer_not_among_choices(tmp_path: Path):
    p = tmp_path / "t.json"
    p.write_text(
        json.dumps(_one({"id": "m1", "question": "?", "type": "multiplechoice", "choices": ["a", "b"], "answer": ["c"]}))
    )
    with pytest.raises(DataError) as e:
        Collection.from_json(p, validate=True)
    assert "worldtree/train/m1: field 'answer': 'c' is not one of the choices" in str(e.value)


def test_missing_required_field(tmp_path: Path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(_one({"id": "q1", "type": "text"})))
    with pytest.raises(DataError) as e:
        Collection.from_json(p)
    assert "worldtree/train/q1: field 'question': required field is missing" in str(e.value)


def test_wrong_structure(tmp_path: Path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"worldtree": [1, 2]}))
    with pytest.raises(DataError, match="expected an object"):
        Collection.from_json(p)


def test_atomic_write_leaves_old_file_on_crash(tmp_path: Path):
    p = tmp_path / "out.json"
    p.write_text("old")
    with pytest.raises(RuntimeError), io.atomic_write(p) as fh:
        fh.write("half")
        raise RuntimeError("crash")
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["out.json"]


def test_atomic_write_gives_normal_permissions(tmp_path: Path):
    import os

    p = tmp_path / "new.json"
    with io.atomic_write(p) as fh:
        fh.write("{}")
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask


def test_parquet_and_hf_round_trip_keep_nested_fields(examples_dir: Path, tmp_path: Path):
    c = Collection.from_json(examples_dir / "annotated" / "annotated_set.json")
    c = c.merge(Collection.from_json(examples_dir / "tests_unit_data" / "test_1_evaluate.json"))
    # a value that does not fit its column: model given as a dict, numeric annotation value
    cot = c["worldtree"]["train"][0].generated_cot[0]
    cot.model = {"name": "smollm2", "temperature": 0.7}
    c["commonsense_qa"]["validation"][0].generated_cot[0].annotations[0].value = 3
    c.to_parquet(tmp_path / "pq")
    assert Collection.from_parquet(tmp_path / "pq") == c
    dsd = c.to_hf_dataset()
    assert set(dsd) == {"validation", "test", "train"}
    assert "generated_cot" in dsd["train"].column_names
    assert Collection.from_hf_dataset(dsd) == c
    jl = tmp_path / "c.jsonl"
    c.to_jsonl(jl)
    assert Collection.from_jsonl(jl) == c


def _nested_file(tmp_path: Path, depth: int, suffix: str = ".json") -> Path:
    value = "[" * depth + "]" * depth
    sample = '{"id": "1", "question": "q", "type": "text", "answer": ["a"], "extra": ' + value + '}'
    path = tmp_path / f"deep{depth}{suffix}"
    if suffix == ".jsonl":
        path.write_text(sample[:-1] + ', "dataset": "d", "split": "t"}\n')
    else:
        path.write_text('{"d": {"t": [' + sample + ']}}')
    return path


@pytest.mark.parametrize("depth", [300, 10_000])
@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_deeply_nested_json_is_one_clear_error(tmp_path: Path, depth: int, suffix: str) -> None:
    """Issue 23: 10,000 levels raised RecursionError (a bare 500 on upload, a traceback in `validate`); 300 levels
    loaded but could not be written back."""
    with pytest.raises(DataError, match=rf"nested more than {io.MAX_JSON_DEPTH} levels deep"):
        Collection.load(_nested_file(tmp_path, depth, suffix), validate=True)
    assert io.json_depth(json.loads('{"a": [[1], {"b": []}]}'), 100) == 4


def test_validate_reports_deep_json_in_one_line(tmp_path: Path) -> None:
    p = run_cli("validate", str(_nested_file(tmp_path, 10_000)))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "nested more than 100 levels deep" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_duplicate_sample_ids_are_a_violation(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rec = {"id": "1", "question": "q", "type": "text", "answer": ["a"]}
    path = tmp_path / "dup.json"
    path.write_text(json.dumps({"d": {"t": [rec, {**rec, "question": "another"}], "u": [rec]}}))
    with pytest.raises(DataError, match="1 schema violation") as e:
        Collection.load(path, validate=True)
    assert e.value.problems == ["d/t/1: duplicate sample id (record #1)"]  # split u has its own ids
    with caplog.at_level(logging.WARNING):
        assert len(Collection.load(path)) == 3  # without validation: a warning
    assert "duplicate sample id" in caplog.text


def test_validate_refuses_duplicate_sample_ids(tmp_path: Path) -> None:
    """Issue 23: `thoughtsource validate` accepted a split with the same sample id twice (only the first is served)."""
    rec = {"id": "1", "question": "q", "type": "text", "answer": ["a"]}
    path = tmp_path / "dup.json"
    path.write_text(json.dumps({"d": {"t": [rec, {**rec, "question": "another"}]}}))
    p = run_cli("validate", str(path))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "1 schema violation" in p.stderr and "d/t/1: duplicate sample id (record #1)" in p.stderr, p.stderr


def test_a_parquet_file_written_by_another_tool_is_one_clear_error(examples_dir: Path, tmp_path: Path) -> None:
    """A Parquet file that is not ours (an HF dataset export, a pandas frame) was a KeyError: 'dataset' traceback."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    foreign = tmp_path / "gsm8k.parquet"
    pq.write_table(pa.table({"question": ["What is 2 + 2?"], "answer": ["#### 4"]}), foreign)
    with pytest.raises(DataError, match="not a ThoughtSource Parquet file: no column dataset, split, id") as info:
        Collection.load(foreign)
    assert str(foreign) in str(info.value) and "question, answer" in str(info.value)
    # ours with a column of the wrong kind (a sample id that is a list) is one line too
    ours = Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json")
    ours.to_parquet(tmp_path / "pq")
    path = next((tmp_path / "pq").rglob("*.parquet"))
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.column_names.index("question"), "question",
                                    pa.array([[1]] * table.num_rows)), path)
    with pytest.raises(DataError, match="not a valid ThoughtSource sample: question"):
        Collection.load(path)
    p = run_cli("info", str(foreign))
    assert p.returncode == 1 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_outputs_that_cannot_be_replaced_are_refused_before_any_work(examples_dir: Path, tmp_path: Path) -> None:
    """/proc/gen.json passed os.access (as root) and failed after the whole generation, naming a temp file; /dev/null
    would have been replaced by a regular file."""
    with pytest.raises(DataError, match=r"^/proc/gen\.json: cannot write there: .* \(creating a file in /proc\)"):
        io.check_out("/proc/gen.json")
    with pytest.raises(DataError, match=r"^/dev/null: is not a regular file"):
        io.check_out("/dev/null")
    with pytest.raises(DataError, match=r"^/proc/gen\.json: cannot write there"), io.atomic_write("/proc/gen.json") as fh:
        fh.write("x")
    io.check_out(tmp_path / "new" / "deeper" / "out.json")  # a folder still to be made is fine
    assert not (tmp_path / "new").exists() and not list(tmp_path.iterdir())  # and nothing is left behind
    src = examples_dir / "tests_unit_data" / "test_1_dataset.json"
    p = run_cli("generate", "--file", str(src), "--out", "/proc/gen.json")
    assert p.returncode == 1 and p.stderr.strip().startswith("error: /proc/gen.json: cannot write there"), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
