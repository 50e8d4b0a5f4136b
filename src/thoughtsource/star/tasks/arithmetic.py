"""n-digit addition with the scratchpad of Nye et al. as drawn in the STaR paper's Figure 3.

::

    Input:
    6 2 4 + 2 5 9
    Target:
    <scratch>
    6 2 4 + 2 5 9 , C: 0
    2 + 5 , 3 C: 1
    6 + 2 , 8 3 C: 0
    , 8 8 3 C: 0
    0 8 8 3
    </scratch>
    8 8 3

Everything up to and including ``Target:`` is the prompt.  Each scratchpad line holds the next digit
pair to add, the digits of the sum so far and the carry; the last line prepends the final carry.
Rationalization puts the answer after ``Target`` (``Target: 8 8 3``), as the paper describes.

Data (see :class:`ArithmeticTask`): fixed exemplars, test and dev sets, and a training pool from
which each iteration draws a fresh sample (the paper: 10,000 of 50,000), all disjoint, and free of
commuted twins: when ``a + b`` is an exemplar, a test or a dev problem, ``b + a`` is in no other part.

``scratchpad="compact"`` is a shorter format for small models trained from scratch (``thoughtsource
star base``): the operands unspaced, one line per digit position from the right, each the digit pair,
the carry in and their total (whose last digit is the sum digit and whose tens digit the next carry)::

    Input:
    624+259
    Target:
    <scratch>
    4+9+0=13
    2+5+1=8
    6+2+0=8
    </scratch>
    883

Its length grows linearly with the digit count (the paper's grows quadratically); rationalization
puts the answer after ``Target`` the same way (``Target: 883``), and the verified filter checks it
line by line (:func:`thoughtsource.star.verify.verify_compact_scratchpad`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from ...errors import ConfigError
from ..verify import verify_compact_scratchpad, verify_scratchpad
from .base import Problem, Task

_SCRATCH_END = "</scratch>"
_DIGITS_LINE = re.compile(r"^\s*(\d(?:\s+\d)*)\s*$")
_COMPACT_ANSWER = re.compile(r"^\s*(\d+)\s*$")

Scratchpad = Literal["paper", "compact"]
SCRATCHPADS: tuple[str, ...] = ("paper", "compact")


def spaced(n: int | str) -> str:
    return " ".join(str(n))


def scratchpad(a: int, b: int) -> str:
    """The scratchpad text (``<scratch>`` … ``</scratch>``) for a + b, both with the same digit count."""
    da, db = str(a), str(b)
    width = max(len(da), len(db))
    da, db = da.zfill(width), db.zfill(width)
    lines = [f"{spaced(da)} + {spaced(db)} , C: 0"]
    acc: list[str] = []
    carry = 0
    for i in range(width - 1, -1, -1):
        s = int(da[i]) + int(db[i]) + carry
        acc.insert(0, str(s % 10))
        carry = s // 10
        rest = f"{da[i - 1]} + {db[i - 1]} " if i > 0 else ""
        lines.append(f"{rest}, {' '.join(acc)} C: {carry}")
    lines.append(f"{carry} {' '.join(acc)}")
    return "<scratch>\n" + "\n".join(lines) + "\n</scratch>"


def compact_steps(a: int, b: int) -> list[str]:
    """The compact scratchpad's lines for a + b: ``x+y+c=t`` per digit position, right to left."""
    da, db = str(a), str(b)
    width = max(len(da), len(db))
    da, db = da.zfill(width), db.zfill(width)
    steps, carry = [], 0
    for i in range(width - 1, -1, -1):
        total = int(da[i]) + int(db[i]) + carry
        steps.append(f"{da[i]}+{db[i]}+{carry}={total}")
        carry = total // 10
    return steps


def compact_scratchpad(a: int, b: int) -> str:
    """The compact scratchpad text (``<scratch>`` … ``</scratch>``) for a + b."""
    return "<scratch>\n" + "\n".join(compact_steps(a, b)) + "\n</scratch>"


@dataclass
class _Options:
    min_digits: int = 1
    max_digits: int = 5
    n_train: int = 1000
    n_test_per_digit: int = 100
    n_dev_per_digit: int = 50
    pool_size: int = 50_000
    per_iteration: int | None = None
    split_seed: int = 0
    exemplar_seed: int = 1234
    scratchpad: Scratchpad = "paper"


#: above this many pairs, indices are drawn one by one (``random.sample`` needs ``len(range)``, which
#: overflows from 10 digits on: (9 * 10**9) ** 2 > sys.maxsize)
_SAMPLE_WHOLE_RANGE = 2**62


