"""MAWPS: a math word problem repository (Koncel-Kedziorski et al., 2016), in the 5-fold version of Patel et al.

ThoughtSource uses fold 0 of ``cv_mawps`` (train 1,537 + dev 384 = 1,921 problems) as one ``train`` split.
Raw format (CSV): ``Question`` is tokenized text with placeholders (``"... wants number0 cups ..."``),
``Numbers`` their values (``"8.0 2.0"``), ``Equation`` a prefix expression (``"- number0 number1"``) and
``Answer`` the number.  Question: placeholders replaced by the record's numbers (simple fractions stored
as floats shown as fractions, "0.16666666666666666" → "1/6"), detokenized.  Reference CoT: one sentence
per operation of the record's own equation.  Ids: ``mawps-<file>-<row>`` (``mawps-train-1`` is the first
data row of ``fold0/train.csv``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile
from ._parse import (
    Expr,
    agrees,
    equation_cot,
    evaluate,
    exact_number,
    format_number,
    parse_prefix,
    readable_number,
    warn_disagreements,
)
from ._records import iter_csv
from ._text import detokenize

log = logging.getLogger(__name__)

_REPO = "https://raw.githubusercontent.com/arkilpatel/SVAMP/main/data/cv_mawps/fold0"
_PLACEHOLDER = re.compile(r"\bnumber(\d+)\b")
_COLUMNS = ("Question", "Numbers", "Equation", "Answer")

SPEC = DatasetSpec(
    name="mawps",
    description="Math word problems of the MAWPS repository (AddSub, SingleOp, MultiArith, SingleEq, ...): fold 0 of the "
    "5-fold cross-validation split of Patel et al. (2021).",
    homepage="https://github.com/sroy9/mawps",
    citation="""@inproceedings{koncel-kedziorski-etal-2016-mawps,
  title={{MAWPS}: A Math Word Problem Repository},
  author={Koncel-Kedziorski, Rik and Roy, Subhro and Amini, Aida and Kushman, Nate and Hajishirzi, Hannaneh},
  booktitle={Proceedings of NAACL-HLT 2016},
  pages={1152--1157},
  year={2016}
}""",
    license="MIT",
    answer_type="number",
    splits=("train",),
    sources=(
        SourceFile(
            "mawps/cv_mawps/fold0/train.csv",
            url=f"{_REPO}/train.csv",
            sha256="0674253e6099813cefbb1d6eae3d2dc784ab6ebfdaf8755f6ebb4b99fc1f6ebe",
            size=595844,
            format="csv",
        ),
        SourceFile(
            "mawps/cv_mawps/fold0/dev.csv",
            url=f"{_REPO}/dev.csv",
            sha256="bad59cff796b01a87363ea970f1fa80c15f56ff5f4388143aadbdc3feaf5f990",
            size=148020,
            format="csv",
        ),
    ),
    converter_version=1,
    paper_counts={"total": 1921},
    paper_table6=PaperTable6(1_921, 1_921, 0, 0, "number"),
    counts={"train": 1921},
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    disagree: list[str] = []
    for part in ("train", "dev"):
        path = files[f"mawps/cv_mawps/fold0/{part}.csv"]
        for row_no, (where, row) in enumerate(iter_csv(path, "mawps", split, required=_COLUMNS), start=1):
            rid = f"mawps-{part}-{row_no}"
            where = where.at(record=rid)
            for col in _COLUMNS:
                if not (row.get(col) or "").strip():
                    raise where.error("required field is empty", field=col)
            numbers = row["Numbers"].split()
            try:
                values = [exact_number(n) for n in numbers]
            except ValueError as e:
                raise where.error(str(e), field="Numbers") from None

            def fill(m: re.Match[str], values=values, where=where) -> str:
                i = int(m.group(1))
                if i >= len(values):
                    raise where.error(f"placeholder number{i} has no value in Numbers", field="Question")
                return readable_number(values[i])

            question = detokenize(_PLACEHOLDER.sub(fill, row["Question"]))
            try:
                expr = parse_prefix(row["Equation"], numbers)
                value = evaluate(expr)
                answer = format_number(row["Answer"])
            except ValueError as e:
                raise where.error(str(e), field="Equation") from None
            if not agrees(value, row["Answer"]):
                disagree.append(f"{rid} ({row['Equation']!r} gives {format_number(value)}, gold {row['Answer']})")
            yield Sample(
                id=rid,
                question=question,
                type="number",
                cot=equation_cot(expr, show=readable_number),
                answer=[answer],
            )
    warn_disagreements(log, "mawps", split, disagree)


def equations(files: dict[str, Path], split: str) -> Iterator[tuple[str, Expr]]:
    """(sample id, equation tree) of every record, as :func:`convert` reads them (the calculator format's gold)."""
    for part in ("train", "dev"):
        path = files[f"mawps/cv_mawps/fold0/{part}.csv"]
        for row_no, (_, row) in enumerate(iter_csv(path, "mawps", split, required=_COLUMNS), start=1):
            yield f"mawps-{part}-{row_no}", parse_prefix(row["Equation"], row["Numbers"].split())
