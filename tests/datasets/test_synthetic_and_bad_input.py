"""OpenBookQA and MedMCQA on synthetic fixtures in their raw formats; bad raw input names file and record."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from thoughtsource import datasets
from thoughtsource.datasets import (
    commonsense_qa,
    entailment_bank,
    medmc_qa,
    open_book_qa,
    pubmed_qa,
    qed,
    strategy_qa,
    worldtree,
)
from thoughtsource.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"


def _zip(src_dir: Path, target: Path, members: list[str]) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w") as z:
        for m in members:
            z.write(src_dir / m, m)
    return target


@pytest.fixture
def obqa_zip(tmp_path: Path) -> Path:
    base = "OpenBookQA-V1-Sep2018/Data/Additional"
    return _zip(FIXTURES / "open_book_qa", tmp_path / open_book_qa.ARCHIVE,
                [f"{base}/{s}_complete.jsonl" for s in ("train", "dev", "test")])


@pytest.fixture
def medmc_zip(tmp_path: Path) -> Path:
    return _zip(FIXTURES / "medmc_qa", tmp_path / medmc_qa.ARCHIVE, ["train.json", "dev.json", "test.json"])


def test_open_book_qa_on_synthetic_fixture(obqa_zip: Path) -> None:
    assert not open_book_qa.SPEC.verified_on_real_data
    files = {open_book_qa.ARCHIVE: obqa_zip}
    counts = {sp: len(list(open_book_qa.convert(files, sp))) for sp in open_book_qa.SPEC.splits}
    assert counts == {"train": 2, "validation": 1, "test": 3}
    test = list(open_book_qa.convert(files, "test"))
    s = test[1]
    assert (s.id, s.ref_id) == ("open_book_qa_test_1", "9-302")  # position, as the published files; the OBQA id as ref_id
    assert s.question == "A compass needle points toward"
    assert s.choices == ["the Moon", "magnetic north", "the nearest river", "the Sun"]
    assert s.answer == ["magnetic north"]
    assert s.cot == ["A compass needle aligns with Earth's magnetic field."]
    assert test[0].cot == ["Sound travels faster through solids than through gases."] and test[0].answer == ["a steel rail"]


def test_open_book_qa_through_load(obqa_zip: Path, tmp_path: Path) -> None:
    """The registry finds the archive in data_dir; its checksum is not pinned, so it is used with a warning."""
    loaded = datasets.load("open_book_qa", ["validation"], data_dir=tmp_path)
    assert [s.answer for s in loaded["validation"]] == [["make food"]]


def test_medmc_qa_on_synthetic_fixture(medmc_zip: Path) -> None:
    assert not medmc_qa.SPEC.verified_on_real_data
    files = {medmc_qa.ARCHIVE: medmc_zip}
    train = list(medmc_qa.convert(files, "train"))
    s = train[0]
    assert s.id == "11111111-aaaa-4bbb-8ccc-000000000001"
    assert s.choices == ["Vitamin A", "Vitamin B12", "Vitamin C", "Vitamin D"]
    assert s.answer == ["Vitamin C"]  # cop 3 is 1-based: opc
    assert s.cot == ["Ans. is 'c' i.e., Vitamin C. Ascorbic acid is needed for collagen hydroxylation."]
    assert s.model_extra["subject"] == "Biochemistry"
    assert train[1].answer == ["Femur"] and train[1].cot == []  # cop 1 = opa; exp null
    dev = list(medmc_qa.convert(files, "validation"))
    assert [d.answer for d in dev] == [["60-100"], ["Secreted by alpha cells"]]
    test = list(medmc_qa.convert(files, "test"))
    assert len(test) == 1 and test[0].answer == [] and test[0].cot == []  # hidden labels, empty exp


# ----------------------------------------------------------------------------------------- bad raw input


def _copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)
    return dst


def test_missing_field_names_file_and_record(tmp_path: Path, data_dir: Path) -> None:
    lines = (data_dir / commonsense_qa.SPLIT_FILES["validation"]).read_text().splitlines()[:3]
    rec = json.loads(lines[1])
    del rec["question"]["stem"]
    lines[1] = json.dumps(rec)
    path = tmp_path / "dev_rand_split.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as e:
        list(commonsense_qa.convert({commonsense_qa.SPLIT_FILES["validation"]: path}, "validation"))
    msg = str(e.value)
    assert str(path) in msg and ":2" in msg and "a7ab086045575bb497933726e4e6ad28" in msg and "'stem'" in msg


def test_truncated_jsonl_names_file_and_line(tmp_path: Path, data_dir: Path) -> None:
    raw = (data_dir / entailment_bank.SPLIT_FILES["validation"]).read_bytes()
    path = tmp_path / "dev.jsonl"
    path.write_bytes(raw[: len(raw) // 2])  # cut in the middle of a record
    with pytest.raises(DataError) as e:
        list(entailment_bank.convert({entailment_bank.SPLIT_FILES["validation"]: path}, "validation"))
    assert str(path) in str(e.value) and "truncated" in str(e.value) and e.value.line is not None


def test_strategy_qa_missing_answer(tmp_path: Path) -> None:
    bad = tmp_path / "dev.json"
    bad.write_text(json.dumps([{"qid": "abc", "question": "Is it?", "facts": ["A fact."]}]))
    ok = tmp_path / "train.json"
    ok.write_text("[]")
    with pytest.raises(DataError) as e:
        list(strategy_qa.convert({strategy_qa.TRAIN_FILES[0]: ok, strategy_qa.TRAIN_FILES[1]: bad}, "train"))
    assert e.value.record == "abc" and e.value.field == "answer" and e.value.path == str(bad)


def test_pubmed_qa_bad_decision(tmp_path: Path) -> None:
    data = tmp_path / "ori_pqal.json"
    data.write_text(json.dumps({"1": {"QUESTION": "Q?", "CONTEXTS": ["c"], "LONG_ANSWER": "L.", "final_decision": "perhaps"}}))
    ids = tmp_path / "test_ground_truth.json"
    ids.write_text("{}")
    with pytest.raises(DataError) as e:
        list(pubmed_qa.convert({pubmed_qa.DATA: data, pubmed_qa.TEST_IDS: ids}, "train"))
    assert e.value.record == "1" and e.value.field == "final_decision"


def test_qed_missing_annotation(tmp_path: Path) -> None:
    path = tmp_path / "qed-dev.jsonlines"
    path.write_text(json.dumps({"example_id": 42, "question_text": "who"}) + "\n")
    with pytest.raises(DataError) as e:
        list(qed.convert({qed.DEV: path}, "validation"))
    assert e.value.record == "42" and e.value.field == "annotation" and e.value.line == 1


def test_entailment_bank_unknown_premise(tmp_path: Path) -> None:
    rec = {"id": "X1", "input": "$proof$ ; $question$ = Q? ; $answer$ = A ; $hypothesis$ = h ; $context$ = sent1: a",
           "output": "$proof$ = sent1 & sent2 -> hypothesis; "}
    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(DataError) as e:
        list(entailment_bank.convert({entailment_bank.SPLIT_FILES["validation"]: path}, "validation"))
    assert e.value.record == "X1" and "'sent2'" in str(e.value)


def test_truncated_archive_is_reported(tmp_path: Path, data_dir: Path) -> None:
    raw = (data_dir / worldtree.ARCHIVE).read_bytes()
    path = tmp_path / "tg2020task-dataset.zip"
    path.write_bytes(raw[: len(raw) // 3])
    with pytest.raises(DataError) as e:
        list(worldtree.convert({worldtree.ARCHIVE: path}, "train"))
    assert str(path) in str(e.value)


def test_medmc_qa_missing_option(tmp_path: Path) -> None:
    rec = {"id": "q1", "question": "Q?", "opa": "a", "opb": "b", "opc": "c", "cop": 1}
    (tmp_path / "dev.json").write_text(json.dumps(rec) + "\n")
    archive = _zip(tmp_path, tmp_path / "data.zip", ["dev.json"])
    with pytest.raises(DataError) as e:
        list(medmc_qa.convert({medmc_qa.ARCHIVE: archive}, "validation"))
    assert e.value.record == "q1" and e.value.field == "opd" and "data.zip:dev.json" in str(e.value)


def test_checksum_mismatch_is_never_accepted(tmp_path: Path, data_dir: Path) -> None:
    """A raw file of one of these datasets that differs from the pinned sha256 is refused by load()."""
    path = _copy(data_dir / "qed/qed-dev.jsonlines", tmp_path / "qed/qed-dev.jsonlines")
    with open(path, "r+b") as fh:
        fh.seek(100)
        fh.write(b"X")  # same size, different content
    with pytest.raises(DataError, match="sha256 mismatch"):
        datasets.load("qed", data_dir=tmp_path, use_cache=False)


def test_medmc_qa_cop_is_one_based_per_published_samples(examples_dir: Path) -> None:
    """Evidence for the format assumption ``answer = options[cop - 1]`` without the raw files: in the published
    samples (converted with ``choices[cop-1]``) every explanation that names its option letter ("Ans-a",
    "Ans. is 'c'") names the published answer."""
    import re

    published: dict[str, dict] = {}
    for path in sorted((examples_dir / "model_runs").glob("*.json")):
        for s in json.loads(path.read_text())["medmc_qa"]["validation"]:
            published[s["id"]] = s
    letters = []
    for s in published.values():
        m = re.match(r"\s*Ans(?:wer)?[\s.:-]*(?:is)?[\s.:-]*\(?'?([a-dA-D])\b", s["cot"][0]) if s["cot"] else None
        if m:
            letters.append(("abcd".index(m.group(1).lower()), s["choices"].index(s["answer"][0])))
    assert len(letters) >= 80
    assert all(named == answer for named, answer in letters)
