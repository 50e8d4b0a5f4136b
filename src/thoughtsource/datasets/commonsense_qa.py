"""CommonsenseQA (Talmor et al., 2019) with ECQA explanations (Aggarwal et al., 2021) as reference CoTs.

Raw files: the original random-split JSON-lines files.  Reference CoTs come from ECQA's free-flow
explanation (``taskB``), cut into sentences.  Only ECQA's *val* and *test* author-split CSVs (as written
by ECQA's ``generate_data.py``) are available here; they cover 369 of 1,221 validation and 2,904 of
9,741 train questions.  The rest (ECQA's author-split train part, 7,598 questions) would need
``ecqa.jsonl``/``cqa_data_train.csv``, which were not obtainable, so those samples have ``cot == []``.
The CommonsenseQA test split has no public answers and no ECQA explanations.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile, kojima_log
from ._records import Where, iter_csv, iter_jsonl, require
from ._text import sentence, split_sentences

_S3 = "https://s3.amazonaws.com/commensenseqa"
_ECQA_CSV = "https://raw.githubusercontent.com/dixrow/Autonomous-learning-agents/ab3897b4574895aa11062fd28304b689422c459b/data"

SPLIT_FILES = {
    "train": "commonsense_qa/train_rand_split.jsonl",
    "validation": "commonsense_qa/dev_rand_split.jsonl",
    "test": "commonsense_qa/test_rand_split_no_answers.jsonl",
}
ECQA_FILES = ("ecqa/generated_csv/cqa_data_val.csv", "ecqa/generated_csv/cqa_data_test.csv")

SPEC = DatasetSpec(
    name="commonsense_qa",
    description=(
        "CommonsenseQA: 12,102 five-way multiple-choice questions that need commonsense knowledge (random split). "
        "Reference CoTs are the ECQA free-flow explanations where available."
    ),
    homepage="https://www.tau-nlp.sites.tau.ac.il/commonsenseqa",
    citation=(
        "@inproceedings{talmor-etal-2019-commonsenseqa, title={CommonsenseQA: A Question Answering Challenge Targeting "
        "Commonsense Knowledge}, author={Talmor, Alon and Herzig, Jonathan and Lourie, Nicholas and Berant, Jonathan}, "
        "booktitle={NAACL-HLT}, year={2019}, pages={4149--4158}}\n"
        "@inproceedings{aggarwaletal2021ecqa, title={Explanations for CommonsenseQA: New Dataset and Models}, "
        "author={Aggarwal, Shourya and Mandowara, Divyanshu and Agrawal, Vishwajeet and Khandelwal, Dinesh and Singla, Parag "
        "and Garg, Dinesh}, booktitle={ACL-IJCNLP}, year={2021}, pages={3050--3065}}"
    ),
    license="unknown (CQA, see jonathanherzig/commonsenseqa#5); ECQA: CDLA-Sharing-1.0",
    answer_type="multiplechoice",
    splits=("train", "validation", "test"),
    sources=(
        SourceFile(SPLIT_FILES["train"], f"{_S3}/train_rand_split.jsonl",
                   "58ffa3c8472410e24b8c43f423d89c8a003d8284698a6ed7874355dedd09a2fb", 3785890, "jsonl", ("train",)),
        SourceFile(SPLIT_FILES["validation"], f"{_S3}/dev_rand_split.jsonl",
                   "3210497fdaae614ac085d9eb873dd7f4d49b6f965a93adadc803e1229fd8a02a", 471653, "jsonl", ("validation",)),
        SourceFile(SPLIT_FILES["test"], f"{_S3}/test_rand_split_no_answers.jsonl",
                   "b426896d71a9cd064cf01cfaf6e920817c51701ef66028883ac1af2e73ad5f29", 423148, "jsonl", ("test",)),
        SourceFile(ECQA_FILES[0], f"{_ECQA_CSV}/cqa_data_val.csv",
                   "9ae7526e42dbf00dcfd988f4cf33795570b5c2aeb6bf6d87b987b07b7653af0d", 896537, "csv",
                   ("train", "validation"), optional=True),
        SourceFile(ECQA_FILES[1], f"{_ECQA_CSV}/cqa_data_test.csv",
                   "da73defebf31fc39110bc62545bf20f1e5d4f229962f0c66507525e20354999f", 1791198, "csv",
                   ("train", "validation"), optional=True),
    ),
    converter_version=2,  # 2: answer_letter kept where the gold's text is the text of two choices
    counts={"train": 9741, "validation": 1221, "test": 1140},
    paper_counts={"train": 9741, "validation": 1221, "test": 1140},
    paper_table6=PaperTable6(12_102, 10_962, 1_221, 3_037, "multiplechoice"),
    published_cots=(kojima_log("commonsensqa", "f8027dc6f4c85045ad7567dc71a9b5a4d69fb75af7cdf08ef809fcea617a2757", 850027, "validation"),),
)


def ecqa_cot(explanation: str) -> list[str]:
    """ECQA free-flow explanation → CoT sentences."""
    return [sentence(s) for s in split_sentences(explanation)]


def read_ecqa(files: dict[str, Path], split: str) -> dict[str, tuple[str, ...]]:
    """CommonsenseQA id → reference CoT from the ECQA CSVs present in ``files``."""
    out: dict[str, tuple[str, ...]] = {}
    for name in ECQA_FILES:
        path = files.get(name)
        if path is not None:
            st = path.stat()
            out.update(_read_ecqa_csv(path, st.st_size, st.st_mtime_ns))
    return out


@lru_cache(maxsize=4)
def _read_ecqa_csv(path: Path, size: int, mtime_ns: int) -> dict[str, tuple[str, ...]]:
    """One ECQA CSV, parsed once per process (train and validation both need it); size/mtime key the cache."""
    out: dict[str, tuple[str, ...]] = {}
    for where, row in iter_csv(path, SPEC.name, "ecqa", required=("q_no", "taskB")):
        qid = (row.get("q_no") or "").strip()
        if not qid:
            raise where.error("required field is missing", field="q_no")
        explanation = (row.get("taskB") or "").strip()
        if explanation:
            out[qid] = tuple(ecqa_cot(explanation))
    return out


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    ecqa = read_ecqa(files, split) if split != "test" else {}
    for where, rec in iter_jsonl(files[SPLIT_FILES[split]], SPEC.name, split):
        yield _sample(rec, where, ecqa, split)


def _sample(rec: dict, where: Where, ecqa: dict[str, tuple[str, ...]], split: str) -> Sample:
    qid = str(require(rec, "id", where, str))
    where = where.at(record=qid)
    question = require(rec, "question", where, dict)
    stem = require(question, "stem", where, str)
    raw_choices = require(question, "choices", where, list)
    labels: list[str] = []
    texts: list[str] = []
    for choice in raw_choices:
        labels.append(str(require(choice, "label", where)))
        texts.append(str(require(choice, "text", where)))
    answer: list[str] = []
    position: dict[str, str] = {}
    if split != "test":
        key = str(require(rec, "answerKey", where, str))
        if key not in labels:
            raise where.error(f"answer key {key!r} is not one of the choice labels {labels}", field="answerKey")
        answer = [texts[labels.index(key)]]
        if texts.count(answer[0]) > 1:  # the gold's text is the text of two choices: keep the letter (by position)
            position = {"answer_letter": chr(65 + labels.index(key))}
    return Sample(id=qid, ref_id="", question=stem, type="multiplechoice", choices=texts, context="",
                  cot=list(ecqa.get(qid, ())), answer=answer, **position)
