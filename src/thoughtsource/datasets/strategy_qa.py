"""StrategyQA (Geva et al., 2021): yes/no questions that need an implicit multi-step strategy.

The official training set (``strategyqa_train.json``, 2,290 questions) is used, here in the
train/dev split of eladsegal/strategyqa (``train.json`` 2,061 + ``dev.json`` 229 = the official train
set); both files form our ``train`` split, as in ThoughtSource.  The 490-question test set has no
answers or facts and was not obtainable.  Reference CoT: the annotated ``facts``; the question
decomposition is kept in the extra field ``decomposition``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile, kojima_log
from ._records import Where, load_json, require
from ._text import sentence, squash

_REPO = "https://raw.githubusercontent.com/eladsegal/strategyqa/1ba1e97452e189569357876f2854b01357ffbe37/data/strategyqa"
TRAIN_FILES = ("strategy_qa/train.json", "strategy_qa/dev.json")

SPEC = DatasetSpec(
    name="strategy_qa",
    description="StrategyQA: 2,290 yes/no questions requiring implicit reasoning steps, with supporting facts as CoT.",
    homepage="https://allenai.org/data/strategyqa",
    citation=(
        "@article{geva2021strategyqa, title={Did Aristotle Use a Laptop? A Question Answering Benchmark with Implicit "
        "Reasoning Strategies}, author={Geva, Mor and Khashabi, Daniel and Segal, Elad and Khot, Tushar and Roth, Dan and "
        "Berant, Jonathan}, journal={Transactions of the Association for Computational Linguistics}, volume={9}, "
        "pages={346--361}, year={2021}}"
    ),
    license="MIT",
    answer_type="bool",
    splits=("train",),
    sources=(
        SourceFile(
            TRAIN_FILES[0],
            f"{_REPO}/train.json",
            "0f72560b8a6fad3db847d2f1a7524fb087297843bb45a8d3245ffd68cbe0de12",
            3857762,
            "json",
        ),
        SourceFile(
            TRAIN_FILES[1],
            f"{_REPO}/dev.json",
            "0d94842ffb022db8fd5ecd2168b785d5cf67f6faf64f665476bad544a3eb9dde",
            424195,
            "json",
        ),
    ),
    converter_version=1,
    counts={"train": 2290},
    paper_counts={"total": 2780},
    paper_table6=PaperTable6(2_780, 2_290, 2_289, 5_132, "bool"),
    published_cots=(kojima_log("strategyqa", "9268254c7c2d86a96b0346d64f5b782440b17ded142589d160ebb39e53fde5c9", 1564959, "train"),),
)


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    for name in TRAIN_FILES:
        path = files[name]
        data = load_json(path, SPEC.name, split)
        if not isinstance(data, list):
            raise Where(SPEC.name, split, str(path)).error(f"expected a JSON array of questions, got {type(data).__name__}")
        for index, rec in enumerate(data):
            where = Where(SPEC.name, split, str(path), record=f"#{index}")
            yield _sample(rec, where)


def _sample(rec: dict, where: Where) -> Sample:
    qid = str(require(rec, "qid", where, str))
    where = where.at(record=qid)
    answer = require(rec, "answer", where, bool)
    facts = require(rec, "facts", where, list)
    decomposition = rec.get("decomposition") or []
    return Sample(
        id=qid,
        ref_id="",
        question=squash(require(rec, "question", where, str)),
        type="bool",
        choices=["True", "False"],
        context="",
        cot=[sentence(f) for f in facts if str(f).strip()],
        answer=[str(answer)],
        decomposition=[squash(str(d)) for d in decomposition],
    )
