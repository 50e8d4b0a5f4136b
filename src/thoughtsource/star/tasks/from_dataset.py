"""STaR on any ThoughtSource dataset whose gold answers are multiplechoice, number or bool.

Prompts follow the STaR paper's CommonsenseQA format (Appendix B)::

    Q: What do people use to absorb extra ink from a fountain pen?
    Answer Choices:
    (a) shirt pocket
    ...
    (e) blotter
    A: The answer must be used to absorb extra ink. ... Therefore, the answer is blotter (e).

Hints (rationalization only, never in training data): ``(CORRECT)`` beside the right choice for
multiple choice; the answer alone in parentheses after the question for number and bool (as the
paper does for GSM8K) — never the reference solution.
Correctness: :func:`thoughtsource.extract` in strict mode.

Few-shot exemplars (task option ``prompts``):

``"star"`` — the default for ``commonsense_qa`` and ``gsm8k``
    The STaR authors' own prompts (:mod:`thoughtsource.star.prompts`: 7 CQA exemplars, the paper's
    Appendix B; 6 GSM8K exemplars, Appendix I), because they are what the paper's results were
    obtained with, so a run here is comparable with Tables 1–2.  The few-shot prefix is the
    authors' file text exactly (rationalization: their answer-key variant, ``(CORRECT)`` beside the
    right choice, ``(72)`` after the question), and new questions, generated completions and
    training targets use the same format: CQA ``… Therefore, the answer is blotter (e).``, GSM8K the
    rationale lines (with calculator annotations when the model writes them) then ``#### 72``.
    ``fewshot_k`` takes the first k exemplars of the file (all of them when k exceeds their
    number).  Direct baselines use the authors' direct prompt for CQA (``A: (e).``, read as an
    answer-extraction output); GSM8K has none upstream, so it is the same exemplars answered
    ``A: #### 72``.  The exemplars are CQA/GSM8K training questions: problems with the same
    question text (case and spacing ignored) are left out of train and test.
``"reference"`` — the default for every other dataset (the only choice there)
    Drawn (fixed seed) from samples of the exemplar split that have a reference CoT, never
    training problems; completions end ``Therefore, the answer is …``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

from ...answers import get as answer_type
from ...collection import Collection
from ...datasets import equations
from ...errors import ConfigError, DataError
from ...extract import gold_value, is_correct
from ...schema import Sample
from .. import judge, verify
from ..calculator import gold_rationale
from .base import Problem, Task
from .exemplars import star_exemplars

log = logging.getLogger(__name__)

PROMPT_SOURCES = ("star", "reference")


# Word-problem datasets whose verified filter also requires the rationale's numbers to come from the
# question (verify.ungrounded_operand).  Not GSM8K: its human solutions bring in many numbers the
# question implies without stating (29 % of them would be rejected, issue 30), and its issue-12 results
# were measured without the rule.
GROUNDED_DATASETS = frozenset({"mawps", "asdiv", "svamp", "word_problems"})
# Datasets with equations (or GSM8K's calculator annotations) to make calculator-format gold rationales from.
CALC_DATASETS = frozenset({"mawps", "asdiv", "svamp", "gsm8k"})
#: a ThoughtSource file in the calc format holds its gold rationales as its CoTs (``star.word_problems.write_split``)
CALC_FILE_SUFFIXES = (".json", ".jsonl", ".parquet")


def _question_key(question: str) -> str:
    """A question compared across sources: lower case, single spaces."""
    return " ".join(question.lower().split())


@dataclass(frozen=True, kw_only=True)
class DatasetOptions:
    """A :class:`DatasetTask`'s options: ``dataset`` and the ``task_options`` of a STaR config (all but ``dataset``)."""

    #: a registered dataset name or a ThoughtSource file
    dataset: str
    #: the dataset to use when the file holds several
    name: str | None = None
    train_split: str = "train"
    #: None: test is a seeded partition of the train split (``n_test`` problems, or ``test_fraction`` of it)
    test_split: str | None = None
    #: where reference exemplars are drawn from (None: the train split)
    exemplar_split: str | None = None
    n_train: int | None = None
    n_test: int | None = 200
    test_fraction: float = 0.2
    exemplar_seed: int = 1234
    #: None: the task's default_max_new_tokens
    max_new_tokens: int | None = None
    data_dir: str | None = None
    #: the few-shot exemplars: "reference" or "star" (the STaR authors', commonsense_qa and gsm8k only)
    prompts: str = "reference"
    #: problems held out of training for choosing the best iteration
    n_dev: int = 0
    #: a fresh seeded sample of this many training problems each iteration (None: the same training set)
    per_iteration: int | None = None
    #: "calc": calculator-executed rationales (``<<36-12=24>>``, :mod:`thoughtsource.star.calculator`) for the
    #: datasets in :data:`CALC_DATASETS`: gold rationales and exemplars from the dataset's equations, the calculator in
    #: the decoding loop, the verified filter :func:`~thoughtsource.star.verify.verify_calc`; "text": the reference CoTs
    format: Literal["text", "calc"] = "text"
    #: the calculator's rounds (stops at "=") a generation may take, format "calc" only
    calculator_rounds: int = 24

    def __post_init__(self) -> None:
        if self.n_dev < 0 or (self.per_iteration is not None and self.per_iteration < 1):
            raise ConfigError(f"need n_dev >= 0 and per_iteration >= 1, got n_dev={self.n_dev}, per_iteration={self.per_iteration}")
        if self.prompts not in PROMPT_SOURCES:
            raise ConfigError(f"prompts must be one of {PROMPT_SOURCES}, got {self.prompts!r}")
        if self.format not in ("text", "calc"):
            raise ConfigError(f"format must be 'text' or 'calc', got {self.format!r}")
        if self.format == "calc" and self.dataset not in CALC_DATASETS and Path(self.dataset).suffix not in CALC_FILE_SUFFIXES:
            raise ConfigError(f"format 'calc' needs the equations of one of {sorted(CALC_DATASETS)}, or a ThoughtSource file whose "
                              f"CoTs are calculator-format rationales, not {self.dataset!r}")
        if self.calculator_rounds < 1:
            raise ConfigError(f"calculator_rounds must be >= 1, got {self.calculator_rounds}")


