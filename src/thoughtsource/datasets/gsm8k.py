"""GSM8K: grade-school math word problems with step-by-step solutions (Cobbe et al., 2021).

Raw format (JSON lines): ``{"question": ..., "answer": "step\\nstep <<48/2=24>>24\\n#### 72"}``.
Answer: the number after ``####`` (commas removed).  Reference CoT: the solution lines before it,
without the ``<<...>>`` calculator annotations.  Ids: ``gsm8k-<split>-<line number>`` (stable, 1-based).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile, kojima_log
from ._parse import clean_number, split_lines, strip_calculator
from ._records import iter_jsonl, require

_REPO = "https://raw.githubusercontent.com/openai/grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c"

SPEC = DatasetSpec(
    name="gsm8k",
    description="8.5K linguistically diverse grade school math word problems with natural-language solutions.",
    homepage="https://github.com/openai/grade-school-math",
    citation="""@article{cobbe2021gsm8k,
  title={Training Verifiers to Solve Math Word Problems},
  author={Cobbe, Karl and Kosaraju, Vineet and Bavarian, Mohammad and Chen, Mark and Jun, Heewoo and Kaiser, Lukasz and
          Plappert, Matthias and Tworek, Jerry and Hilton, Jacob and Nakano, Reiichiro and Hesse, Christopher and Schulman, John},
  journal={arXiv preprint arXiv:2110.14168},
  year={2021}
}""",
    license="MIT",
    answer_type="number",
    splits=("train", "test"),
    sources=(
        SourceFile(
            "gsm8k/train.jsonl",
            url=f"{_REPO}/grade_school_math/data/train.jsonl",
            sha256="17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
            size=4166206,
            format="jsonl",
            splits=("train",),
        ),
        SourceFile(
            "gsm8k/test.jsonl",
            url=f"{_REPO}/grade_school_math/data/test.jsonl",
            sha256="3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
            size=749738,
            format="jsonl",
            splits=("test",),
        ),
    ),
    converter_version=1,
    paper_counts={"total": 8792},
    paper_table6=PaperTable6(8_792, 8_792, 0, 0, "number"),
    published_cots=(kojima_log("gsm8k", "cfb2d43b29762ca5fb09856899a6f6595c7deda6ff73c5e8a3becb8d791c54c4", 1093468, "test"),),
    counts={"train": 7473, "test": 1319},
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    path = files[f"gsm8k/{split}.jsonl"]
    for where, rec in iter_jsonl(path, "gsm8k", split):
        rid = f"gsm8k-{split}-{where.line}"
        where = where.at(record=rid)
        question = require(rec, "question", where, str)
        solution = require(rec, "answer", where, str)
        steps, sep, final = solution.rpartition("####")
        if not sep:
            raise where.error("solution has no '#### <answer>' line", field="answer")
        try:
            answer = clean_number(final.strip())
        except ValueError:
            raise where.error(f"the text after '####' is not a number: {final.strip()!r}", field="answer") from None
        yield Sample(
            id=rid,
            question=question.strip(),
            type="number",
            cot=split_lines(strip_calculator(steps)),
            answer=[answer],
        )


def equations(files: dict[str, Path], split: str) -> Iterator[tuple[str, str]]:
    """(sample id, solution lines before ``####`` with their calculator annotations) of every record, as :func:`convert`
    reads them (the calculator format's gold)."""
    for where, rec in iter_jsonl(files[f"gsm8k/{split}.jsonl"], "gsm8k", split):
        yield f"gsm8k-{split}-{where.line}", "\n".join(split_lines(str(rec["answer"]).rpartition("####")[0]))
