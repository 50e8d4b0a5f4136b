"""The parser of Kojima et al.'s published zero-shot(-CoT) logs, on the real logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from thoughtsource.datasets.cot_logs import (
    KOJIMA_DATASET_TYPES,
    read_kojima_log,
    read_kojima_log_file,
    to_generated_cot,
)
from thoughtsource.errors import DataError
from thoughtsource.schema import GeneratedCot


@pytest.fixture(scope="module")
def logs_dir(shared_data: Path) -> Path:
    d = shared_data / "kojima_logs"
    if not d.is_dir():
        pytest.skip(f"Kojima logs not found at {d}")
    return d


def test_every_log_parses_and_reproduces_its_own_accuracy(logs_dir: Path) -> None:
    files = sorted(logs_dir.glob("*.log"))
    assert len(files) == 24
    for f in files:
        log = read_kojima_log_file(f)
        assert log.dataset in KOJIMA_DATASET_TYPES, f
        assert len(log.records) >= 254, f  # the parser also checks the "data size" the log announces
        # The authors' accuracy is exact string equality of their cleansed pred and the gold answer.
        mine = 100 * sum(r.pred == r.gold for r in log.records) / len(log.records)
        assert log.reported_accuracy is not None
        assert mine == pytest.approx(log.reported_accuracy, abs=1e-9), f
        assert [r.index for r in log.records] == list(range(len(log.records)))


def test_gsm8k_cot_record_fields(logs_dir: Path) -> None:
    recs = read_kojima_log(logs_dir / "gsm8k_zero_shot_cot.log")
    assert len(recs) == 1319
    r = recs[2]
    assert r.question.startswith("Kyle bought last year's best-selling book for $19.50.")
    assert r.cot_trigger == "Let's think step by step."
    assert r.cot is not None and "The original price was $26." in r.cot
    assert r.extraction_prompt == "Therefore, the answer (arabic numerals) is"
    assert r.extraction_text == " 26."
    assert (r.pred, r.gold) == ("26", "26")
    # The prompt reconstruction is exactly what the script printed.
    text = (logs_dir / "gsm8k_zero_shot_cot.log").read_text()
    assert r.extraction_prompt_text + r.extraction_text in text
    # The last record's answer spans several lines.
    assert recs[-1].extraction_text == ": \n\nThe boots cost more than $99."


def test_old_logs_with_cleansed_pred_before_keep_the_raw_output(logs_dir: Path) -> None:
    # In the older runs 'pred_before' was printed after removing ':'; the record keeps the model's text.
    recs = read_kojima_log(logs_dir / "strategyqa_zero_shot_cot.log")
    raw = [r.extraction_text for r in recs if r.extraction_text.startswith(":")]
    assert len(raw) > 100
    recs = read_kojima_log(logs_dir / "multiarith_zero_shot.log")  # no "Nst data" lines at all
    assert len(recs) == 600 and recs[0].extraction_text == " 3 days." and recs[0].cot is None


def test_to_generated_cot(logs_dir: Path) -> None:
    recs = read_kojima_log(logs_dir / "aqua_zero_shot_cot.log")
    g = to_generated_cot(recs[0])
    assert isinstance(g, GeneratedCot)
    assert (g.author, g.model, g.cot_trigger, g.date) == ("kojima", "text-davinci-002", "kojima-01", "2022/05/24")
    assert g.answers[0].answer_extraction == "kojima-A-E"
    assert g.answers[0].answer == "D."
    assert g.cot and g.cot.startswith("There are more than 501 students")
    assert to_generated_cot(recs[0]).id == g.id  # deterministic
    assert to_generated_cot(recs[0], sample_id="x").id != g.id
    ids = {
        "gsm8k": "kojima-numerals",
        "strategyqa": "kojima-yes-no",
        "date_understanding": "kojima-A-F",
        "shuffled_objects": "kojima-A-C",
        "last_letters": "kojima-01",
    }
    for name, ext in ids.items():
        rec = read_kojima_log(logs_dir / f"{name}_zero_shot_cot.log")[0]
        assert to_generated_cot(rec).answers[0].answer_extraction == ext
    zs = to_generated_cot(read_kojima_log(logs_dir / "svamp_zero_shot.log")[0])
    assert zs.cot_trigger is None and zs.cot == "" and zs.answers[0].answer_extraction is None


def test_errors_name_file_and_line(tmp_path: Path, logs_dir: Path) -> None:
    lines = (logs_dir / "svamp_zero_shot_cot.log").read_text().split("\n")[:60]
    bad = [ln for ln in lines if not ln.startswith("pred_after")]
    f = tmp_path / "svamp_zero_shot_cot.log"
    f.write_text("\n".join(bad))
    with pytest.raises(DataError) as e:
        read_kojima_log(f)
    assert "svamp_zero_shot_cot.log:" in str(e.value)
    with pytest.raises(DataError, match="must end in"):
        read_kojima_log(tmp_path / "svamp.log")
