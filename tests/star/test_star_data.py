"""The paper's data design for arithmetic: a seeded pool, a fresh sample per iteration, fixed test and dev sets."""

from __future__ import annotations

import pytest

from thoughtsource.errors import ConfigError
from thoughtsource.star.tasks.arithmetic import ArithmeticTask, pair_at, pair_space


def _pairs(problems) -> set[tuple[int, int]]:
    return {(p.meta["a"], p.meta["b"]) for p in problems}


@pytest.mark.parametrize("digits", [1, 2, 3, 5])
def test_pair_index_covers_the_space(digits: int) -> None:
    space = pair_space(digits)
    lo = 0 if digits == 1 else 10 ** (digits - 1)
    for i in (0, 1, space // 2, space - 1):
        a, b = pair_at(digits, i)
        assert lo <= a < 10**digits and lo <= b < 10**digits
    if digits <= 2:
        assert len({pair_at(digits, i) for i in range(space)}) == space


def test_default_pool_is_50000_uniform_and_disjoint_from_test_dev_exemplars() -> None:
    t = ArithmeticTask(1, 5, per_iteration=10_000)
    sizes = t.split_sizes()
    # 1 digit: only 100 pairs exist, and twins of exemplars, test and dev problems are kept out of the rest (and of
    # each other: a dev draw that is a test problem's twin is replaced, which leaves 13 one-digit pairs, not 21)
    assert sizes["test"] == {1: 32, 2: 100, 3: 100, 4: 100, 5: 100}
    assert sizes["dev"] == {1: 8, 2: 50, 3: 50, 4: 50, 5: 50}
    assert sizes["pool"][3] == sizes["pool"][4] == sizes["pool"][5] == 10_000
    assert sizes["pool"][1] == 13 and 8100 - 2 * (10 + 100 + 50) <= sizes["pool"][2] < 8100 - 10 - 100 - 50
    test, dev, pool = t.load("test", 0), t.load("dev", 0), t._split_parts()["pool"]
    ex = _pairs(t.exemplars(10))
    assert not _pairs(test) & _pairs(dev) and not _pairs(test) & _pairs(pool) and not _pairs(dev) & _pairs(pool)
    assert not ex & (_pairs(test) | _pairs(dev) | _pairs(pool))
    assert len(_pairs(pool)) == len(pool)  # no problem twice in the pool


def test_fresh_sample_each_iteration_never_test_or_dev() -> None:
    t = ArithmeticTask(1, 3, per_iteration=600, pool_size=3000)
    held_out = _pairs(t.load("test", 0)) | _pairs(t.load("dev", 0))
    samples = [t.train_problems(n, seed=0) for n in (1, 2, 3)]
    for s in samples:
        assert len(s) == 600 and not _pairs(s) & held_out
        assert len({p.id for p in s}) == len(s)
        # one digit gives what it has (13 pairs); the rest is spread over 2 and 3 digits
        assert {d: sum(p.meta["digits"] == d for p in s) for d in (1, 2, 3)} == {1: 13, 2: 294, 3: 293}
    assert _pairs(samples[0]) != _pairs(samples[1]) != _pairs(samples[2])
    assert len(_pairs(samples[0]) & _pairs(samples[1])) < 300  # mostly fresh problems
    assert [p.id for p in t.train_problems(2, 0)] == [p.id for p in samples[1]]  # resume draws the same sample
    assert [p.id for p in t.train_problems(2, 1)] != [p.id for p in samples[1]]  # another seed, another sample


def test_test_and_dev_fixed_across_run_seeds_fixed_train_set_not() -> None:
    t = ArithmeticTask(2, 3, n_train=40)
    assert [p.id for p in t.load("test", 0)] == [p.id for p in t.load("test", 7)]
    assert _pairs(t.load("train", 0)) != _pairs(t.load("train", 7))
    assert t.train_problems(1, 0) == t.train_problems(5, 0) == t.load("train", 0)  # today's fixed set: every iteration
    assert _pairs(ArithmeticTask(2, 3, split_seed=1).load("test", 0)) != _pairs(t.load("test", 0))


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ConfigError):
        ArithmeticTask(1, 2, per_iteration=0)
    with pytest.raises(ConfigError):
        ArithmeticTask(1, 2, n_dev_per_digit=-1)
    with pytest.raises(ConfigError, match="'train', 'dev' and 'test'"):
        ArithmeticTask(1, 2).load("validation", 0)


def _twins(problems) -> set[tuple[int, int]]:
    return {(b, a) for a, b in _pairs(problems)}


