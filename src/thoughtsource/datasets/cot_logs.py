"""Parser of the published zero-shot(-CoT) logs of Kojima et al. (2022), "Large Language Models are Zero-Shot Reasoners".

The authors' ``main.py`` prints, for every question, the full prompt-plus-completion text and the
steps of its answer cleansing::

    *************************
    12st data                      (missing in some logs)
    1_th_sampling
    Q: <question, possibly several lines>
    A: Let's think step by step.<CoT> \\nTherefore, the answer (arabic numerals) is<extraction output>
    pred_before : <extraction output, raw>
    pred_after : <the cleansed prediction>
    pred_list : [...]
    pred_mode : <...>
    GT : <gold answer>
    *************************

and, at the end, ``accuracy : <percent>``.  The run's arguments are printed once as an argparse
``Namespace(...)``.  For ``method='zero_shot'`` the ``A:`` line is ``<direct trigger><output>`` and
there is no CoT.

:func:`read_kojima_log` turns one log into :class:`KojimaRecord` objects; :func:`read_kojima_log_file`
also returns the run's arguments and the accuracy the log reports.  :func:`to_generated_cot` turns a
record into a ThoughtSource :class:`~thoughtsource.schema.GeneratedCot` (author ``kojima``, model
``text-davinci-002`` as stated in the paper).  The prompt text is reconstructed exactly as the script
built it (:attr:`KojimaRecord.prompt_text`, :attr:`KojimaRecord.extraction_prompt_text`); the
record keeps the model's outputs raw, the GeneratedCot stores them stripped of surrounding whitespace.
"""

from __future__ import annotations

import ast
import os
import re
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..answers import get as type_of
from ..errors import DataError
from ..extract import extract, gold_value, is_correct
from ..schema import Answer, AnswerType, GeneratedCot, Sample

__all__ = [
    "KOJIMA_DATASET_TYPES",
    "KojimaLog",
    "KojimaRecord",
    "log_to_samples",
    "read_kojima_log",
    "read_kojima_log_file",
    "rescore_log",
    "to_generated_cot",
]

#: Answer type of every dataset key (the log file prefix) of the published logs.
KOJIMA_DATASET_TYPES: dict[str, AnswerType] = {
    "addsub": "number",
    "gsm8k": "number",
    "multiarith": "number",
    "singleeq": "number",
    "svamp": "number",
    "aqua": "multiplechoice",
    "commonsensqa": "multiplechoice",
    "date_understanding": "multiplechoice",
    "shuffled_objects": "multiplechoice",
    "coin_flip": "bool",
    "strategyqa": "bool",
    "last_letters": "text",
}

#: The fragments ids (ThoughtSource ``fragments.json`` 0.01) of Kojima's answer-extraction phrases.
_EXTRACTION_IDS: dict[str, str] = {
    "Therefore, the answer is": "kojima-01",
    "Therefore,": "kojima-02",
    "The answer is": "kojima-03",
    "Therefore, the answer (arabic numerals) is": "kojima-numerals",
    "Therefore, the answer (Yes or No) is": "kojima-yes-no",
    "Therefore, among A through C, the answer is": "kojima-A-C",
    "Therefore, among A through D, the answer is": "kojima-A-D",
    "Therefore, among A through E, the answer is": "kojima-A-E",
    "Therefore, among A through F, the answer is": "kojima-A-F",
}
_COT_TRIGGER_IDS: dict[str, str] = {
    "Let's think step by step.": "kojima-01",
    "We should think about this step by step.": "kojima-02",
    "First,": "kojima-03",
    "Before we dive into the answer,": "kojima-04",
    "Proof followed by the answer.": "kojima-05",
    "Let's think step by step in a realistic way.": "kojima-06",
    "Let's think step by step using common sense and knowledge.": "kojima-07",
    "Let's think like a detective step by step.": "kojima-08",
    "Let's think about this logically.": "kojima-09",
    "Let's think step by step. First,": "kojima-10",
    "Let's think": "kojima-11",
    "Let's solve this problem by splitting it into steps.": "kojima-12",
    "The answer is after the proof.": "kojima-13",
    "Let's be realistic and think step by step.": "kojima-14",
}
KOJIMA_PAPER_DATE = "2022/05/24"  # arXiv:2205.11916v1
KOJIMA_MODEL = "text-davinci-002"  # "gpt3-xl" in the logs; Table 1 of the paper is text-davinci-002
_UUID_NS = uuid.UUID("6f1d2c1e-2b6a-4f5e-9d2c-6b0f6f2a4b11")

