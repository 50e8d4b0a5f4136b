"""WorldTree V2.1 (Xie et al., 2020): elementary science questions with explanation graphs of table-store facts.

Raw files: the TextGraphs-2020 shared-task archive ``tg2020task-dataset.zip`` (WorldTree V2.1: questions of
train and dev with explanations, the 81 fact tables) and, for the test split, the V2.1 ``questions.test.tsv``
*with* its gold explanations (the archive's own test file has them blanked for the shared task).

Choices are parsed from the question text ("... (A) x (B) y"); the answer is the choice named by
``AnswerKey``.  Reference CoT: the explanation's facts in the order listed, each fact being the row of its
table with the ``[SKIP]`` columns dropped and, in cells that list alternatives ("celestial object; celestial
body"), the first alternative kept (as ThoughtSource did).

Ids: ``worldtree_<split>_<0-based position in the split file>``, the scheme of the final ThoughtSource
release (ThoughtSource-100 lists ``worldtree_test_2``, the third test question; older published files
wrote just "2"); ``ref_id`` is the WorldTree ``QuestionID``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile
from ._records import Where, iter_tsv, open_zip, read_member, require
from ._text import detokenize, sentence, squash

log = logging.getLogger(__name__)

ARCHIVE = "worldtree/tg2020task-dataset.zip"
GOLD_TEST = "worldtree/gold_test_aayushee/questions.test.tsv"
MEMBERS = {"train": "questions.train.tsv", "validation": "questions.dev.tsv"}

SPEC = DatasetSpec(
    name="worldtree",
    description="WorldTree V2.1: 4,367 elementary science multiple-choice questions with explanations made of table-store facts.",
    homepage="http://cognitiveai.org/explanationbank/",
    citation=(
        "@inproceedings{xie2020worldtree, title={WorldTree V2: A Corpus of Science-Domain Structured Explanations and "
        "Inference Patterns supporting Multi-Hop Inference}, author={Xie, Zhengnan and Thiem, Sebastian and Martin, Jaycie "
        "and Wainwright, Elizabeth and Marmorstein, Steven and Jansen, Peter}, booktitle={LREC}, year={2020}, pages={5456--5473}}"
    ),
    license="AI2 Mercury EULA (non-commercial research)",
    answer_type="multiplechoice",
    splits=("train", "validation", "test"),
    sources=(
        SourceFile(ARCHIVE, "https://github.com/cognitiveailab/tg2020task/releases/download/tg2020/tg2020task-dataset.zip",
                   "63985c855088c33919012ed722c143bf1ff2381796771a008d6c8ea1dbcf607e", 957051, "zip"),
        SourceFile(GOLD_TEST,
                   "https://raw.githubusercontent.com/aayushee/Textgraphs/411bb33f1af9b1d458c3b7d0315e4f6244dfcc3b/questions/questions.test.tsv",
                   "7155d51679cb7e01ffecc1f92b10ad188638a5d4d75414e7c7e907fd01cad851", 774636, "tsv", ("test",)),
    ),
    converter_version=3,
    counts={"train": 2207, "validation": 496, "test": 1664},
    paper_counts={"train": 2207, "validation": 496, "test": 1664},
    paper_table6=PaperTable6(4_367, 4_365, 100, 600, "multiplechoice"),
)

_LETTERS = "ABCDEFGH"
_DIGITS = "12345678"


def parse_choices(text: str) -> tuple[str, list[str], list[str]] | None:
    """``"Stem? (A) x (B) y"`` → ``("Stem?", ["A", "B"], ["x", "y"])``; None when no "(A)"/"(1)" choices are found."""
    for labels in (_LETTERS, _DIGITS):
        starts: list[tuple[int, int]] = []
        pos = 0
        for label in labels:
            m = re.compile(rf"(?:^|\s|(?<=[?.:!]))\({label}\)\s").search(text, pos)
            if not m:
                break
            starts.append((m.start(), m.end()))
            pos = m.end()
        if len(starts) >= 2:
            stem = text[: starts[0][0]].strip()
            texts = [text[s[1] : (starts[i + 1][0] if i + 1 < len(starts) else len(text))].strip() for i, s in enumerate(starts)]
            return stem, list(labels[: len(starts)]), texts
    return None


def first_alternative(cell: str) -> str:
    return cell.split(";")[0].strip()


def read_tables(archive_path: Path, split: str) -> dict[str, str]:
    """Fact UID → fact sentence text from every ``tables/*.tsv`` of the archive."""
    facts: dict[str, str] = {}
    with open_zip(archive_path, SPEC.name, split) as archive:
        for member in sorted(n for n in archive.namelist() if n.startswith("tables/") and n.endswith(".tsv")):
            text = read_member(archive, member, archive_path, SPEC.name, split)
            lines = text.split("\n")
            header = lines[0].rstrip("\r").split("\t")
            try:
                uid_col = header.index("[SKIP] UID")
            except ValueError:
                raise Where(SPEC.name, split, f"{archive_path}:{member}", 1).error("table header has no '[SKIP] UID' column") from None
            keep = [i for i, h in enumerate(header) if h.strip() and not h.startswith("[SKIP]")]
            for line in lines[1:]:
                cells = line.rstrip("\r").split("\t")
                if len(cells) <= uid_col or not cells[uid_col].strip():
                    continue
                words = [first_alternative(cells[i]) for i in keep if i < len(cells) and cells[i].strip()]
                facts[cells[uid_col].strip()] = squash(" ".join(w for w in words if w))
    return facts


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    archive_path = files[ARCHIVE]
    facts = read_tables(archive_path, split)
    if split == "test":
        path = str(files[GOLD_TEST])
        text = files[GOLD_TEST].read_text(encoding="utf-8")
    else:
        path = f"{archive_path}:{MEMBERS[split]}"
        with open_zip(archive_path, SPEC.name, split) as archive:
            text = read_member(archive, MEMBERS[split], archive_path, SPEC.name, split)
    unresolved = 0
    required = ("QuestionID", "AnswerKey", "question", "explanation")
    for index, (where, row) in enumerate(iter_tsv(text, path, SPEC.name, split, required=required)):
        qid = require(row, "QuestionID", where, str)
        where = where.at(record=f"{index} ({qid})")
        parsed = parse_choices(squash(require(row, "question", where, str)))
        if parsed is None:
            raise where.error("no answer choices '(A) …' found in the question text", field="question")
        stem, labels, choices = parsed
        key = require(row, "AnswerKey", where, str).strip()
        if key not in labels:
            raise where.error(f"answer key {key!r} is not one of the choice labels {labels}", field="AnswerKey")
        cot: list[str] = []
        for item in (row.get("explanation") or "").split():
            uid = item.split("|")[0]
            if uid in facts:
                cot.append(sentence(detokenize(facts[uid])))
            else:
                unresolved += 1
        yield Sample(id=f"{SPEC.name}_{split}_{index}", ref_id=qid, question=stem, type="multiplechoice", choices=choices, context="",
                     cot=cot, answer=[choices[labels.index(key)]])
    if unresolved:
        log.info("worldtree/%s: %d explanation fact ids not found in the tables were left out", split, unresolved)
