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
from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile, kojima_log
from ._parse import Expr, agrees, equation_cot, evaluate, format_number, join_body_question, parse_infix, warn_disagreements
from ._records import Where, load_json, require

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
        SourceFile(
            "svamp/SVAMP.json",
            url="https://raw.githubusercontent.com/arkilpatel/SVAMP/main/SVAMP.json",
            sha256="5be77703a6d891ae476d7c082787ad361392aa02453b132516cdd5f4e7934e3e",
            size=339970,
            format="json",
        ),
    ),
    converter_version=1,
    paper_counts={"total": 1000},
    paper_table6=PaperTable6(1_000, 1_000, 0, 0, "number"),
    published_cots=(kojima_log("svamp", "37043ef358b75e108860746c533d0c9be0f307ec3373959524778f1b8af5a75a", 671988, "train"),),
    counts={"train": 1000},
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    path = files["svamp/SVAMP.json"]
    disagree: list[str] = []
    records = load_json(path, "svamp", split)
    if not isinstance(records, list):
        raise DataError(f"expected a JSON array of problems, got {type(records).__name__}", path=str(path))
    for i, rec in enumerate(records):
        where = Where("svamp", split, str(path), record=f"#{i}")
        rid = require(rec, "ID", where, str)
        where = where.at(record=rid)
        body = require(rec, "Body", where, str)
        question = require(rec, "Question", where, str)
        equation = require(rec, "Equation", where, str)
        answer = require(rec, "Answer", where, (int, float))
        try:
            expr = parse_infix(equation)
            value = evaluate(expr)
        except ValueError as e:
            raise where.error(str(e), field="Equation") from None
        if not agrees(value, answer):
            # The gold answer is kept as published (chal-680: equation gives 5, Answer says 1); see docs/datasets.md.
            disagree.append(f"{rid} ({equation!r} gives {format_number(value)}, gold {format_number(answer)})")
        yield Sample(
            id=rid,
            question=join_body_question(body, question),
            type="number",
            cot=equation_cot(expr),
            answer=[format_number(answer)],
        )
    warn_disagreements(log, "svamp", split, disagree)


def equations(files: dict[str, Path], split: str) -> Iterator[tuple[str, Expr]]:
    """(sample id, equation tree) of every problem, as :func:`convert` reads them (the calculator format's gold)."""
    for rec in load_json(files["svamp/SVAMP.json"], "svamp", split):
        yield str(rec["ID"]), parse_infix(rec["Equation"])
