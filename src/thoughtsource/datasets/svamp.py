"""SVAMP: simple variations on arithmetic math word problems (Patel et al., 2021).

Raw format: a JSON array of ``{"ID": "chal-1", "Body", "Question", "Equation": "( 76.0 - 25.0 )", "Answer": 51.0,
"Type"}``.  Question: body + question; answer: the number ("51"); reference CoT: one sentence per
operation of the record's own equation ("We subtract 25 from 76 and get 51.").  Ids: the raw ``ID``.
One split, ``train`` (SVAMP is a challenge set without splits; ThoughtSource puts it in ``train``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

from ..errors import DataError
from ..io import read_json
from ..schema import Sample
from ._base import DatasetSpec, SourceFile
from ._parse import agrees, equation_cot, evaluate, format_number, join_body_question, parse_infix, require

log = logging.getLogger(__name__)

SPEC = DatasetSpec(
    name="svamp",
    description="1,000 elementary-level math word problems, variations of ASDiv-A problems that test robustness of solvers.",
    homepage="https://github.com/arkilpatel/SVAMP",
    citation="""@inproceedings{patel-etal-2021-nlp,
  title={Are {NLP} Models really able to Solve Simple Math Word Problems?},
  author={Patel, Arkil and Bhattamishra, Satwik and Goyal, Navin},
  booktitle={Proceedings of NAACL-HLT 2021},
  pages={2080--2094},
  year={2021}
}""",
    license="MIT",
    answer_type="number",
    splits=("train",),
    sources=(
        SourceFile("svamp/SVAMP.json", url="https://raw.githubusercontent.com/arkilpatel/SVAMP/main/SVAMP.json",
                   sha256="5be77703a6d891ae476d7c082787ad361392aa02453b132516cdd5f4e7934e3e", size=339970, format="json"),
    ),
    converter_version=1,
    paper_counts={"total": 1000},
    counts={"train": 1000},
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    path = files["svamp/SVAMP.json"]
    records = read_json(path)
    if not isinstance(records, list):
        raise DataError(f"expected a JSON array of problems, got {type(records).__name__}", path=str(path))
    for i, rec in enumerate(records):
        rid = rec.get("ID") if isinstance(rec, dict) and isinstance(rec.get("ID"), str) else f"#{i}"
        where = {"path": path, "record_id": rid, "dataset": "svamp", "split": split}
        if not isinstance(rec, dict):
            raise DataError(f"expected a problem object, got {type(rec).__name__}", path=str(path), dataset="svamp",
                            split=split, record=rid)
        require(rec, "ID", types=str, **where)
        body = require(rec, "Body", types=str, **where)
        question = require(rec, "Question", types=str, **where)
        equation = require(rec, "Equation", types=str, **where)
        answer = require(rec, "Answer", types=(int, float), **where)
        try:
            expr = parse_infix(equation)
            value = evaluate(expr)
        except ValueError as e:
            raise DataError(str(e), path=str(path), dataset="svamp", split=split, record=rid, field="Equation") from None
        if not agrees(value, answer):
            # The gold answer is kept as published (chal-680: equation gives 5, Answer says 1); see docs/datasets.md.
            log.warning("%s: svamp/%s/%s: equation %r gives %s but the gold Answer is %s; keeping the gold answer",
                        path, split, rid, equation, format_number(value), format_number(answer))
        yield Sample(
            id=rid,
            question=join_body_question(body, question),
            type="number",
            cot=equation_cot(expr),
            answer=[format_number(answer)],
        )
