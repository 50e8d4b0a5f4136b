"""PubMedQA (Jin et al., 2019), expert-labelled part (PQA-L): yes/no/maybe questions on PubMed abstracts.

Raw files: ``ori_pqal.json`` (1,000 questions keyed by PubMed id) and ``test_ground_truth.json`` (the ids
of the official 500-question test set).  Split: ``test`` = those 500 ids, ``train`` = the other 500 (the
official 450 train + 50 dev folds).  ThoughtSource put all 1,000 into ``train``; ids are the same
(the PubMed id), so a sample is found under either layout.

Answer: the final decision as multiple choice over ("yes", "no", "maybe").  Context: the abstract's
sections (``CONTEXTS``), one per line.  Reference CoT: the abstract's conclusion (``LONG_ANSWER``), cut
into sentences (the published loader left ``cot`` empty).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile
from ._records import Where, load_json, require
from ._text import sentence, split_sentences, squash

_REPO = "https://raw.githubusercontent.com/pubmedqa/pubmedqa/1cbae8e92f72f20c8d3747cbb3bf5bc53554d997/data"
DATA = "pubmed_qa/ori_pqal.json"
TEST_IDS = "pubmed_qa/test_ground_truth.json"
CHOICES = ["yes", "no", "maybe"]

SPEC = DatasetSpec(
    name="pubmed_qa",
    description="PubMedQA (PQA-L): 1,000 expert-labelled yes/no/maybe questions about PubMed abstracts; the conclusion is the CoT.",
    homepage="https://pubmedqa.github.io/",
    citation=(
        "@inproceedings{jin2019pubmedqa, title={PubMedQA: A Dataset for Biomedical Research Question Answering}, "
        "author={Jin, Qiao and Dhingra, Bhuwan and Liu, Zhengping and Cohen, William and Lu, Xinghua}, "
        "booktitle={EMNLP-IJCNLP}, year={2019}, pages={2567--2577}}"
    ),
    license="MIT",
    answer_type="multiplechoice",
    splits=("train", "test"),
    sources=(
        SourceFile(DATA, f"{_REPO}/ori_pqal.json", "8b3276be8942ebbd77f3ddcda12c1749bf0e490045a736fd8438ee40cf37a41d",
                   2584787, "json"),
        SourceFile(TEST_IDS, f"{_REPO}/test_ground_truth.json",
                   "939fe566f09017d13b1ca64d2ddfee0bc2374b366048152997669cccedc44d51", 11414, "json"),
    ),
    converter_version=2,
    counts={"train": 500, "test": 500},
    paper_counts={"total": 1000},
    paper_table6=PaperTable6(1_000, 1_000, 500, 2_500, "multiplechoice"),
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    data = load_json(files[DATA], SPEC.name, split)
    test = load_json(files[TEST_IDS], SPEC.name, split)
    for path, doc in ((files[DATA], data), (files[TEST_IDS], test)):
        if not isinstance(doc, dict):
            raise Where(SPEC.name, split, str(path)).error(f"expected a JSON object keyed by PubMed id, got {type(doc).__name__}")
    for pmid, rec in data.items():
        if (pmid in test) != (split == "test"):
            continue
        where = Where(SPEC.name, split, str(files[DATA]), record=pmid)
        decision = require(rec, "final_decision", where, str).strip().lower()
        if decision not in CHOICES:
            raise where.error(f"expected one of {CHOICES}, got {decision!r}", field="final_decision")
        contexts = require(rec, "CONTEXTS", where, list)
        yield Sample(
            id=pmid, ref_id=pmid, question=squash(require(rec, "QUESTION", where, str)), type="multiplechoice",
            choices=list(CHOICES), context="\n".join(squash(str(c)) for c in contexts),
            cot=[sentence(s) for s in split_sentences(require(rec, "LONG_ANSWER", where, str), join_lowercase=True)], answer=[decision],
        )
