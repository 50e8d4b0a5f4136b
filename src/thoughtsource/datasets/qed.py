"""QED (Lamm et al., 2021): explanations for Natural Questions answers, as referential links to a Wikipedia passage.

Raw file: ``qed-dev.jsonlines`` (1,355 records; the train file was not obtainable).  As in ThoughtSource,
records whose ``explanation_type`` is ``none`` or ``multi_sentence`` are skipped (1,021 of 1,355 kept).
Type ``collection``: every span of every original NQ short answer is a gold answer (an answer of several
spans, e.g. a list, gives one gold answer per span).  The text is pre-tokenized
("Röntgen , of Germany") and is detokenized.  Reference CoT: the selected sentence, then one sentence per
referential equality (question phrase ↔ sentence phrase, with its bridge preposition when there is one),
then one per answer phrase that differs between sentence and passage.

Ids: the NQ ``example_id`` as a string.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile
from ._records import Where, iter_jsonl, require
from ._text import detokenize, sentence, upper_first

_REPO = "https://raw.githubusercontent.com/google-research-datasets/QED/2492920337122918bbfc7d12c1268b9af796c6cf"
DEV = "qed/qed-dev.jsonlines"
SKIPPED_TYPES = ("none", "multi_sentence")

SPEC = DatasetSpec(
    name="qed",
    description="QED: Natural Questions with linguistically grounded explanations (selected sentence + referential equalities).",
    homepage="https://github.com/google-research-datasets/QED",
    citation=(
        "@article{lamm2021qed, title={QED: A Framework and Dataset for Explanations in Question Answering}, author={Lamm, "
        "Matthew and Palomaki, Jennimaria and Alberti, Chris and Andor, Daniel and Choi, Eunsol and Soares, Livio Baldini "
        "and Collins, Michael}, journal={Transactions of the Association for Computational Linguistics}, volume={9}, "
        "pages={790--806}, year={2021}}"
    ),
    license="CC BY-SA 3.0",
    answer_type="collection",
    splits=("validation",),
    sources=(
        SourceFile(
            DEV,
            f"{_REPO}/qed-dev.jsonlines",
            "2ea322b71a333023380c3954083b81af2d5670c8ac47ddec58c843233895c429",
            2244232,
            "jsonl",
            ("validation",),
        ),
    ),
    converter_version=2,  # 2: every span of each NQ answer (1 kept only the first span of a group)
    counts={"validation": 1021},
    paper_counts={"total": 6175},
    paper_table6=PaperTable6(6_175, 6_175, 0, 0, "collection"),
)


def _span(obj: dict, key: str, where: Where) -> str:
    return detokenize(str(require(require(obj, key, where, dict), "string", where)))


def explanation_cot(annotation: dict, where: Where) -> list[str]:
    cot = [sentence("The answer is contained in the following sentence: " + _span(annotation, "selected_sentence", where))]
    for eq in annotation.get("referential_equalities") or []:
        q = _span(eq, "question_reference", where)
        s = _span(eq, "sentence_reference", where)
        bridge = require(eq, "sentence_reference", where, dict).get("bridge", False)
        if bridge is False:
            cot.append(
                sentence(f"The noun phrase {s} in the sentence and the noun phrase {q} in the question refer to the same thing")
            )
        elif not s:
            cot.append(sentence(f"The noun phrase {q} in the question is implicit in the sentence"))
        elif bridge:
            cot.append(
                sentence(f"The noun phrase {s} in the sentence refers to {s} {bridge} the noun phrase {q} in the question")
            )
        else:
            cot.append(sentence(f"The noun phrase {s} in the sentence refers to the noun phrase {q} in the question"))
    for ans in annotation.get("answer") or []:
        s = _span(ans, "sentence_reference", where)
        p = _span(ans, "paragraph_reference", where)
        if s and p and s != p:
            cot.append(
                sentence(f"The noun phrase {s} in the sentence and the noun phrase {p} in the context refer to the same thing")
            )
    return cot


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    for where, rec in iter_jsonl(files[DEV], SPEC.name, split):
        qid = str(require(rec, "example_id", where, (int, str)))
        where = where.at(record=qid)
        annotation = require(rec, "annotation", where, dict)
        if require(annotation, "explanation_type", where, str) in SKIPPED_TYPES:
            continue
        question = upper_first(detokenize(require(rec, "question_text", where, str)))
        if not question.endswith("?"):
            question += "?"
        answers: list[str] = []
        for group in require(rec, "original_nq_answers", where, list):
            for span in group:  # an NQ short answer may have several spans: each one is a gold answer
                text = detokenize(str(require(span, "string", where)))
                if text and text not in answers:
                    answers.append(text)
        title = detokenize(require(rec, "title_text", where, str))
        paragraph = detokenize(require(rec, "paragraph_text", where, str))
        yield Sample(
            id=qid,
            ref_id="",
            question=question,
            type="collection",
            choices=[],
            context=f"Title: {title} Text: {paragraph}",
            cot=explanation_cot(annotation, where),
            answer=answers,
        )
