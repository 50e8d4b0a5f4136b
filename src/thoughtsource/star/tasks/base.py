"""The task contract of the STaR loop.

A task turns problems into prompts (with or without the rationalization hint), judges generated
text (via :mod:`thoughtsource.extract`, strict mode), and builds training records, which never
contain the hint.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar


@dataclass(frozen=True)
class Problem:
    """One question with its gold answer (or a pseudo-label) and, when known, a reference rationale."""

    id: str
    question: str
    answer: str
    type: str = "number"
    choices: tuple[str, ...] = ()
    rationale: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def with_answer(self, answer: str) -> Problem:
        return replace(self, answer=answer)


@dataclass(frozen=True)
class TrainingRecord:
    """question → rationale + answer (completion-only loss on ``completion``); never the hint, exemplars only with train_with_fewshot."""

    id: str
    prompt: str
    completion: str
    rationalized: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "prompt": self.prompt, "completion": self.completion, "rationalized": self.rationalized}


class Task(abc.ABC):
    """What the STaR loop asks of a task: subclasses implement the abstract methods; the others have defaults.

    ``tests/star/test_task_conformance.py`` checks the contract for every task in ``TASKS``.
    """

    name: ClassVar[str] = "task"
    #: cut generated text at the first of these (the next few-shot example starting)
    stop: ClassVar[tuple[str, ...]] = ()
    default_max_new_tokens: ClassVar[int] = 128
    #: the calculator's rounds a generation may take (:mod:`thoughtsource.star.calculator`); None: no calculator
    calculator_rounds: int | None = None

    @abc.abstractmethod
    def load(self, split: str, seed: int) -> list[Problem]:
        """The problems of ``train``, ``dev`` (may be empty) or ``test``, the same for the same seed; the three share
        no problem, and no exemplar is among them."""

    def train_problems(self, iteration: int, seed: int) -> list[Problem]:
        """The training problems of 1-based ``iteration``: by default the same training set every time."""
        return self.load("train", seed)

    @abc.abstractmethod
    def exemplars(self, k: int) -> list[Problem]:
        """The few-shot exemplars (with their reference rationales) for ``fewshot_k`` = k; none for k = 0."""

    @abc.abstractmethod
    def prompt(self, problem: Problem, exemplars: list[Problem], *, hint: bool = False, direct: bool = False) -> str:
        """The exemplars' blocks followed by the problem's (its question; with ``hint``, the rationalization hint)."""

    @abc.abstractmethod
    def hint(self, problem: Problem) -> str:
        """The rationalization hint for the problem's answer (in prompts with ``hint=True`` only, never in training data)."""

    @abc.abstractmethod
    def predicted_answer(self, problem: Problem, text: str, *, direct: bool = False) -> str | None:
        """The answer the text commits to (strict extraction), normalised; None when there is none."""

    @abc.abstractmethod
    def is_correct(self, problem: Problem, text: str, *, direct: bool = False) -> bool:
        """Whether the text (a generation after :meth:`prompt`, already trimmed) ends in the problem's answer."""

    @abc.abstractmethod
    def completion(self, problem: Problem, rationale: str | None) -> str:
        """A reference rationale (without its answer) followed by the answer; None: the answer alone (direct)."""

    def generated_completion(self, text: str) -> str:
        """A generated text (already judged to end in the correct answer) as a training target."""
        return text.strip()

    def max_new_tokens(self, problem: Problem, *, direct: bool = False) -> int:
        return self.default_max_new_tokens

    def groups(self, problem: Problem) -> str | None:
        """A group key for per-group metrics (digit count for arithmetic); None: no groups."""
        return None

    def verify(self, problem: Problem, text: str, *, rationalized: bool = False) -> str | None:
        """The verified filter's check of a generated rationale (already judged correct): None when it
        passes, else a short reason.  The default checks nothing beyond the answer; tasks override it
        with the checks of :mod:`thoughtsource.star.verify`.  Must stay cheap (thousands of calls)."""
        return None

    # ------------------------------------------------------------------ shared
    def trim(self, text: str) -> str:
        """Cut the generation where the model starts the next few-shot example."""
        cut = len(text)
        for s in self.stop:
            i = text.find(s)
            if i != -1:
                cut = min(cut, i)
        return text[:cut].rstrip()

    def gold_record(self, problem: Problem, *, exemplars: Sequence[Problem] = ()) -> TrainingRecord:
        """question → the problem's reference rationale + answer (``baseline: gold``), in the format the few-shot
        exemplars show and the model generates (:meth:`completion`)."""
        return TrainingRecord(id=problem.id, prompt=self.prompt(problem, list(exemplars), hint=False, direct=False),
                              completion=self.completion(problem, problem.rationale), rationalized=False)

    def training_record(self, problem: Problem, text: str | None, *, rationalized: bool = False,
                        exemplars: Sequence[Problem] = ()) -> TrainingRecord:
        """question (never the hint) → generated rationale + answer.  ``text`` None: the gold answer alone (direct).

        ``exemplars`` non-empty (``--train-with-fewshot``, the paper's best CQA setting): the prompt is
        the few-shot prompt without hint, ``prompt(problem, exemplars)``; empty: the bare question.
        """
        return TrainingRecord(
            id=problem.id,
            prompt=self.prompt(problem, list(exemplars), hint=False, direct=text is None),
            completion=self.completion(problem, None) if text is None else self.generated_completion(text),
            rationalized=rationalized,
        )
