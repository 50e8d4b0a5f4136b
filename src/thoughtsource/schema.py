"""The ThoughtSource schema: Sample, GeneratedCot, Answer, Annotation (pydantic v2).

Structure is enforced by pydantic (a wrong type or a missing ``id``/``question``/``type`` always
fails).  Semantics per answer type (a multiple-choice answer must be one of the choices, a number
must parse, ...) are checked by :func:`thoughtsource.answers.semantic_problems`, so that loading real files can be
lenient (warn) or strict (raise), see :mod:`thoughtsource.io`.

Unknown keys are kept (``extra="allow"``) and written back, so files from other tools survive a
load/dump round trip.  Older key spellings are accepted: ``templates_version`` for
``fragments_version`` and ``annotation`` for ``annotations``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Any, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: ``Sample.type``: the names of the answer registry, ``thoughtsource.answers.ANSWER_TYPES`` (which sits above the
#: schema, so pydantic's check of the field spells them here once; tests/answers/test_answer_types.py keeps the two equal).
AnswerType = Literal["multiplechoice", "bool", "number", "text", "collection", "math"]
ANSWER_TYPES: tuple[str, ...] = get_args(AnswerType)

BOOL_WORDS = {"true": True, "false": False, "yes": True, "no": False}
_NUMBER_RE = re.compile(r"^[-+]?(\d+(,\d{3})*|\d*)(\.\d+)?$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_assignment=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict: declared fields in schema order, then unknown keys."""
        return self.model_dump(mode="json")


class Annotation(_Model):
    author: str | None = None
    date: str | None = None
    key: str
    value: Any = None


class Answer(_Model):
    id: str | None = None
    answer_extraction: str | None = None
    answer_extraction_template: str | None = None
    answer_extraction_text: str | None = None
    answer: str | None = None
    correct_answer: bool | None = None


class GeneratedCot(_Model):
    id: str | None = None
    fragments_version: str | None = None
    instruction: str | None = None
    cot_trigger: str | None = None
    cot_trigger_template: str | None = None
    prompt_text: str | None = None
    cot: str | None = None
    answers: list[Answer] = Field(default_factory=list)
    author: str | None = None
    date: str | None = None
    api_service: str | None = None
    model: str | dict[str, Any] | None = None
    comment: str | None = None
    annotations: list[Annotation] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _old_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if "templates_version" in data and "fragments_version" not in data:
                data = dict(data)
                data["fragments_version"] = data.pop("templates_version")
            if "annotation" in data and "annotations" not in data:
                data = dict(data)
                data["annotations"] = data.pop("annotation") or []
            if data.get("annotations", []) is None:
                data = {**data, "annotations": []}
            if data.get("answers", []) is None:
                data = {**data, "answers": []}
        return data


class Sample(_Model):
    id: str
    ref_id: str | None = ""
    question: str
    type: AnswerType
    choices: list[str] = Field(default_factory=list)
    context: str | None = ""
    cot: list[str] = Field(default_factory=list)
    answer: list[str] = Field(default_factory=list)
    generated_cot: list[GeneratedCot] = Field(default_factory=list)
    feedback: list[Any] | None = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        # Real files store ids as numbers now and then; keep them as strings.
        if isinstance(data, dict):
            if isinstance(data.get("id"), int):
                data = {**data, "id": str(data["id"])}
            if data.get("generated_cot", []) is None:
                data = {**data, "generated_cot": []}
            for key in ("choices", "cot", "answer"):
                if data.get(key, []) is None:
                    data = {**data, key: []}
        return data

    def iter_answers(self):
        """Yield (generated_cot, answer) pairs of this sample."""
        for cot in self.generated_cot:
            for ans in cot.answers:
                yield cot, ans


def parse_number(text: str) -> float | None:
    """Parse a gold number as stored in datasets ("1,000", "-3", "2.5", "3/4"); None if it is not one."""
    t = text.strip().replace(" ", "")
    if "/" in t:
        num, _, den = t.partition("/")
        a, b = parse_number(num), parse_number(den)
        return a / b if a is not None and b not in (None, 0) else None
    if not t or not _NUMBER_RE.match(t) or t in {"-", "+", "."}:
        return None
    try:
        return float(t.replace(",", ""))
    except ValueError:
        return None


# --------------------------------------------------------------------------- the model that wrote a CoT
_MODEL_NAMES: dict[str, str] = {}
_NAME_IN_TEXT = re.compile(r"""['"]name['"]\s*:\s*['"]([^'"]{1,200})['"]""")


def model_name(model: Any) -> str:
    """A model's name, from a CoT's ``model`` (or a :class:`GeneratedCot`): ``model["name"]``, or the name inside the
    ``"{'name': 'gpt-4', 'temperature': 0, ...}"`` string the original tools stored, or the plain string.

    A CoT stored without a model is ``"None"``, as every missing value is in the tables of evaluate, stats and results
    (``str(None)``), so it is a group of its own there and a choice in the web app's filters.
    """
    if isinstance(model, GeneratedCot):
        model = model.model
    if model is None:
        return "None"
    if isinstance(model, dict):
        return str(model.get("name", model))
    text = str(model)
    if text in _MODEL_NAMES:
        return _MODEL_NAMES[text]
    name = text
    if text.startswith("{"):
        try:
            obj = ast.literal_eval(text)
            if isinstance(obj, dict) and "name" in obj:
                name = str(obj["name"])
        except (ValueError, SyntaxError):
            found = _NAME_IN_TEXT.search(text)  # not a Python literal (cut off, or JSON with true/null): find the name
            if found:
                name = found.group(1)
    _MODEL_NAMES[text] = name
    return name


class SampleSource(Protocol):
    """What generation and evaluation read of a :class:`~thoughtsource.collection.Collection`: its samples with their
    dataset and split (also as ``data``: dataset -> split -> samples), and the slice of them by index.  They take
    this, not ``Collection``, so the layers below the collection never import it (the collection imports them, for
    its ``generate()``/``evaluate()`` facade)."""

    @property
    def data(self) -> dict[str, dict[str, list[Sample]]]: ...

    def samples(self) -> Iterator[tuple[str, str, Sample]]: ...

    def in_idx_range(self, idx_range: tuple[int, int] | None) -> SampleSource: ...


class ModelRecords:
    """The models behind generated CoTs, gathered a CoT at a time (:meth:`add`), as :func:`model_records` lists them:
    what ``evaluate_frame`` collects in its scoring pass, so that a streamed file is not read a second time for them."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(self, cot: Any) -> None:
        name = model_name(cot.model)
        params = {k: v for k, v in cot.model.items() if k not in ("name", "sample_index")} if isinstance(cot.model, dict) else {}
        key = (name, str(cot.api_service), repr(sorted(params.items(), key=str)))
        rec = self.found.get(key)
        if rec is None:
            rec = self.found[key] = {"name": name, "api_service": cot.api_service, "parameters": params,
                                     "fragments_versions": set(), "cots": 0}
        rec["cots"] += 1
        if cot.fragments_version:
            rec["fragments_versions"].add(cot.fragments_version)

    def records(self) -> list[dict[str, Any]]:
        """One record per model (name, API service, parameters), in order of first sight, with its CoT count."""
        return [{**r, "fragments_versions": sorted(r["fragments_versions"])} for r in self.found.values()]
