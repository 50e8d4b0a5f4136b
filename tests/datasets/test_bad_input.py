"""Broken raw files give a DataError naming the file and the record (and the field), never a bare KeyError.

Converters are run straight on edited copies of the real raw files (resolution would already reject them
by checksum, see test_download.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thoughtsource import datasets
from thoughtsource.errors import DataError


def convert(name: str, split: str, files: dict[str, Path]) -> list:
    return list(datasets.get(name).convert(files, split))


def copy(data_dir: Path, tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes((data_dir / name).read_bytes())
    return out


def test_truncated_jsonl(data_dir: Path, tmp_path: Path) -> None:
    path = copy(data_dir, tmp_path, "gsm8k/test.jsonl")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut in the middle of a line
    n_complete = data[: len(data) // 2].count(b"\n")
    with pytest.raises(DataError) as e:
        convert("gsm8k", "test", {"gsm8k/test.jsonl": path})
    assert e.value.path == str(path) and e.value.line == n_complete + 1
    assert f"{path}:{n_complete + 1}" in str(e.value) and "truncated" in str(e.value)


def test_missing_field_jsonl(data_dir: Path, tmp_path: Path) -> None:
    path = copy(data_dir, tmp_path, "aqua/dev.json")
    lines = path.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[4])
    del rec["correct"]
    lines[4] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        convert("aqua", "validation", {"aqua/dev.json": path})
    assert (e.value.path, e.value.line, e.value.record, e.value.field) == (str(path), 5, "aqua-validation-5", "correct")
    assert "required field is missing" in str(e.value)


def test_bad_answer_label(data_dir: Path, tmp_path: Path) -> None:
    path = copy(data_dir, tmp_path, "aqua/dev.json")
    lines = path.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[0])
    rec["correct"] = "F"
    lines[0] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        convert("aqua", "validation", {"aqua/dev.json": path})
    assert e.value.record == "aqua-validation-1" and e.value.field == "correct"


def test_gsm8k_without_final_answer(data_dir: Path, tmp_path: Path) -> None:
    path = copy(data_dir, tmp_path, "gsm8k/test.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[2])
    rec["answer"] = rec["answer"].split("####")[0]
    lines[2] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        convert("gsm8k", "test", {"gsm8k/test.jsonl": path})
    assert (e.value.line, e.value.record, e.value.field) == (3, "gsm8k-test-3", "answer")


def test_missing_field_json_array(data_dir: Path, tmp_path: Path) -> None:
    path = copy(data_dir, tmp_path, "svamp/SVAMP.json")
    records = json.loads(path.read_text(encoding="utf-8"))
    del records[41]["Equation"]
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(DataError) as e:
        convert("svamp", "train", {"svamp/SVAMP.json": path})
    assert (e.value.path, e.value.record, e.value.field) == (str(path), records[41]["ID"], "Equation")


def test_truncated_json_array(data_dir: Path, tmp_path: Path) -> None:
    path = copy(data_dir, tmp_path, "svamp/SVAMP.json")
    path.write_bytes(path.read_bytes()[:5000])
    with pytest.raises(DataError) as e:
        convert("svamp", "train", {"svamp/SVAMP.json": path})
    assert e.value.path == str(path) and e.value.line is not None and "invalid JSON" in str(e.value)


def _asdiv_files(data_dir: Path, xml: Path) -> dict[str, Path]:
    files = {s.name: data_dir / s.name for s in datasets.spec("asdiv").sources}
    files["asdiv/ASDiv.xml"] = xml
    return files


def test_truncated_xml(data_dir: Path, tmp_path: Path) -> None:
    path = copy(data_dir, tmp_path, "asdiv/ASDiv.xml")
    path.write_bytes(path.read_bytes()[:20000])
    with pytest.raises(DataError) as e:
        convert("asdiv", "train", _asdiv_files(data_dir, path))
    assert e.value.path == str(path) and e.value.line is not None and "truncated" in str(e.value)


def test_missing_element_xml(data_dir: Path, tmp_path: Path) -> None:
    path = copy(data_dir, tmp_path, "asdiv/ASDiv.xml")
    text = path.read_text(encoding="utf-8")
    text = text.replace("<Formula>6+9=15</Formula>", "", 1)  # nluds-0002
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as e:
        convert("asdiv", "train", _asdiv_files(data_dir, path))
    assert (e.value.record, e.value.field) == ("nluds-0002", "Formula")


def test_truncated_csv_row(data_dir: Path, tmp_path: Path) -> None:
    train = copy(data_dir, tmp_path, "mawps/cv_mawps/fold0/train.csv")
    dev = copy(data_dir, tmp_path, "mawps/cv_mawps/fold0/dev.csv")
    lines = train.read_text(encoding="utf-8").splitlines()
    train.write_text("\n".join([*lines[:11], lines[11].split(",")[0]]) + "\n", encoding="utf-8")  # row 11 cut short
    with pytest.raises(DataError) as e:
        convert("mawps", "train", {"mawps/cv_mawps/fold0/train.csv": train, "mawps/cv_mawps/fold0/dev.csv": dev})
    assert e.value.path == str(train) and e.value.record == "mawps-train-11" and e.value.field is not None


def test_mawps_placeholder_without_value(data_dir: Path, tmp_path: Path) -> None:
    train = copy(data_dir, tmp_path, "mawps/cv_mawps/fold0/train.csv")
    dev = copy(data_dir, tmp_path, "mawps/cv_mawps/fold0/dev.csv")
    text = train.read_text(encoding="utf-8").replace(",8.0 2.0,- number0 number1,6,", ",8.0,- number0 number1,6,", 1)
    train.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as e:
        convert("mawps", "train", {"mawps/cv_mawps/fold0/train.csv": train, "mawps/cv_mawps/fold0/dev.csv": dev})
    assert e.value.record == "mawps-train-1" and "number1" in str(e.value)
