"""Kojima et al. zero-shot-CoT logs attached to the samples they were generated for."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from thoughtsource import datasets
from thoughtsource.datasets import published_cots
from thoughtsource.datasets.cot_logs import read_kojima_log
from thoughtsource.schema import parse_number


def _by_question(name: str, data_dir: Path) -> dict[str, object]:
    dataset, split = name.split("/")
    stem = published_cots.sources(datasets.spec(dataset), split)[0].name
    return {published_cots.normalize_question(r.question): r for r in read_kojima_log(data_dir / stem)}


def test_normalize_question_drops_appended_choices() -> None:
    a = published_cots.normalize_question("What are candles good for eliminating? Answer Choices: (A) shelf (B) dark")
    assert a == published_cots.normalize_question("What are  candles good for eliminating?") == "what are candles good for eliminating"


def test_commonsense_qa_validation_gets_kojima_cots(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="thoughtsource.datasets.published_cots"):
        samples = datasets.load("commonsense_qa", ["validation"], data_dir=data_dir, use_cache=False)["validation"]
    assert "attached 1221 of 1221 published CoTs" in caplog.text
    logs = _by_question("commonsense_qa/validation", data_dir)
    for s in samples:
        assert len(s.generated_cot) == 1
        g = s.generated_cot[0]
        assert g.author == "kojima" and g.cot_trigger and g.cot and g.answers
        # the log's gold letter names the same choice as our answer: the match is the right question
        rec = logs[published_cots.normalize_question(s.question)]
        assert s.choices["ABCDE".index(rec.gold)] == s.answer[0]
        assert g.cot == rec.cot.strip()
    # train and test splits have no published CoTs
    assert not any(s.generated_cot for s in datasets.load("commonsense_qa", ["test"], data_dir=data_dir)["test"])


def test_strategy_qa_and_gsm8k_matches_agree_with_gold(data_dir: Path) -> None:
    st = datasets.load("strategy_qa", data_dir=data_dir)["train"]
    logs = _by_question("strategy_qa/train", data_dir)
    assert sum(len(s.generated_cot) for s in st) == 2290
    for s in st:
        rec = logs[published_cots.normalize_question(s.question)]
        assert {"yes": "True", "no": "False"}[rec.gold] == s.answer[0]
    gsm = datasets.load("gsm8k", ["test"], data_dir=data_dir)["test"]
    logs = _by_question("gsm8k/test", data_dir)
    assert sum(len(s.generated_cot) for s in gsm) == 1319
    for s in gsm:
        assert parse_number(logs[published_cots.normalize_question(s.question)].gold) == parse_number(s.answer[0])


def test_published_cots_can_be_turned_off_and_are_cached_separately(data_dir: Path) -> None:
    on = datasets.load("svamp", data_dir=data_dir)["train"]
    off = datasets.load("svamp", data_dir=data_dir, published_cots=False)["train"]
    assert sum(len(s.generated_cot) for s in on) == 1000
    assert not any(s.generated_cot for s in off)
    again = datasets.load("svamp", data_dir=data_dir)["train"]  # from the cache, still with CoTs, same ids
    assert [g.id for s in again for g in s.generated_cot] == [g.id for s in on for g in s.generated_cot]


def test_attach_reports_rate_and_is_idempotent(data_dir: Path) -> None:
    samples = datasets.load("commonsense_qa", ["validation"], data_dir=data_dir, published_cots=False)["validation"][:50]
    spec = datasets.spec("commonsense_qa")
    files = {s.name: data_dir / s.name for s in published_cots.sources(spec, "validation")}
    (report,) = published_cots.attach_published_cots(spec, "validation", samples, files)
    assert (report.dataset, report.records, report.matched, report.samples) == ("commonsense_qa", 1221, 50, 50)
    published_cots.attach_published_cots(spec, "validation", samples, files)
    assert all(len(s.generated_cot) == 1 for s in samples)


def test_the_logs_are_facts_of_their_datasets_spec() -> None:
    with_logs = {d for d in datasets.DATASETS if datasets.spec(d).published_cots}
    assert with_logs == {"aqua", "commonsense_qa", "gsm8k", "strategy_qa", "svamp"}
    for d in with_logs:
        (log,) = datasets.spec(d).published_cots
        assert log.optional and log.format == "log" and log.name.startswith("kojima_logs/") and log.url.endswith(log.name[12:])
        assert log.splits[0] in datasets.spec(d).splits and published_cots.sources(datasets.spec(d), log.splits[0]) == [log]
    assert published_cots.sources(datasets.spec("gsm8k"), "train") == []
    assert all(published_cots.sources(datasets.spec(d), s) == [] for d in datasets.DATASETS if d not in with_logs
               for s in datasets.spec(d).splits)
