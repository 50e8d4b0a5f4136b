"""OpenBookQA (Mihaylov et al., 2018): elementary science questions answerable from a core "open book" fact.

Raw format (official ``OpenBookQA-V1-Sep2018.zip``): ``Data/Additional/{train,dev,test}_complete.jsonl``,
one JSON object per line: ``id``, ``question`` {``stem``, ``choices`` [{``label``, ``text``}]},
``answerKey``, ``fact1`` (the core science fact), ``humanScore``, ``clarity``, ``turkIdAnonymized``.
Reference CoT: ``fact1`` as one sentence.

Ids: ``open_book_qa_<split>_<0-based line position>``, the scheme of the final ThoughtSource release
(ThoughtSource-100 lists ``open_book_qa_test_0``, the first test question; older files wrote "0");
``ref_id`` is the OpenBookQA id (e.g. "8-343").

NOT VERIFIED ON REAL DATA: the archive could not be obtained here (its checksum is unknown, so ``sha256``
is empty); the converter is tested on a synthetic fixture in the documented format
(tests/datasets/fixtures/open_book_qa/).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile
from ._records import iter_jsonl_lines, open_zip, read_member, require
from ._text import sentence, squash

ARCHIVE = "open_book_qa/OpenBookQA-V1-Sep2018.zip"
MEMBERS = {
    "train": "OpenBookQA-V1-Sep2018/Data/Additional/train_complete.jsonl",
    "validation": "OpenBookQA-V1-Sep2018/Data/Additional/dev_complete.jsonl",
    "test": "OpenBookQA-V1-Sep2018/Data/Additional/test_complete.jsonl",
}

SPEC = DatasetSpec(
    name="open_book_qa",
    description="OpenBookQA: 5,957 four-option elementary science questions, each with the core science fact that answers it.",
    homepage="https://allenai.org/data/open-book-qa",
    citation=(
        "@inproceedings{mihaylov2018can, title={Can a Suit of Armor Conduct Electricity? A New Dataset for Open Book "
        "Question Answering}, author={Mihaylov, Todor and Clark, Peter and Khot, Tushar and Sabharwal, Ashish}, "
        "booktitle={EMNLP}, year={2018}, pages={2381--2391}}"
    ),
    license="Apache-2.0",
    answer_type="multiplechoice",
    splits=("train", "validation", "test"),
    sources=(
        SourceFile(ARCHIVE, "https://ai2-public-datasets.s3.amazonaws.com/open-book-qa/OpenBookQA-V1-Sep2018.zip", "", 0, "zip"),
    ),
    converter_version=1,
    counts={"train": 4957, "validation": 500, "test": 500},  # as documented by the authors; not verifiable here
    paper_counts={"total": 5957},
    paper_table6=PaperTable6(5_957, 5_957, 100, 600, "multiplechoice"),
    verified_on_real_data=False,
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    path = files[ARCHIVE]
    with open_zip(path, SPEC.name, split) as archive:
        text = read_member(archive, MEMBERS[split], path, SPEC.name, split)
    for index, (where, rec) in enumerate(iter_jsonl_lines(text.splitlines(), f"{path}:{MEMBERS[split]}", SPEC.name, split)):
        source_id = str(require(rec, "id", where, str))
        where = where.at(record=f"{index} ({source_id})")
        question = require(rec, "question", where, dict)
        labels: list[str] = []
        choices: list[str] = []
        for choice in require(question, "choices", where, list):
            labels.append(str(require(choice, "label", where)))
            choices.append(squash(str(require(choice, "text", where))))
        key = str(require(rec, "answerKey", where, str)).strip()
        if key not in labels:
            raise where.error(f"answer key {key!r} is not one of the choice labels {labels}", field="answerKey")
        fact = squash(str(require(rec, "fact1", where, str)))
        yield Sample(id=f"{SPEC.name}_{split}_{index}", ref_id=source_id, question=squash(require(question, "stem", where, str)),
                     type="multiplechoice", choices=choices, context="", cot=[sentence(fact)] if fact else [],
                     answer=[choices[labels.index(key)]])