_SEPARATOR = "*************************"
_DATA_RE = re.compile(r"^(\d+)(?:st|nd|rd|th) data$")
_SAMPLING_RE = re.compile(r"^\d+_th_sampling$")
_ACCURACY_RE = re.compile(r"^accuracy : ([0-9.eE+-]+)\s*$")
_CHOICE_RE = re.compile(r"\(([A-Z])\)\s*(.*?)(?=\s*\([A-Z]\)|\s*$)", re.S)
_NS_ITEM_RE = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()]+(?:\(\))?)")


class KojimaRecord(BaseModel):
    """One question of a Kojima et al. log."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str  # the log's dataset key (file prefix), e.g. "gsm8k", "commonsensqa", "date_understanding"
    method: Literal["zero_shot", "zero_shot_cot"]
    index: int  # 0-based position of the question in the log (= in the authors' dataset file)
    question: str  # as shown to the model, answer choices included ("... Answer Choices: (A) ...")
    cot_trigger: str | None  # "Let's think step by step." (zero_shot_cot) or None
    cot: str | None  # the model's reasoning (zero_shot_cot) or None
    extraction_prompt: str  # the phrase the output continues: "Therefore, the answer (arabic numerals) is"
    extraction_text: str  # the model's output after that phrase, raw
    pred: str  # the authors' cleansed prediction ("" when none was found)
    gold: str  # the gold answer as the log prints it
    line: int  # 1-based line of the record's "Q:" line in the log

    @property
    def answer_type(self) -> AnswerType:
        return KOJIMA_DATASET_TYPES.get(self.dataset, "text")

    @property
    def choices(self) -> list[str]:
        """The answer choices printed in the question ("Answer Choices: (A) 550 (B) 570 ..."), [] if none."""
        _, sep, tail = self.question.rpartition("Answer Choices:")
        if not sep:
            return []
        return [m.group(2).strip() for m in _CHOICE_RE.finditer(tail)]

    @property
    def question_text(self) -> str:
        """The question without its printed answer choices."""
        head, sep, _ = self.question.rpartition("Answer Choices:")
        return head.rstrip() if sep else self.question

    @property
    def prompt_text(self) -> str:
        """The first prompt exactly as the script sent it."""
        trigger = self.cot_trigger if self.method == "zero_shot_cot" else self.extraction_prompt
        return f"Q: {self.question}\nA: {trigger}"

    @property
    def extraction_prompt_text(self) -> str:
        """The full answer-extraction prompt exactly as the script sent it."""
        if self.method == "zero_shot":
            return self.prompt_text
        return f"{self.prompt_text}{self.cot} \n{self.extraction_prompt}"


class KojimaLog(BaseModel):
    """A whole log: the run's arguments, its records and the accuracy it reports (percent)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    dataset: str
    method: Literal["zero_shot", "zero_shot_cot"]
    arguments: dict[str, Any]
    records: list[KojimaRecord]
    reported_accuracy: float | None  # percent, as printed by the script


def _dataset_key(path: Path) -> tuple[str, str]:
    stem = path.name.removesuffix(".log")
    for method in ("_zero_shot_cot", "_zero_shot"):
        if stem.endswith(method):
            return stem[: -len(method)], method[1:]
    raise DataError("log file name must end in _zero_shot.log or _zero_shot_cot.log", path=str(path))


