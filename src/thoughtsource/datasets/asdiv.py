"""ASDiv-A: the arithmetic subset of ASDiv, a diverse corpus of English math word problems (Miao et al., 2020).

Raw files: ``ASDiv.xml`` (all 2,305 problems: ``<Problem ID=...><Body/><Question/><Solution-Type/>
<Answer>9 (apples)</Answer><Formula>7+2=9</Formula>``) and the five ASDiv-A fold files listing the
1,218 ids of the arithmetic subset that ThoughtSource uses.  Question: body + question; answer: the
leading number of ``Answer``; reference CoT: one sentence per operation of the record's own formula
(a division written ``200/28=7 r4`` is stated with its remainder, and a ceiling division says that it
rounds up).  Ids: the raw ``ID`` (``nluds-0001``).  One split, ``train``.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from ..errors import DataError
from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile
from ._parse import (
    Expr,
    agrees,
    equation_cot,
    evaluate,
    format_number,
    join_body_question,
    leading_number,
    parse_infix,
    warn_disagreements,
)
from ._records import Where

log = logging.getLogger(__name__)

_REPO = "https://raw.githubusercontent.com/chaochun/nlu-asdiv-dataset/master/dataset"
_FOLDS = (
    ("1e4e8c670e461e9d59beee13e64e28d7f92e3be8ba6766d3bbeb40818e03e8d6", 2618),
    ("81bb372c89696d8d0a253d8ac73500208a801c35670112d682c2f2306ef35fd2", 2618),
    ("56ffc96a9eead77224f782d7c4c84205c21079b3588b08e4a68d2deabf50febc", 2618),
    ("68733651260332fa6ae89155aa5e15d20a4b11833023712d0a9b2a2d06551e54", 2618),
    ("103d2091eab4ee825e55353af817af006ddd2fee4948b0ef7fa1df0f6a33723b", 2926),
)

SPEC = DatasetSpec(
    name="asdiv",
    description="ASDiv-A: 1,218 arithmetic math word problems of the ASDiv corpus, diverse in language patterns and problem types.",
    homepage="https://github.com/chaochun/nlu-asdiv-dataset",
    citation="""@inproceedings{miao-etal-2020-diverse,
  title={A Diverse Corpus for Evaluating and Developing {E}nglish Math Word Problem Solvers},
  author={Miao, Shen-yun and Liang, Chao-Chun and Su, Keh-Yih},
  booktitle={Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics},
  pages={975--984},
  year={2020}
}""",
    license="CC BY-NC 4.0",
    answer_type="number",
    splits=("train",),
    sources=(
        SourceFile(
            "asdiv/ASDiv.xml",
            url=f"{_REPO}/ASDiv.xml",
            sha256="ef8904068482919ac48c8eeaaf6df344b8a308ba66d048c2d4d87eab82dc4929",
            size=947401,
            format="xml",
        ),
        *(
            SourceFile(
                f"asdiv/nfolds/asdiv-a/fold{i}.txt",
                url=f"{_REPO}/nfolds/asdiv-a/fold{i}.txt",
                sha256=sha,
                size=size,
                format="txt",
            )
            for i, (sha, size) in enumerate(_FOLDS)
        ),
    ),
    converter_version=1,
    paper_counts={"total": 1218},
    paper_table6=PaperTable6(1_218, 1_218, 0, 0, "number"),
    counts={"train": 1218},
)


def _text(problem: ET.Element, tag: str, where: Where) -> str:
    node = problem.find(tag)
    if node is None or node.text is None or not node.text.strip():
        raise where.error(f"required element <{tag}> is missing or empty", field=tag)
    return node.text.strip()


def _corpus(files: dict[str, Path], split: str) -> tuple[set[str], ET.Element]:
    """The ids of ASDiv-A (the fold files) and the corpus' root element."""
    subset: set[str] = set()
    for i in range(len(_FOLDS)):
        fold = files[f"asdiv/nfolds/asdiv-a/fold{i}.txt"]
        subset.update(line.strip() for line in fold.read_text(encoding="utf-8").splitlines() if line.strip())
    path = files["asdiv/ASDiv.xml"]
    try:
        return subset, ET.parse(path).getroot()
    except ET.ParseError as e:
        line, col = e.position
        raise DataError(
            f"invalid XML (truncated or corrupt file): {e}", path=str(path), line=line, column=col, dataset="asdiv", split=split
        ) from None


def equations(files: dict[str, Path], split: str) -> Iterator[tuple[str, Expr]]:
    """(sample id, equation tree of the formula's left side) of every ASDiv-A problem, as :func:`convert` reads them (the
    calculator format's gold; a division stated with its remainder, ``200/28=7 r4``, is the exact quotient here)."""
    subset, root = _corpus(files, split)
    for problem in root.iter("Problem"):
        rid = problem.get("ID")
        if rid in subset:
            yield rid, parse_infix(problem.findtext("Formula", "").partition("=")[0])


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    disagree: list[str] = []
    subset, root = _corpus(files, split)
    path = files["asdiv/ASDiv.xml"]
    seen: set[str] = set()
    for problem in root.iter("Problem"):
        rid = problem.get("ID")
        if rid is None:
            raise DataError("a <Problem> has no ID attribute", path=str(path), dataset="asdiv", split=split, field="ID")
        if rid not in subset:
            continue
        seen.add(rid)
        where = Where("asdiv", split, str(path), record=rid)
        body = _text(problem, "Body", where)
        question = _text(problem, "Question", where)
        answer_text = _text(problem, "Answer", where)
        formula = _text(problem, "Formula", where)
        solution_type = _text(problem, "Solution-Type", where)
        answer = leading_number(answer_text)
        if answer is None:
            raise where.error(f"Answer does not start with a number: {answer_text!r}", field="Answer")
        lhs, _, rhs = formula.partition("=")
        remainder = " r" in rhs
        try:
            expr = parse_infix(lhs)
            value = evaluate(expr)
        except ValueError as e:
            raise where.error(str(e), field="Formula") from None
        cot = equation_cot(expr, remainder=remainder)
        if remainder and solution_type == "Ceil-Division":
            cot.append(f"Since there is a remainder, we round up to {format_number(answer)}.")
        elif not remainder and not agrees(value, answer):
            disagree.append(f"{rid} ({formula!r} gives {format_number(value)}, gold {answer})")
        yield Sample(
            id=rid,
            question=join_body_question(body, question),
            type="number",
            cot=cot,
            answer=[format_number(answer)],
        )
    warn_disagreements(log, "asdiv", split, disagree)
    missing = subset - seen
    if missing:
        raise DataError(
            f"{len(missing)} ASDiv-A id(s) of the fold files are not in the corpus: {sorted(missing)[:10]}",
            path=str(path),
            dataset="asdiv",
            split=split,
        )
