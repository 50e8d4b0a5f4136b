"""MedQA (Jin et al., 2021), USMLE questions in English, 4-option version.

Raw file: ``phrases_no_exclude_test.jsonl`` of the official release (``data_clean/questions/US/4_options/``;
one JSON object per line: ``question``, ``options`` {"A": …, "D": …}, ``answer_idx``, ``answer``,
``meta_info``, ``metamap_phrases``).  The release is distributed as one Google-Drive archive; only the
test file (1,273 questions) could be obtained, byte-exact from a GitHub copy, so only ``test`` is offered.
ThoughtSource used the 5-option ``US/test.jsonl``: same questions in the same order, one more distractor.
No reference CoT exists.

Ids: ``med_qa_test_<0-based line position>``, the scheme of the final ThoughtSource release
(ThoughtSource-100 lists ``med_qa_test_2``; older published files wrote just "2").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, SourceFile
from ._records import iter_jsonl, require
from ._text import squash

TEST = "med_qa/phrases_no_exclude_test.jsonl"

SPEC = DatasetSpec(
    name="med_qa",
    description="MedQA (USMLE, English, 4 options): medical board exam questions; test split only.",
    homepage="https://github.com/jind11/MedQA",
    citation=(
        "@article{jin2021disease, title={What Disease does this Patient Have? A Large-scale Open Domain Question Answering "
        "Dataset from Medical Exams}, author={Jin, Di and Pan, Eileen and Oufattole, Nassim and Weng, Wei-Hung and Fang, "
        "Hanyi and Szolovits, Peter}, journal={Applied Sciences}, volume={11}, number={14}, pages={6421}, year={2021}}"
    ),
    license="MIT",
    answer_type="multiplechoice",
    splits=("test",),
    sources=(
        SourceFile(TEST,
                   "https://raw.githubusercontent.com/Taewhoo/BioRAG/fdb2e334aa08ad6fc3e3fefd91e409961ebf3e0b/phrases_no_exclude_test.jsonl",
                   "2e51d17d47099a72c4eea6b6a3307de71360333e0c99beb1d53d7a42834cacc4", 2075680, "jsonl", ("test",)),
    ),
    converter_version=2,
    counts={"test": 1273},
    paper_counts={"total": 12723, "test": 1273},
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    for index, (where, rec) in enumerate(iter_jsonl(files[TEST], SPEC.name, split)):
        where = where.at(record=str(index))
        options = require(rec, "options", where, dict)
        labels = sorted(options)
        choices = [squash(str(options[k])) for k in labels]
        key = str(require(rec, "answer_idx", where, str)).strip()
        if key not in options:
            raise where.error(f"answer_idx {key!r} is not one of the option keys {labels}", field="answer_idx")
        yield Sample(id=f"{SPEC.name}_{split}_{index}", ref_id="", question=squash(require(rec, "question", where, str)), type="multiplechoice",
                     choices=choices, context="", cot=[], answer=[choices[labels.index(key)]])
