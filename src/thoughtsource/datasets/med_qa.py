"""MedQA (Jin et al., 2021), USMLE questions in English, 5-option version (as ThoughtSource used it).

Raw files: the MedQA-USMLE 5-option dev (1,272) and test (1,273) files as republished, unchanged except for
an added ``question_open`` field, by DERA (Nair et al., 2023; ``curai/curai-research``, ``DERA/medqa_open/``):
one JSON object per line with ``question``, ``options`` {"A": …, "E": …}, ``answer_idx``, ``answer``,
``meta_info``.  The same files feed :mod:`.med_qa_open`.  MedQA's own release (one Google-Drive archive)
could not be obtained, so there is no ``train`` split (10,178 questions); the test questions are the ones
of the official ``US/test.jsonl`` in the same order (checked against the 4-option
``phrases_no_exclude_test.jsonl``, whose questions and answers agree line by line).

Ids: ``med_qa_<split>_<0-based line position>``, the scheme of the final ThoughtSource release
(ThoughtSource-100 lists ``med_qa_test_2``; older published files wrote just "2").  No reference CoT exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile
from ._records import Where, iter_jsonl, require
from ._text import squash

_DERA = "https://raw.githubusercontent.com/curai/curai-research/865aaa9b5efa3ea38a22c015730fd98fd77cd6a5/DERA/medqa_open"
DEV = SourceFile("med_qa_open/dev.jsonl", f"{_DERA}/dev.jsonl",
                 "3e296b791eb5ac9e66cad7e6e94a66899388d87ed4c5ec2db77857253b9e4d8a", 2233548, "jsonl", ("validation",))
TEST = SourceFile("med_qa_open/test.jsonl", f"{_DERA}/test.jsonl",
                  "e6239978644a158863ec9dc20ff5b10974315a5fce112d609e8f3551765db0b0", 2288234, "jsonl", ("test",))
FILES = {"validation": DEV, "test": TEST}

CITATION = (
    "@article{jin2021disease, title={What Disease does this Patient Have? A Large-scale Open Domain Question Answering "
    "Dataset from Medical Exams}, author={Jin, Di and Pan, Eileen and Oufattole, Nassim and Weng, Wei-Hung and Fang, "
    "Hanyi and Szolovits, Peter}, journal={Applied Sciences}, volume={11}, number={14}, pages={6421}, year={2021}}"
)

SPEC = DatasetSpec(
    name="med_qa",
    description="MedQA (USMLE, English, 5 options): medical board exam questions; validation and test splits.",
    homepage="https://github.com/jind11/MedQA",
    citation=CITATION,
    license="MIT",
    answer_type="multiplechoice",
    splits=("validation", "test"),
    sources=(DEV, TEST),
    converter_version=3,  # 3: the 5-option files (2: the 4-option test file)
    counts={"validation": 1272, "test": 1273},
    paper_counts={"total": 12723, "validation": 1272, "test": 1273},
    paper_table6=PaperTable6(12_723, 0, 1_273, 134_260, "multiplechoice"),
)


def medqa_records(path: Path, dataset: str, split: str) -> Iterator[tuple[int, Where, dict, list[str], str]]:
    """(position, where, record, choices A–E in order, gold answer text) of a MedQA JSON-lines file.

    The answer is the option ``answer_idx`` names; a record whose ``answer`` text disagrees with it is an error.
    """
    for index, (where, rec) in enumerate(iter_jsonl(path, dataset, split)):
        where = where.at(record=str(index))
        options = require(rec, "options", where, dict)
        labels = sorted(options)
        choices = [squash(str(options[k])) for k in labels]
        key = str(require(rec, "answer_idx", where, str)).strip()
        if key not in options:
            raise where.error(f"answer_idx {key!r} is not one of the option keys {labels}", field="answer_idx")
        answer = choices[labels.index(key)]
        text = squash(str(require(rec, "answer", where, str)))
        if text != answer:
            raise where.error(f"answer {text!r} is not option {key} ({answer!r})", field="answer")
        yield index, where, rec, choices, answer


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    for index, where, rec, choices, answer in medqa_records(files[FILES[split].name], SPEC.name, split):
        yield Sample(id=f"{SPEC.name}_{split}_{index}", ref_id="", question=squash(require(rec, "question", where, str)),
                     type="multiplechoice", choices=choices, context="", cot=[], answer=[answer])
