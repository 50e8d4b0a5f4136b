"""AQuA-RAT: algebraic word problems with natural-language rationales (Ling et al., 2017).

Raw format: JSON lines (despite the ``.json`` extension) ``{"question", "options": ["A)21", "B)21.5", ...],
"rationale", "correct": "A"}``.  Choices: the option texts without their labels (an option may itself
contain ")", which the published loader cut off); answer: the text of the correct option; reference CoT:
the rationale's non-empty lines.  Ids: ``aqua-<split>-<line number>``.

``train.json`` (97,467 problems, ~40 MB) could not be obtained when this module was written, so its
checksum is not pinned: it is used unverified (with a warning) when present, and its split was not
verified on real data.  ``validation`` (``dev.json``) and ``test`` are pinned and verified.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile, kojima_log
from ._parse import choice_index, parse_choices, split_lines
from ._records import iter_jsonl, require

_REPO = "https://raw.githubusercontent.com/deepmind/AQuA/master"
_FILES = {"train": "aqua/train.json", "validation": "aqua/dev.json", "test": "aqua/test.json"}

SPEC = DatasetSpec(
    name="aqua",
    description="AQuA-RAT: ~100,000 algebraic word problems with five answer options and a natural-language rationale.",
    homepage="https://github.com/deepmind/AQuA",
    citation="""@inproceedings{ling-etal-2017-program,
  title={Program Induction by Rationale Generation: Learning to Solve and Explain Algebraic Word Problems},
  author={Ling, Wang and Yogatama, Dani and Dyer, Chris and Blunsom, Phil},
  booktitle={Proceedings of the 55th Annual Meeting of the Association for Computational Linguistics (Volume 1: Long Papers)},
  pages={158--167},
  year={2017}
}""",
    license="Apache-2.0",
    answer_type="multiplechoice",
    splits=("train", "validation", "test"),
    sources=(
        # not obtainable here (> 4 MiB in every snapshot): no checksum to pin, see the module docstring
        SourceFile("aqua/train.json", url=f"{_REPO}/train.json", sha256="", size=0, format="jsonl", splits=("train",)),
        SourceFile(
            "aqua/dev.json",
            url=f"{_REPO}/dev.json",
            sha256="4a52301d8a49ae0b286f8e697f9c5da1b109b247b825b47b4c6de34312dceec5",
            size=132008,
            format="jsonl",
            splits=("validation",),
        ),
        SourceFile(
            "aqua/test.json",
            url=f"{_REPO}/test.json",
            sha256="de41581881ef95c5588c44ddc701c77fd480839241dd422a0d181262af24520c",
            size=130192,
            format="jsonl",
            splits=("test",),
        ),
    ),
    converter_version=3,  # 2: a label written twice ("A)A)59", aqua-test-30) is dropped; 3: answer_letter kept
    paper_counts={"total": 97975},
    paper_table6=PaperTable6(97_975, 97_975, 0, 0, "multiplechoice"),
    published_cots=(kojima_log("aqua", "743315681523f6c459bb9dee0d106e1bbf813059bb0ecc3a75a9bbf8917766ad", 222553, "test"),),
    counts={"train": 97467, "validation": 254, "test": 254},
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    path = files[_FILES[split]]
    for where, rec in iter_jsonl(path, "aqua", split):
        rid = f"aqua-{split}-{where.line}"
        where = where.at(record=rid)
        question = require(rec, "question", where, str)
        options = require(rec, "options", where, list)
        rationale = require(rec, "rationale", where, str)
        correct = require(rec, "correct", where, str)
        try:
            labels, choices = parse_choices(options)
            answer = choices[choice_index(correct, labels)]
        except ValueError as e:
            field = "options" if "option" in str(e) else "correct"
            raise where.error(f"{e} (options {options!r}, correct {correct!r})"[:300], field=field) from None
        # where the gold's text is the text of several choices (test 125: B and E are both "6 kmph"), the sample keeps
        # the source's letter: scored by position (extract.sample_gold)
        position = {"answer_letter": correct.strip().upper()} if choices.count(answer) > 1 else {}
        yield Sample(
            id=rid,
            question=question.strip(),
            type="multiplechoice",
            choices=choices,
            cot=split_lines(rationale),
            answer=[answer],
            **position,
        )