def _option(name: str) -> Any:
    """A read-only attribute of a :class:`DatasetTask` that is its option ``name`` (the options are the only state)."""
    return property(lambda self: getattr(self.options, name), doc=f"``options.{name}``")


class DatasetTask(Task):
    """Problems from a Collection (a registered dataset name or a ThoughtSource file).

    Made from its options, ``DatasetTask(DatasetOptions(dataset="svamp", n_test=50))``, or from keywords, as the
    registry makes a task from a config's ``task_options``: ``DatasetTask("svamp", n_test=50)``,
    ``Gsm8kTask(n_train=100)`` (:meth:`options_for`: a subclass's :attr:`option_defaults` under them).
    """

    name: ClassVar[str] = "dataset"
    stop: ClassVar[tuple[str, ...]] = ("\n\nQ:", "\nQ:")
    default_max_new_tokens: ClassVar[int] = 160
    #: the task name under which :mod:`thoughtsource.star.prompts` holds the authors' prompts (None: none)
    star_prompts: ClassVar[str | None] = None
    #: the task's options as one object (``task_option_types`` reads its fields)
    options_type: ClassVar[type[DatasetOptions]] = DatasetOptions
    #: the options a subclass sets unless given (its dataset, its splits, its prompts)
    option_defaults: ClassVar[dict[str, Any]] = {}

    prompts: str = _option("prompts")
    dataset: str = _option("dataset")
    dataset_name: str | None = _option("name")
    train_split: str = _option("train_split")
    test_split: str | None = _option("test_split")
    n_train: int | None = _option("n_train")
    n_test: int | None = _option("n_test")
    test_fraction: float = _option("test_fraction")
    exemplar_seed: int = _option("exemplar_seed")
    data_dir: str | None = _option("data_dir")
    n_dev: int = _option("n_dev")
    per_iteration: int | None = _option("per_iteration")

    @property
    def exemplar_split(self) -> str:
        """Where the reference exemplars come from: ``options.exemplar_split``, else the train split."""
        return self.options.exemplar_split or self.options.train_split

    def __init__(self, options: DatasetOptions | str | None = None, /, **keywords: Any) -> None:
        if not isinstance(options, DatasetOptions):
            options = self.options_for(options, **keywords)
        elif keywords:
            raise TypeError(f"{type(self).__name__}: options given twice (a DatasetOptions and keywords {sorted(keywords)})")
        if options.prompts == "star" and self.star_prompts is None:
            raise ConfigError("prompts='star' (the STaR authors' prompts) exists for commonsense_qa and gsm8k only")
        self.options = options
        if options.max_new_tokens:
            self.default_max_new_tokens = options.max_new_tokens  # type: ignore[misc]
        self._splits: dict[str, list[Sample]] | None = None
        self._ds_name = ""
        self._calc_gold: dict[str, dict[str, str]] = {}  # split -> sample id -> calculator-format gold rationale

    @property
    def calc(self) -> bool:
        return self.options.format == "calc"

    @property
    def calculator_rounds(self) -> int | None:  # type: ignore[override]
        return self.options.calculator_rounds if self.calc else None

    # ------------------------------------------------------------------ loading
    @classmethod
    def options_for(cls, dataset: str | None = None, /, **keywords: Any) -> DatasetOptions:
        """The options from keywords, over this class's :attr:`option_defaults` (``dataset`` among them for a
        subclass that names its dataset)."""
        given = {**cls.option_defaults, **keywords}
        if dataset is not None:
            given["dataset"] = dataset
        return DatasetOptions(**given)

    def _collection_splits(self) -> dict[str, list[Sample]]:
        if self._splits is not None:
            return self._splits
        p = Path(self.dataset)
        if p.suffix in (".json", ".jsonl", ".parquet") or p.is_dir():
            coll = Collection.load(p)
        else:
            coll = Collection.from_datasets(self.dataset, data_dir=self.data_dir)
        names = coll.names
        if self.dataset_name:
            if self.dataset_name not in names:
                raise DataError(f"dataset {self.dataset_name!r} not in the file (has {names})", path=str(self.dataset))
            name = self.dataset_name
        elif len(names) == 1:
            name = names[0]
        else:
            raise ConfigError(f"{self.dataset} holds several datasets {names}: choose one with task_options.name")
        self._ds_name = name
        splits: dict[str, list[Sample]] = {}
        for split, samples in coll[name].items():
            usable = [s for s in samples if s.type in SUPPORTED_TYPES and len(s.answer) == 1]
            skipped = len(samples) - len(usable)
            if skipped:
                log.info("%s/%s: %d samples skipped (type not in %s or no single gold answer)", name, split, skipped, SUPPORTED_TYPES)
            splits[split] = usable
        if not any(splits.values()):
            raise DataError(f"no samples with a single gold answer of type {'/'.join(SUPPORTED_TYPES)}", dataset=name)
        self._splits = splits
        return splits

    def _problem(self, s: Sample, split: str) -> Problem:
        answer = answer_type(s.type).star_label(s.answer[0], s.choices)
        return Problem(
            id=f"{self._ds_name}/{split}/{s.id}",
            question=s.question.strip(),
            answer=answer,
            type=s.type,
            choices=tuple(s.choices),
            rationale=self._calc_rationale(split, s.id) if self.calc else " ".join(c.strip() for c in s.cot if c.strip()),
            meta={"dataset": self._ds_name, "split": split, "sample_id": s.id, "context": s.context or ""},
        )

    def _calc_rationale(self, split: str, sample_id: str) -> str:
        """The sample's calculator-format gold rationale; "" where it does not execute to the gold answer."""
        if split not in self._calc_gold:
            samples = self._collection_splits().get(split, [])
            if self.dataset in CALC_DATASETS:
                self._calc_gold[split] = calc_gold(self.dataset, split, self.data_dir, samples)
            else:  # a file in the calc format: its CoTs are the gold rationales (one CoT step, its lines kept)
                self._calc_gold[split] = {s.id: "\n".join(c.strip() for c in s.cot if c.strip()) for s in samples if s.cot}
        return self._calc_gold[split].get(sample_id, "")

    @property
    def _star(self) -> bool:
        return self.prompts == "star"

    def _star_exemplars(self) -> tuple[Problem, ...]:
        return star_exemplars(self.star_prompts) if self._star and self.star_prompts else ()

    def _exemplar_ids(self) -> set[str]:
        return set() if self._star else {e.meta["sample_id"] for e in self._exemplar_pool()}

    def _kept(self, samples: list[Sample], exemplar_ids: set[str]) -> list[Sample]:
        """Samples that are not exemplars: by id (reference exemplars) and by question text (STaR's)."""
        questions = {_question_key(e.question) for e in self._star_exemplars()}
        return [s for s in samples if s.id not in exemplar_ids and _question_key(s.question) not in questions]

    def _exemplar_pool(self, k: int = 10) -> list[Problem]:
        splits = self._collection_splits()
        pool = [s for s in splits.get(self.exemplar_split, []) if s.cot]
        if self.calc:  # those whose calculator-format gold executes to the gold answer
            pool = [s for s in pool if self._calc_rationale(self.exemplar_split, s.id)]
        rng = random.Random(f"exemplars-{self.exemplar_seed}")
        rng.shuffle(pool)
        return [self._problem(s, self.exemplar_split) for s in pool[: max(k, 10)]]

    def load(self, split: str, seed: int) -> list[Problem]:
        """``train``, ``dev`` or ``test``.

        Without a test split, test is a seeded partition of the train split.  ``dev`` (``n_dev``
        samples, for choosing the best iteration) is held out of the training part with a fixed
        seed; training problems never include it.
        """
        if split not in ("train", "dev", "test"):
            raise ConfigError(f"split must be 'train', 'dev' or 'test', got {split!r}")
        splits = self._collection_splits()
        exemplar_ids = self._exemplar_ids()
        base = self._kept(splits.get(self.train_split, []), exemplar_ids)
        has_test = bool(self.test_split and splits.get(self.test_split))
        chosen = self.train_split
        if has_test:
            test_part, train_part = self._kept(splits[self.test_split], set()), base  # type: ignore[index]
            if split == "test":
                chosen = self.test_split  # type: ignore[assignment]
        else:
            order = base[:]
            random.Random(f"partition-{seed}").shuffle(order)
            n_test = int(len(order) * self.test_fraction) if self.n_test is None else self.n_test
            n_test = max(1, min(n_test, len(order) // 2))
            test_part, train_part = order[:n_test], order[n_test:]
        held = train_part[:]
        random.Random("dev").shuffle(held)
        dev_part = held[: self.n_dev]
        dev_ids = {s.id for s in dev_part}
        samples = {"test": test_part, "dev": dev_part, "train": [s for s in train_part if s.id not in dev_ids]}[split]
        if not samples:
            if split == "dev":
                return []
            raise DataError(f"no usable samples for {split} (splits: {sorted(splits)})", dataset=self._ds_name, split=chosen)
        samples = samples[:]
        random.Random(f"{split}-{seed}").shuffle(samples)
        limit = {"train": self.n_train, "test": self.n_test, "dev": None}[split]
        if limit is not None:
            samples = samples[:limit]
        return [self._problem(s, str(chosen)) for s in samples]

    def train_problems(self, iteration: int, seed: int) -> list[Problem]:
        """The fixed training set, or (``per_iteration``) a fresh seeded sample of it each iteration."""
        train = self.load("train", seed)
        if self.per_iteration is None:
            return train
        return random.Random(f"sample-{seed}-{iteration}").sample(train, min(self.per_iteration, len(train)))

    def exemplars(self, k: int) -> list[Problem]:
        """k exemplars; with ``prompts="star"`` the first k of the authors' file."""
        if self._star:
            star = self._star_exemplars()
            if k > len(star):
                log.warning("%s: the STaR prompt has %d exemplars, not %d", self.star_prompts, len(star), k)
            if self.calc:  # their annotations' results as the calculator prints them ("144.00" is 144)
                return [replace(e, rationale=gold_rationale(e.rationale)[0]) for e in star[:k]]
            return list(star[:k])
        pool = self._exemplar_pool(k)
        if k > len(pool):
            log.warning("%s: only %d samples with a reference CoT for %d exemplars", self._ds_name, len(pool), k)
        return pool[:k]

    # ------------------------------------------------------------------ text
    def answer_text(self, problem: Problem) -> str:
        return answer_type(problem.type).star_answer(problem.answer, problem.choices)

    def hint(self, problem: Problem) -> str:
        return answer_type(problem.type).star_hint(problem.answer, problem.choices)

    def _question_block(self, p: Problem, *, hint: bool) -> str:
        ctx = p.meta.get("context") or ""
        q = f"{ctx.strip()}\n{p.question}" if ctx.strip() else p.question
        return f"Q: {answer_type(p.type).star_question(q, p.answer, p.choices, hint)}A:"

    def prompt(self, problem: Problem, exemplars: list[Problem], *, hint: bool = False, direct: bool = False) -> str:
        shots = "".join(
            self._question_block(e, hint=hint) + self.completion(e, None if direct else e.rationale) + "\n\n" for e in exemplars
        )
        return shots + self._question_block(problem, hint=hint)

    def completion(self, problem: Problem, rationale: str | None) -> str:
        """``… Therefore, the answer is X.``; with the authors' prompts their format: GSM8K ``rationale\n#### N``, CQA
        ``… Therefore, the answer is X (y).``, direct ``(y).``."""
        t = answer_type(problem.type)
        if self._star:
            return t.star_completion(problem.answer, problem.choices, rationale)
        if self.calc and rationale is not None:  # the annotation lines, then the answer on its own line
            return f" {rationale.strip()}\nThe answer is {t.star_answer(problem.answer, problem.choices)}."
        return t.completion(problem.answer, problem.choices, rationale)

    def generated_completion(self, text: str) -> str:
        return " " + text.strip()

    def _source(self, direct: bool) -> Literal["cot", "extraction"]:
        """STaR's direct prompts answer right after "A:" ("A: (e)."): read that as an extraction output."""
        return "extraction" if direct and self._star else "cot"

    def predicted_answer(self, problem: Problem, text: str, *, direct: bool = False) -> str | None:
        return judge.extract_answer(problem, text, self._source(direct))

    def is_correct(self, problem: Problem, text: str, *, direct: bool = False) -> bool:
        return judge.is_correct(problem, text, self._source(direct))

    def verify(self, problem: Problem, text: str, *, rationalized: bool = False) -> str | None:
        """Per answer type (:mod:`thoughtsource.star.verify`): multiple choice, no copied ``(CORRECT)``
        and one consistent stated choice; number, every arithmetic statement (symbolic or verbal) true
        and the gold answer, and for :data:`GROUNDED_DATASETS` every operand from the question or an
        earlier result; bool, no copied hint."""
        check = RATIONALE_CHECKS.get(problem.type)
        return check(self, problem, text) if check else None


def _verify_choice(task: DatasetTask, p: Problem, text: str) -> str | None:
    return verify.verify_choice(text, p.choices, p.answer)


def _verify_number(task: DatasetTask, p: Problem, text: str) -> str | None:
    grounded = task._ds_name in GROUNDED_DATASETS
    question = f"{p.meta.get('context') or ''}\n{p.question}" if grounded else None
    if task.calc:
        return verify.verify_calc(text, p.answer, hint=task.hint(p), question=question)
    return verify.verify_number(text, p.answer, hint=task.hint(p), question=question)


def calc_gold(dataset: str, split: str, data_dir: str | None, samples: list[Sample]) -> dict[str, str]:
    """``{sample id: calculator-format gold rationale}`` of the split's samples whose equation executes to their gold
    answer (:func:`thoughtsource.star.calculator.gold_rationale`); the others are left out (no gold rationale)."""
    found = equations(dataset, split, data_dir)
    out: dict[str, str] = {}
    for s in samples:
        if s.id not in found:
            continue
        text, value = gold_rationale(found[s.id])
        if value is not None and is_correct(float(value), "number", gold_value("number", [s.answer[0]])):
            out[s.id] = text
    missing = len(samples) - len(out)
    if missing:
        log.info("%s/%s: %d of %d samples have no calculator-format gold rationale that executes to their answer",
                 dataset, split, missing, len(samples))
    return out


def _verify_bool(task: DatasetTask, p: Problem, text: str) -> str | None:
    return verify.verify_bool(text, p.answer)


#: The verified filter's check of a rationale, by answer type (:mod:`thoughtsource.star.verify`, which sits above
#: ``answers/``); the types STaR runs on are those with a check.
RATIONALE_CHECKS: dict[str, Callable[[DatasetTask, Problem, str], str | None]] = {
    "multiplechoice": _verify_choice,
    "number": _verify_number,
    "bool": _verify_bool,
}
SUPPORTED_TYPES = tuple(RATIONALE_CHECKS)


class Gsm8kTask(DatasetTask):
    name: ClassVar[str] = "gsm8k"
    default_max_new_tokens: ClassVar[int] = 256
    star_prompts: ClassVar[str | None] = "gsm8k"
    option_defaults: ClassVar[dict[str, Any]] = {"dataset": "gsm8k", "test_split": "test", "prompts": "star"}


class CommonsenseQaTask(DatasetTask):
    name: ClassVar[str] = "commonsense_qa"
    star_prompts: ClassVar[str | None] = "commonsense_qa"
    option_defaults: ClassVar[dict[str, Any]] = {"dataset": "commonsense_qa", "test_split": "validation", "prompts": "star"}