def _parse_namespace(line: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    body = line[len("Namespace(") : -1] if line.endswith(")") else line[len("Namespace(") :]
    for key, raw in _NS_ITEM_RE.findall(body):
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out


def read_kojima_log_file(path: str | os.PathLike[str]) -> KojimaLog:
    """Parse a whole Kojima et al. log; :class:`DataError` names file and line on any surprise."""
    p = Path(path)
    dataset, method = _dataset_key(p)
    try:
        lines = p.read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise DataError(f"cannot read log: {exc}", path=str(p)) from exc

    args: dict[str, Any] = {}
    for ln in lines[:10]:
        if ln.startswith("Namespace("):
            args = _parse_namespace(ln)
            break
    if args.get("method", method) != method:
        raise DataError(f"file name says method {method!r}, the log's arguments say {args['method']!r}", path=str(p))
    cot_trigger = args.get("cot_trigger", "Let's think step by step.") if method == "zero_shot_cot" else None
    cot_phrase = str(args.get("direct_answer_trigger", "")).lstrip("\n")
    # Older runs did not print the zero-shot phrase; the script derived it from the CoT one.
    zero_phrase = str(args.get("direct_answer_trigger_for_zeroshot") or cot_phrase.removeprefix("Therefore, "))
    zero_phrase = zero_phrase[:1].upper() + zero_phrase[1:]

    records: list[KojimaRecord] = []
    reported: float | None = None
    n = len(lines)
    i = 0
    last_data_no: int | None = None
    while i < n:
        ln = lines[i]
        m = _DATA_RE.match(ln)
        if m:
            last_data_no = int(m.group(1))
            i += 1
            continue
        m = _ACCURACY_RE.match(ln)
        if m:
            reported = float(m.group(1))
            i += 1
            continue
        if not (ln.startswith("Q: ") and i > 0 and _SAMPLING_RE.match(lines[i - 1])):
            i += 1
            continue
        start = i
        j = i
        while j < n and not lines[j].startswith("pred_before : "):
            if lines[j] == _SEPARATOR:
                raise DataError("record ends before its 'pred_before :' line", path=str(p), line=j + 1)
            j += 1
        k = j
        while k < n and not lines[k].startswith("pred_after : "):
            k += 1
        if k + 3 >= n or not lines[k + 3].startswith("GT : "):
            raise DataError("expected pred_after / pred_list / pred_mode / GT lines", path=str(p), line=k + 1)
        pred_before = "\n".join([lines[j][len("pred_before : ") :], *lines[j + 1 : k]])
        body = "\n".join(lines[start:j])[len("Q: ") :]
        index = len(records)
        if last_data_no is not None and last_data_no != index + 1:
            raise DataError(f"record {index + 1} is labelled {last_data_no}", path=str(p), line=start)
        if method == "zero_shot_cot":
            sep = f"\nA: {cot_trigger}"
            phrase = cot_phrase
        else:
            phrase = zero_phrase
            sep = f"\nA: {phrase}"
        qpos = body.find(sep)
        if qpos < 0:
            raise DataError(f"cannot find the line 'A: {sep[4:]}'", path=str(p), line=start + 1, record=str(index))
        question, rest = body[:qpos], body[qpos + len(sep) :]
        cot: str | None = None
        if method == "zero_shot_cot":
            tail = f" \n{phrase}"
            # The script printed prompt + completion; 'pred_before' is the raw completion in most logs.
            head = rest[: len(rest) - len(pred_before)] if pred_before and rest.endswith(pred_before) else rest
            pos = head.rstrip(" \n").rfind(tail) if head.rstrip(" \n").endswith(tail) else rest.rfind(tail)
            if pos < 0:
                raise DataError(f"cannot find the extraction phrase {phrase!r}", path=str(p), line=start + 1, record=str(index))
            cot, extraction = rest[:pos], rest[pos + len(tail) :]
        else:
            extraction = rest
        records.append(
            KojimaRecord(
                dataset=dataset,
                method=method,  # type: ignore[arg-type]
                index=index,
                question=question,
                cot_trigger=cot_trigger,
                cot=cot,
                extraction_prompt=phrase,
                extraction_text=extraction,
                pred=lines[k][len("pred_after : ") :],
                gold=lines[k + 3][len("GT : ") :],
                line=start + 1,
            )
        )
        last_data_no = None
        i = k + 4
    size = None
    for ln in lines[:20]:
        if ln.startswith("data size : "):
            size = int(ln.split(":")[1])
            break
    if size is not None and size != len(records):
        raise DataError(f"the log announces {size} questions, {len(records)} were parsed", path=str(p))
    return KojimaLog(
        path=str(p),
        dataset=dataset,
        method=method,
        arguments=args,
        records=records,
        reported_accuracy=reported,  # type: ignore[arg-type]
    )


def read_kojima_log(path: str | os.PathLike[str]) -> list[KojimaRecord]:
    """The records of one Kojima et al. log (``<dataset>_zero_shot[_cot].log``)."""
    return read_kojima_log_file(path).records


def _extraction_id(record: KojimaRecord) -> str | None:
    if record.method == "zero_shot":
        return None  # no separate extraction step: the first prompt asked for the answer directly
    return _EXTRACTION_IDS.get(record.extraction_prompt)


def to_generated_cot(
    record: KojimaRecord,
    *,
    id: str | None = None,
    sample_id: str | None = None,
    fragments_version: str = "0.01",
) -> GeneratedCot:
    """A ThoughtSource GeneratedCot holding the record's CoT and its extraction output as the answer.

    Ids are deterministic (uuid5 of dataset, method, index, and ``sample_id`` when given), so
    re-importing a log gives the same ids.  ``answer`` is the raw extraction output (stripped), not
    the authors' cleansed ``pred``; :mod:`thoughtsource.evaluate` extracts and scores it.
    """
    key = f"kojima/{record.dataset}/{record.method}/{record.index}/{sample_id or ''}"
    cot_id = id or str(uuid.uuid5(_UUID_NS, key))
    is_cot = record.method == "zero_shot_cot"
    return GeneratedCot(
        id=cot_id,
        fragments_version=fragments_version,
        instruction=None,
        cot_trigger=_COT_TRIGGER_IDS.get(record.cot_trigger or "", record.cot_trigger) if is_cot else None,
        cot_trigger_template="Q: {question}\nA: {cot_trigger}",
        prompt_text=record.prompt_text,
        cot=(record.cot or "").strip() if is_cot else "",
        answers=[
            Answer(
                id=str(uuid.uuid5(_UUID_NS, key + "/answer")),
                answer_extraction=_extraction_id(record),
                answer_extraction_template="{prompt}{cot} \n{answer_extraction}" if is_cot else None,
                answer_extraction_text=record.extraction_prompt_text,
                answer=record.extraction_text.strip(),
                correct_answer=None,
            )
        ],
        author="kojima",
        date=KOJIMA_PAPER_DATE,
        api_service="openai",
        model=KOJIMA_MODEL,
        comment=f"Kojima et al. (2022) published log {record.dataset}_{record.method}.log, question {record.index + 1}",
        annotations=[],
    )


# ---------------------------------------------------------------------------------------------
# Re-scoring a published log with thoughtsource.extract
# ---------------------------------------------------------------------------------------------

#: Why our verdict on a record can differ from the authors' (see docs/evaluation.md).
DISAGREEMENT_REASONS: dict[str, str] = {
    "kojima-string-compare": "the authors compare strings: a right number written differently counts as wrong "
    "('0.6666666666666667' vs gold '0.6666666666666666', '12.30' vs '12.3', gold '40,000')",
    "fraction": "the authors take the numerator of a fraction ('3/4' -> 3); we read 0.75",
    "equation-result": "the authors take the first number of an equation ('42 + 66 = 108' -> 42); we take the result",
    "number-word": "the authors read digits only ('eleven' -> no answer); we read number words",
    "ambiguous-list": "the answer lists several choices ('A or B', '(A), (B), or (D)'): the authors take the first, we "
    "count no answer",
    "decimal-point": "the authors' number pattern drops a leading decimal point ('.25' -> 25)",
    "comma-removal": "the authors delete every comma before reading numbers ('2,2,2' -> 222)",
    "choice-text": "the output names the choice by its text ('game.', 'Colds and Flu.'): the authors look for capital "
    "letters A-E anywhere (none, or the C of 'Colds'); we match the choice text",
    "text-normalization": "the authors strip quotes, dots and spaces only ('n-a-e-y' != 'naey'); we also strip "
    "punctuation such as hyphens",
    "token-anywhere": "the authors take the first yes/no/letter anywhere in the output, also outside the answer "
    "sentence ('not known. There is no record ...' -> 'no'); we read the sentence after the phrase",
    "other": "anything else (listed per record in the test output)",
}
#: Disagreements that our extraction rule explains (the answer type's own reading explains the others:
#: ``AnswerType.published_reason``).
_RULE_REASONS: dict[str, str] = {
    "ambiguous": "ambiguous-list",
    "number:after-phrase-result": "equation-result",
    "number:word": "number-word",
    "mc:choice-text": "choice-text",
}


class RescoreResult(BaseModel):
    """Our accuracy on a published log next to the authors', with every disagreement classified."""

    model_config = ConfigDict(extra="forbid")

    dataset: str
    method: str
    answer_type: str
    mode: str
    n: int
    reported_accuracy: float | None  # percent, as the log prints it
    kojima_accuracy: float  # percent, recomputed from the log's pred/GT lines
    our_accuracy: float  # percent
    disagreements: dict[str, list[int]]  # reason -> record indices
    gained: dict[str, int]  # reason -> records we score right and the authors wrong
    lost: dict[str, int]  # reason -> records the authors score right and we wrong

    @property
    def adjusted_accuracy(self) -> float:
        """Our accuracy with the explained disagreements (all but 'other') given the authors' verdict."""
        net = sum(self.gained.get(r, 0) - self.lost.get(r, 0) for r in self.disagreements if r != "other")
        return self.our_accuracy - 100 * net / self.n


def rescore_log(log: KojimaLog, mode: str = "strict") -> RescoreResult:
    """Score every record of ``log`` with :func:`thoughtsource.extract.extract` and classify the disagreements."""
    t = KOJIMA_DATASET_TYPES.get(log.dataset, "text")
    tt = type_of(t)
    ours_ok = 0
    theirs_ok = 0
    dis: dict[str, list[int]] = {}
    gained: dict[str, int] = {}
    lost: dict[str, int] = {}
    for r in log.records:
        choices = r.choices
        e = extract(r.extraction_text, t, mode=mode, choices=choices)  # type: ignore[arg-type]
        gold = gold_value(t, [r.gold], choices)
        ours = is_correct(e.value, t, gold)
        theirs = r.pred == r.gold
        ours_ok += ours
        theirs_ok += theirs
        if ours == theirs:
            continue
        reason = (
            _RULE_REASONS.get(e.rule)
            or tt.published_reason(r.pred, r.extraction_text, e.value, gold, ours)
            or ("token-anywhere" if e.value is None and theirs else "other")
        )
        dis.setdefault(reason, []).append(r.index)
        bucket = gained if ours else lost
        bucket[reason] = bucket.get(reason, 0) + 1
    n = len(log.records)
    return RescoreResult(
        dataset=log.dataset,
        method=log.method,
        answer_type=t,
        mode=mode,
        n=n,
        reported_accuracy=log.reported_accuracy,
        kojima_accuracy=100 * theirs_ok / n if n else 0.0,
        our_accuracy=100 * ours_ok / n if n else 0.0,
        disagreements=dis,
        gained=gained,
        lost=lost,
    )


def log_to_samples(log: KojimaLog) -> list[Sample]:
    """ThoughtSource samples built from the log alone (question, printed choices, gold), each with its CoT.

    For use without the source dataset (tests, benchmarks, demos); the datasets module attaches the
    same CoTs to the real dataset samples instead.  Sample ids are ``<dataset>-<index>``; a
    multiple-choice gold letter becomes the text of that choice, and stays on the sample (``answer_letter``) where
    that text is the text of several choices, so the gold is scored by position as :func:`rescore_log` scores it.
    """
    t = KOJIMA_DATASET_TYPES.get(log.dataset, "text")
    out: list[Sample] = []
    for r in log.records:
        choices = r.choices
        gold, letter = type_of(t).published_gold(r.gold, choices)
        position = {"answer_letter": letter} if letter else {}
        out.append(
            Sample(
                id=f"{log.dataset}-{r.index}",
                question=r.question_text,
                type=t,
                choices=choices,
                answer=[gold],
                generated_cot=[to_generated_cot(r, sample_id=f"{log.dataset}-{r.index}")],
                **position,
            )
        )
    return out
