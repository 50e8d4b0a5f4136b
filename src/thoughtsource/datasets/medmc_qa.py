"""MedMCQA (Pal et al., 2022): Indian medical entrance exam (AIIMS/NEET PG) questions with explanations.

Raw format (official ``data.zip``: ``train.json``, ``dev.json``, ``test.json``, JSON lines): ``id``,
``question``, ``opa``…``opd``, ``cop`` (correct option, 1-based: 1 = ``opa``; absent in the hidden-label
test file), ``choice_type`` (single/multi), ``exp`` (explanation, may be null), ``subject_name``,
``topic_name``.  Reference CoT: ``exp`` as one item (as ThoughtSource did; explanations are free-form
notes, often without sentence punctuation, so they are not cut into sentences).

NOT VERIFIED ON REAL DATA: the official files could not be obtained here (and their checksums are
unknown, so ``sha256`` is empty and the files cannot be downloaded with verification); the converter is
tested on a synthetic fixture in the documented format (tests/datasets/fixtures/medmc_qa/).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile
from ._records import iter_jsonl_lines, open_zip, read_member, require
from ._text import squash

ARCHIVE = "medmc_qa/data.zip"
MEMBERS = {"train": "train.json", "validation": "dev.json", "test": "test.json"}
OPTION_KEYS = ("opa", "opb", "opc", "opd")

SPEC = DatasetSpec(
    name="medmc_qa",
    description="MedMCQA: 194k four-option medical entrance exam questions across 21 subjects, with expert explanations.",
    homepage="https://medmcqa.github.io/",
    citation=(
        "@inproceedings{pal2022medmcqa, title={MedMCQA: A Large-scale Multi-Subject Multi-Choice Dataset for Medical "
        "domain Question Answering}, author={Pal, Ankit and Umapathi, Logesh Kumar and Sankarasubbu, Malaikannan}, "
        "booktitle={Conference on Health, Inference, and Learning}, pages={248--260}, year={2022}, publisher={PMLR}}"
    ),
    license="MIT",
    answer_type="multiplechoice",
    splits=("train", "validation", "test"),
    sources=(
        # Official download (Google Drive, linked from github.com/medmcqa/medmcqa); checksum and size unknown here.
        SourceFile(ARCHIVE, "https://drive.google.com/uc?export=download&id=15VkJdq5eyWIkfb_aoD3oS8i4tScbHYky", "", 0, "zip"),
    ),
    converter_version=1,
    counts={"train": 182822, "validation": 4183, "test": 6150},  # as documented by the authors; not verifiable here
    paper_counts={"total": 193155},
    paper_table6=PaperTable6(193_155, 161_558, 1_000, 105_587, "multiplechoice"),
    verified_on_real_data=False,
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    path = files[ARCHIVE]
    with open_zip(path, SPEC.name, split) as archive:
        member = next((n for n in archive.namelist() if n.rsplit("/", 1)[-1] == MEMBERS[split]), MEMBERS[split])
        text = read_member(archive, member, path, SPEC.name, split)
    for where, rec in iter_jsonl_lines(text.splitlines(), f"{path}:{member}", SPEC.name, split):
        qid = str(require(rec, "id", where, str))
        where = where.at(record=qid)
        choices = [squash(str(require(rec, k, where))) for k in OPTION_KEYS]
        answer: list[str] = []
        cop = rec.get("cop")
        if cop is not None and cop != -1:
            if not isinstance(cop, int) or not 1 <= cop <= 4:
                raise where.error(f"expected 1..4 (1 = opa), got {cop!r}", field="cop")
            answer = [choices[cop - 1]]
        elif split != "test":
            raise where.error("required field is missing", field="cop")
        exp = rec.get("exp")
        yield Sample(
            id=qid, ref_id="", question=squash(require(rec, "question", where, str)), type="multiplechoice", choices=choices,
            context="", cot=[squash(exp)] if isinstance(exp, str) and exp.strip() else [], answer=answer,
            subject=rec.get("subject_name"), topic=rec.get("topic_name"), choice_type=rec.get("choice_type"),
        )