def pair_space(digits: int) -> int:
    """How many ordered n-digit pairs there are (1 digit: 0-9, else no leading zero)."""
    return 100 if digits == 1 else (9 * 10 ** (digits - 1)) ** 2


def pair_at(digits: int, index: int) -> tuple[int, int]:
    """The ``index``-th ordered pair of ``digits``-digit numbers (0 <= index < pair_space(digits))."""
    if digits == 1:
        return divmod(index, 10)
    lo, width = 10 ** (digits - 1), 9 * 10 ** (digits - 1)
    a, b = divmod(index, width)
    return lo + a, lo + b


def sample_indices(rng: random.Random, space: int, n: int) -> list[int]:
    """n distinct indices of ``range(space)``, uniformly, for any size of space (seeded by ``rng``)."""
    n = min(n, space)
    if space <= _SAMPLE_WHOLE_RANGE:
        return rng.sample(range(space), n)
    seen: dict[int, None] = {}
    while len(seen) < n:  # collisions are astronomically rare in such a space
        seen.setdefault(rng.randrange(space), None)
    return list(seen)


def with_twins(pairs: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The pairs and their commuted twins (b, a)."""
    return pairs | {(b, a) for a, b in pairs}


class ArithmeticTask(Task):
    """n-digit addition problems split as in the paper's experiments.

    Per digit count, four disjoint parts, all seeded: the few-shot exemplars (``exemplar_seed``), a
    **test** set (``n_test_per_digit``) and a **dev** set (``n_dev_per_digit``, for choosing the best
    iteration) fixed by ``split_seed`` whatever the run's seed, and the training **pool**
    (``pool_size`` problems, uniform over digit counts).  Training problems come from the pool:

    * ``per_iteration=N`` (the paper: 10,000 of 50,000): a fresh sample of N problems each
      iteration, stratified over digit counts, seeded by (run seed, iteration);
    * ``per_iteration=None``: one fixed training set of ``n_train`` problems (uniform over digit
      counts) reused by every iteration.

    There are only 100 one-digit pairs: when a digit count's space is too small, test, dev and pool
    share what is left after the exemplars (40 % / 10 % / 50 %), so one-digit test sets are smaller
    than asked; ``split_sizes()`` reports the real sizes.

    No part holds the commuted twin of another part's problem: ``b + a`` of a test, dev or exemplar
    problem ``a + b`` is in no other part (a model could learn it from its twin), and test and dev hold no twins
    of each other.  Any digit count
    works (20 digits and beyond: indices are drawn without materialising the pair space).

    ``scratchpad``: ``paper`` (Figure 3) or ``compact`` (see the module docstring).
    """

    name: ClassVar[str] = "arithmetic"
    stop: ClassVar[tuple[str, ...]] = ("\n\n", "\nInput:")

    def __init__(self, min_digits: int = 1, max_digits: int = 5, n_train: int = 1000, n_test_per_digit: int = 100,
                 n_dev_per_digit: int = 50, pool_size: int = 50_000, per_iteration: int | None = None,
                 split_seed: int = 0, exemplar_seed: int = 1234, scratchpad: Scratchpad = "paper") -> None:
        if not 1 <= min_digits <= max_digits:
            raise ConfigError(f"arithmetic: need 1 <= min_digits <= max_digits, got {min_digits}..{max_digits}")
        if min(n_train, n_test_per_digit, n_dev_per_digit, pool_size) < 0:
            raise ConfigError("arithmetic: n_train, n_test_per_digit, n_dev_per_digit and pool_size must be >= 0")
        if per_iteration is not None and per_iteration < 1:
            raise ConfigError(f"arithmetic: per_iteration must be >= 1, got {per_iteration}")
        if scratchpad not in SCRATCHPADS:
            raise ConfigError(f"arithmetic: scratchpad is one of {', '.join(SCRATCHPADS)}, not {scratchpad!r}")
        self.o = _Options(min_digits, max_digits, n_train, n_test_per_digit, n_dev_per_digit, pool_size, per_iteration,
                          split_seed, exemplar_seed, scratchpad)
        self._exemplar_pool: dict[int, list[Problem]] = {}
        self._parts: dict[str, list[Problem]] | None = None

    @property
    def digit_range(self) -> range:
        return range(self.o.min_digits, self.o.max_digits + 1)

    # ------------------------------------------------------------------ problems
    @property
    def compact(self) -> bool:
        return self.o.scratchpad == "compact"

    def make_problem(self, a: int, b: int, pid: str) -> Problem:
        digits = max(len(str(a)), len(str(b)))
        if self.compact:
            question, rationale = f"{a}+{b}", compact_scratchpad(a, b)
        else:
            question, rationale = f"{spaced(a)} + {spaced(b)}", scratchpad(a, b)
        return Problem(id=pid, question=question, answer=str(a + b), type="number",
                       rationale=rationale, meta={"digits": digits, "a": a, "b": b})

    @staticmethod
    def _draw(rng: random.Random, digits: int, n: int, exclude: set[tuple[int, int]]) -> list[tuple[int, int]]:
        """Up to n distinct pairs not in ``exclude``, uniformly (sampling indices without replacement)."""
        picked = (pair_at(digits, i) for i in sample_indices(rng, pair_space(digits), n + len(exclude)))
        return [pair for pair in picked if pair not in exclude][:n]

    def _quota(self, digits: int) -> tuple[int, int, int]:
        """(test, dev, pool) sizes for one digit count, shrunk to fit a small pair space."""
        pool = self.o.pool_size // len(self.digit_range) + (1 if digits - self.o.min_digits < self.o.pool_size % len(self.digit_range) else 0)
        test, dev = self.o.n_test_per_digit, self.o.n_dev_per_digit
        free = pair_space(digits) - len(with_twins({(p.meta["a"], p.meta["b"]) for p in self._exemplars_for(digits)}))
        if test + dev + pool > free:
            test, dev = min(test, int(free * 0.4)), min(dev, int(free * 0.1))
            pool = min(pool, free - test - dev)
        return test, dev, pool

    def _split_parts(self) -> dict[str, list[Problem]]:
        """test / dev / pool per digit count, disjoint from each other and from the exemplars (fixed by split_seed)."""
        if self._parts is not None:
            return self._parts
        parts: dict[str, list[Problem]] = {"test": [], "dev": [], "pool": []}
        for d in self.digit_range:
            held = with_twins({(p.meta["a"], p.meta["b"]) for p in self._exemplars_for(d)})
            n_test, n_dev, n_pool = self._quota(d)
            # test and dev first (their own seed: the same sets whatever the pool size), then the pool
            # without them and without their commuted twins
            rng = random.Random(f"arithmetic-split-{self.o.split_seed}-{d}")
            held_out = self._draw(rng, d, n_test + n_dev, held)
            test = held_out[:n_test]
            held |= with_twins(set(test))
            # dev holds no commuted twin of a test problem (nor of another dev problem): such a draw is replaced
            dev: list[tuple[int, int]] = []
            candidates = held_out[n_test:]
            while candidates:
                for pair in candidates:
                    if pair not in held:
                        dev.append(pair)
                        held |= with_twins({pair})
                # a small pair space (1 digit) may have no more to draw
                candidates = self._draw(rng, d, n_dev - len(dev), held) if len(dev) < n_dev else []
            pool = self._draw(random.Random(f"arithmetic-pool-{self.o.split_seed}-{d}"), d, n_pool, held)
            for name, pairs in (("test", test), ("dev", dev), ("pool", pool)):
                parts[name] += [self.make_problem(a, b, f"arith-{name}-{d}d-{j}") for j, (a, b) in enumerate(pairs)]
        self._parts = parts
        return parts

    def pool(self, digits: int) -> list[Problem]:
        """The training pool's ``digits``-digit problems (never a test, dev or exemplar problem, nor its twin)."""
        return [p for p in self._split_parts()["pool"] if p.meta["digits"] == digits]

    def split_sizes(self) -> dict[str, dict[int, int]]:
        """Problems per split and digit count (after shrinking small digit counts)."""
        return {name: {d: sum(p.meta["digits"] == d for p in probs) for d in self.digit_range}
                for name, probs in self._split_parts().items()}

    def _stratified(self, rng: random.Random, n: int) -> list[Problem]:
        """n pool problems spread evenly over digit counts; what a small digit count lacks goes to the others."""
        by_digit = {d: [p for p in self._split_parts()["pool"] if p.meta["digits"] == d] for d in self.digit_range}
        order = sorted(self.digit_range, key=lambda d: (len(by_digit[d]), d))  # the smallest pools first
        out: list[Problem] = []
        remaining = n
        for k, d in enumerate(order):
            want = remaining // (len(order) - k) + (1 if remaining % (len(order) - k) else 0)
            take = rng.sample(by_digit[d], min(want, len(by_digit[d])))
            out += take
            remaining -= len(take)
        return sorted(out, key=lambda p: (p.meta["digits"], p.id))

    def load(self, split: str, seed: int) -> list[Problem]:
        """``test`` and ``dev`` (fixed by split_seed); ``train``: the fixed training set (n_train, seeded by ``seed``)."""
        if split in ("test", "dev"):
            return list(self._split_parts()[split])
        if split == "train":
            return self._stratified(random.Random(f"arithmetic-train-{seed}"), self.o.n_train)
        raise ConfigError(f"arithmetic has splits 'train', 'dev' and 'test', not {split!r}")

    def train_problems(self, iteration: int, seed: int) -> list[Problem]:
        """Iteration ``iteration``'s training problems: a fresh pool sample, or the fixed training set."""
        if self.o.per_iteration is None:
            return self.load("train", seed)
        return self._stratified(random.Random(f"arithmetic-sample-{seed}-{iteration}"), self.o.per_iteration)

    def _exemplars_for(self, digits: int, k: int = 10) -> list[Problem]:
        pool = self._exemplar_pool.get(digits)
        if pool is None or len(pool) < k:
            rng = random.Random(f"arithmetic-exemplars-{self.o.exemplar_seed}-{digits}")
            pairs = self._draw(rng, digits, max(k, 10), set())
            pool = [self.make_problem(a, b, f"arith-exemplar-{digits}d-{j}") for j, (a, b) in enumerate(pairs)]
            self._exemplar_pool[digits] = pool
        return pool[:k]

    def exemplars(self, k: int) -> list[Problem]:
        """k exemplars per digit count (the paper: 10 per digit, each prompt uses its own digit count's)."""
        return [p for d in self.digit_range for p in self._exemplars_for(d, k)] if k > 0 else []

    # ------------------------------------------------------------------ text
    def hint(self, problem: Problem) -> str:
        return problem.answer if self.compact else spaced(problem.answer)

    def _block(self, p: Problem, *, hint: bool, direct: bool) -> str:
        target = f"Target: {self.hint(p)}" if hint else "Target:"
        return f"Input:\n{p.question}\n{target}\n"

    def prompt(self, problem: Problem, exemplars: list[Problem], *, hint: bool = False, direct: bool = False) -> str:
        d = problem.meta.get("digits")
        same = [e for e in exemplars if e.meta.get("digits") == d] or exemplars
        shots = "".join(self._block(e, hint=hint, direct=direct) + self.completion(e, None if direct else e.rationale) + "\n\n"
                        for e in same)
        return shots + self._block(problem, hint=hint, direct=direct)

    def completion(self, problem: Problem, rationale: str | None) -> str:
        if rationale is None:
            return self.hint(problem)
        return f"{rationale.strip()}\n{self.hint(problem)}"

    def predicted_answer(self, problem: Problem, text: str, *, direct: bool = False) -> str | None:
        """Strict: the first line after ``</scratch>`` must be the spaced digits (direct: the first line)."""
        if direct:
            tail = text
        else:
            if _SCRATCH_END not in text:
                return None
            tail = text.split(_SCRATCH_END, 1)[1]
        for line in tail.strip().splitlines()[:1]:
            m = (_COMPACT_ANSWER if self.compact else _DIGITS_LINE).match(line)
            if m:
                return str(int(m.group(1).replace(" ", "")))
        return None

    def is_correct(self, problem: Problem, text: str, *, direct: bool = False) -> bool:
        pred = self.predicted_answer(problem, text, direct=direct)
        return pred is not None and int(pred) == int(problem.answer)

    def max_new_tokens(self, problem: Problem, *, direct: bool = False) -> int:
        n = int(problem.meta.get("digits", self.o.max_digits))
        if self.compact:  # n + 1 digits; <scratch>, n lines of at most 9 characters, </scratch>, the answer
            return n + 4 if direct else 10 * n + n + 30
        return 2 * n + 4 if direct else (2 * n + 6) * (n + 3) + 2 * n + 10

    def groups(self, problem: Problem) -> str | None:
        return f"{problem.meta['digits']}-digit"

    def verify(self, problem: Problem, text: str, *, rationalized: bool = False) -> str | None:
        """Every scratchpad line recomputed (:func:`thoughtsource.star.verify.verify_scratchpad`, or
        :func:`~thoughtsource.star.verify.verify_compact_scratchpad` for the compact format)."""
        check = verify_compact_scratchpad if self.compact else verify_scratchpad
        return check(text, int(problem.meta["a"]), int(problem.meta["b"]))