@pytest.mark.parametrize("scratchpad", ["paper", "compact"])
def test_no_commuted_twin_of_a_test_dev_or_exemplar_problem_is_trained_on(scratchpad: str) -> None:
    """a + b in test or dev: b + a is in no training pool (before: 18 of 36 one-digit test problems had theirs)."""
    t = ArithmeticTask(1, 3, per_iteration=600, pool_size=3000, scratchpad=scratchpad)
    held = _pairs(t.load("test", 0)) | _pairs(t.load("dev", 0)) | _pairs(t.exemplars(10))
    pool = _pairs(t._split_parts()["pool"])
    assert not pool & {(b, a) for a, b in held}
    for n in (1, 2, 3):
        assert not _twins(t.train_problems(n, seed=0)) & held
    # the sets are as large as asked where the space allows
    assert t.split_sizes()["test"][3] == 100 and t.split_sizes()["dev"][3] == 50


def test_test_and_dev_do_not_depend_on_the_pool_size() -> None:
    """A base model's data and the STaR runs' data come from tasks with the same test/dev whatever the pool."""
    a, b = ArithmeticTask(1, 4, pool_size=1000), ArithmeticTask(1, 4, pool_size=40_000)
    assert _pairs(a.load("test", 0)) == _pairs(b.load("test", 0)) and _pairs(a.load("dev", 0)) == _pairs(b.load("dev", 0))


@pytest.mark.parametrize("digits", [10, 15, 20, 30])
def test_any_digit_count(digits: int) -> None:
    """10 digits and more raised OverflowError (random.sample over a range longer than sys.maxsize)."""
    t = ArithmeticTask(digits, digits, n_test_per_digit=200, n_dev_per_digit=50, pool_size=500, scratchpad="compact")
    test, dev, pool = t.load("test", 0), t.load("dev", 0), t._split_parts()["pool"]
    assert (len(test), len(dev), len(pool)) == (200, 50, 500)
    assert not _pairs(test) & _pairs(dev) and not (_pairs(test) | _pairs(dev)) & _pairs(pool)
    for p in test[:20]:
        a, b = p.meta["a"], p.meta["b"]
        assert len(str(a)) == len(str(b)) == digits and int(p.answer) == a + b
        assert t.is_correct(p, t.completion(p, p.rationale))
        assert t.verify(p, t.completion(p, p.rationale)) is None
    assert [p.id for p in t.load("test", 0)] == [p.id for p in ArithmeticTask(digits, digits, n_test_per_digit=200,
                                                                               n_dev_per_digit=50, pool_size=500).load("test", 0)]


def test_compact_scratchpad_format() -> None:
    t = ArithmeticTask(3, 3, scratchpad="compact")
    p = t.make_problem(624, 259, "x")
    assert p.question == "624+259" and p.rationale == "<scratch>\n4+9+0=13\n2+5+1=8\n6+2+0=8\n</scratch>"
    assert t.prompt(p, []) == "Input:\n624+259\nTarget:\n"  # zero-shot (fewshot_k: 0)
    assert t.prompt(p, [], hint=True) == "Input:\n624+259\nTarget: 883\n"
    assert t.completion(p, p.rationale).endswith("</scratch>\n883") and t.completion(p, None) == "883"
    assert t.predicted_answer(p, t.completion(p, p.rationale)) == "883"
    assert t.predicted_answer(p, "<scratch>\n</scratch>\n8 8 3") is None  # the paper's spaced answer is not this format's
    assert t.is_correct(p, "883", direct=True)
    q = t.make_problem(999, 999, "y")
    assert q.rationale.splitlines()[1:4] == ["9+9+0=18", "9+9+1=19", "9+9+1=19"] and t.completion(q, None) == "1998"
    long = ArithmeticTask(20, 20, scratchpad="compact").load("test", 0)[0]
    assert len(t.completion(long, long.rationale)) < t.max_new_tokens(long)  # fits the generation budget
    assert len(ArithmeticTask(20, 20).completion(long, None)) > 0
    with pytest.raises(ConfigError, match="scratchpad"):
        ArithmeticTask(1, 2, scratchpad="verbose")


@pytest.mark.parametrize(("lo", "hi", "n_test", "n_dev"), [(1, 4, 200, 50), (1, 8, 200, 50), (1, 5, 100, 50)])
def test_test_and_dev_hold_no_commuted_twins_of_each_other(lo: int, hi: int, n_test: int, n_dev: int) -> None:
    """The bootstrap's test and dev held 5 commuted pairs (a + b in test, b + a in dev); a dev-chosen iteration then
    saw a test problem's twin.  The test set itself is what it was (the same draw): only such dev problems moved."""
    t = ArithmeticTask(lo, hi, n_test_per_digit=n_test, n_dev_per_digit=n_dev, pool_size=4000, scratchpad="compact")
    test, dev = _pairs(t.load("test", 0)), _pairs(t.load("dev", 0))
    assert not _twins(t.load("dev", 0)) & test and not test & dev
    dev_pairs = [(p.meta["a"], p.meta["b"]) for p in t.load("dev", 0)]
    assert not {(b, a) for a, b in dev_pairs if a != b} & set(dev_pairs)  # nor twins inside dev
    sizes = t.split_sizes()
    assert all(sizes["test"][d] == n_test and sizes["dev"][d] == n_dev for d in range(max(lo, 2), hi + 1))
