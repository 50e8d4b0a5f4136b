"""EntailmentBank (Dalvi et al., 2021), task 1: science questions with entailment-tree proofs.

Raw files: ``data/processed_data/angles/task_1/{train,dev,test}.jsonl`` of allenai/entailment_bank (all
1,840 questions; the original-format ``task_1/train.jsonl`` with its ``meta`` block was not obtainable,
and these files carry the same question, answer, hypothesis, context facts and proof).  Each ``input``
is ``$proof$ ; $question$ = … ; $answer$ = … ; $hypothesis$ = … ; $context$ = sent1: … sent2: …`` and
each ``output`` is ``$proof$ = sent1 & sent3 -> int1: …; int1 & sent2 -> hypothesis; ``.

Ids: the EntailmentBank question id; 6 questions occur twice (with different answers or trees), the
second occurrence gets ``<id>_1``.  ``ref_id`` is always the plain question id.

Reference CoT: the proof, step by step: each not-yet-stated premise fact as a sentence, then
"Therefore, <conclusion>." for the step's conclusion.  Premise references are resolved as whole tokens
(``sent1`` never matches inside ``sent10``; the published loader replaced substrings and so turned
``sent10`` into "<text of sent1>0").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, PaperTable6, SourceFile
from ._records import Where, iter_jsonl, require
from ._text import detokenize, sentence, upper_first

_REPO = "https://raw.githubusercontent.com/allenai/entailment_bank/daac2fdb7ab52ec3ef8f2953f59288c1edd7c2f0/data/processed_data/angles/task_1"
SPLIT_FILES = {
    "train": "entailment_bank/angles/task_1/train.jsonl",
    "validation": "entailment_bank/angles/task_1/dev.jsonl",
    "test": "entailment_bank/angles/task_1/test.jsonl",
}

SPEC = DatasetSpec(
    name="entailment_bank",
    description="EntailmentBank task 1: 1,840 grade-school science questions with multi-step entailment trees as CoT.",
    homepage="https://allenai.org/data/entailmentbank",
    citation=(
        "@inproceedings{dalvi2021explaining, title={Explaining Answers with Entailment Trees}, author={Dalvi, Bhavana and "
        "Jansen, Peter and Tafjord, Oyvind and Xie, Zhengnan and Smith, Hannah and Pipatanangkura, Leighanna and Clark, Peter}, "
        "booktitle={EMNLP}, year={2021}, pages={7358--7370}}"
    ),
    license="CC BY 4.0",
    answer_type="text",
    splits=("train", "validation", "test"),
    sources=(
        SourceFile(
            SPLIT_FILES["train"],
            f"{_REPO}/train.jsonl",
            "620f31c45f6c906012f27f926b1e9a1ed31573a463b0ed7ff842d84f1e42b713",
            1145405,
            "jsonl",
            ("train",),
        ),
        SourceFile(
            SPLIT_FILES["validation"],
            f"{_REPO}/dev.jsonl",
            "48a6469a31f9cff23844c05d21e3345ddcbc474aeb48617cbc8162dafade2e8c",
            163291,
            "jsonl",
            ("validation",),
        ),
        SourceFile(
            SPLIT_FILES["test"],
            f"{_REPO}/test.jsonl",
            "1d984d5f7694f9b77f3087d9b5eb48d32e592c9e7b17826ad2ab664f68e8e82f",
            300692,
            "jsonl",
            ("test",),
        ),
    ),
    converter_version=1,
    counts={"train": 1313, "validation": 187, "test": 340},
    paper_counts={"train": 1313, "validation": 187, "test": 340},
    paper_table6=PaperTable6(1_840, 1_840, 0, 0, "text"),
)

_SLOT = re.compile(r"\$(\w+)\$ = ")
_SENT = re.compile(r"\b(sent\d+): ")
_STEP = re.compile(r"^(?P<premises>.+?)\s*->\s*(?P<conclusion>hypothesis|int\d+: .+)$")
_TOKEN = re.compile(r"^(sent\d+|int\d+)$")


def parse_slots(text: str, where: Where, field: str) -> dict[str, str]:
    """``"$proof$ ; $question$ = q ; $answer$ = a"`` → ``{"question": "q", "answer": "a"}``."""
    slots: dict[str, str] = {}
    matches = list(_SLOT.finditer(text))
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        value = text[m.end() : end].strip()
        if i + 1 < len(matches):
            value = value.removesuffix(";").strip()
        slots[m.group(1)] = value
    if not slots:
        raise where.error("no '$slot$ = value' parts found", field=field)
    return slots


def parse_context(text: str) -> dict[str, str]:
    """``"sent1: a b sent2: c"`` → ``{"sent1": "a b", "sent2": "c"}``."""
    parts = _SENT.split(text)
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def proof_to_cot(proof: str, facts: dict[str, str], hypothesis: str, where: Where) -> list[str]:
    """Proof steps → CoT sentences, resolving ``sentN``/``intN`` references as whole tokens."""
    cot: list[str] = []
    known: dict[str, str] = dict(facts)
    stated: set[str] = set()
    for raw in proof.split(";"):
        step = raw.strip()
        if not step:
            continue
        m = _STEP.match(step)
        if not m:
            raise where.error(f"cannot parse proof step {step!r}", field="output")
        for token in (t.strip() for t in m.group("premises").split("&")):
            if not _TOKEN.match(token) or token not in known:
                raise where.error(f"proof step {step!r} refers to unknown {token!r}", field="output")
            if token.startswith("sent") and token not in stated:
                cot.append(sentence(detokenize(known[token])))
                stated.add(token)
        conclusion = m.group("conclusion")
        if conclusion == "hypothesis":
            text = hypothesis
        else:
            int_id, _, text = conclusion.partition(": ")
            known[int_id] = text
        cot.append(sentence("Therefore, " + detokenize(text)))
    return cot


def convert(files: dict[str, Path], split: str) -> Iterator[Sample]:
    seen: dict[str, int] = {}
    for where, rec in iter_jsonl(files[SPLIT_FILES[split]], SPEC.name, split):
        source_id = str(require(rec, "id", where, str))
        # A few questions appear twice with different gold answers/trees; the repeat gets "<id>_1", "<id>_2", ...
        n = seen.get(source_id, 0)
        seen[source_id] = n + 1
        qid = f"{source_id}_{n}" if n else source_id
        where = where.at(record=qid)
        slots = parse_slots(require(rec, "input", where, str), where, "input")
        for key in ("question", "answer", "hypothesis", "context"):
            if key not in slots:
                raise where.error(f"input has no ${key}$ slot", field="input")
        proof = parse_slots(require(rec, "output", where, str), where, "output").get("proof")
        if proof is None:
            raise where.error("output has no $proof$ slot", field="output")
        facts = parse_context(slots["context"])
        yield Sample(
            id=qid,
            ref_id=source_id,
            question=slots["question"],
            type="text",
            choices=[],
            context="",
            cot=proof_to_cot(proof, facts, slots["hypothesis"], where),
            answer=[upper_first(slots["answer"])],
            hypothesis=slots["hypothesis"],
        )
