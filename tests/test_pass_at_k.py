"""pass@k (Chen et al. 2021), maj@k over resamples, bootstrap intervals over questions; in evaluate and results.json."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from thoughtsource.cli import app
from thoughtsource.collection import Collection
from thoughtsource.evaluate import evaluate_frame, majority_at_k, majority_vote
from thoughtsource.generation import generate
from thoughtsource.statistics import bootstrap_interval, pass_at_k
from thoughtsource.testing.fault_server import run_fault_server


@pytest.mark.parametrize(("n", "c"), [(5, 0), (5, 1), (5, 3), (6, 6), (7, 2)])
def test_pass_at_k_is_the_chance_that_a_k_subset_holds_a_correct_sample(n: int, c: int):
    flags = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        subsets = list(itertools.combinations(flags, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets), abs=1e-12)
    assert pass_at_k(1000, 10, 1) == pytest.approx(0.01)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_maj_at_k_is_the_mean_over_subsets_not_the_first_k():
    values = [4, 3, 3, 4, 3]
    correct = [v == 3 for v in values]
    # exact expectation over every ordered draw of 3 of the 5 (ties break by draw order)
    draws = list(itertools.permutations(range(5), 3))
    exact = sum(majority_vote([values[i] for i in d]) == 3 for d in draws) / len(draws)
    first_k = float(majority_vote(values[:3]) == 3)
    estimate = majority_at_k(values, correct, 3, "number", 3.0, resamples=4000, rng=np.random.default_rng(1))
    assert first_k == 1.0 and exact == pytest.approx(0.7)
    assert estimate == pytest.approx(exact, abs=0.03)
    assert majority_at_k(values, correct, 1, "number", 3.0) == pytest.approx(0.6)
    assert majority_at_k(values, correct, 5, "number", 3.0) == 1.0


def test_bootstrap_interval_over_questions():
    q = np.array([1, 0, 1, 1, 0, 1, 0, 1, 1, 1], dtype=float)
    low, high = bootstrap_interval(q)
    assert low <= q.mean() <= high and 0 <= low < high <= 1
    wide = bootstrap_interval(q[:4])
    assert wide[1] - wide[0] > high - low
    assert bootstrap_interval(q) == (low, high)  # seeded
    assert all(math.isnan(x) for x in bootstrap_interval([]))


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import SHARED_DATA

    src = SHARED_DATA / "thoughtsource_examples" / "tests_unit_data" / "worldtree_100_dataset.json"
    if not src.is_file():
        pytest.skip(f"{src} not found")
    tmp = tmp_path_factory.mktemp("sampled")
    c = Collection.from_json(src).select(split="train", number_samples=12, seed=4)
    with run_fault_server() as server:
        report = generate(c, backend="openai", model="fault-echo", base_urls=[server.base_url], n=5, temperature=0.8,
                          store=tmp / "s.sqlite", progress=False)
    assert report.errors == 0
    c.dump(tmp / "sampled.json")
    return tmp / "sampled.json"


def test_evaluate_reports_pass_and_maj_at_k_with_intervals(sampled: Path):
    result = evaluate_frame(Collection.load(sampled), ks=[1, 2, 3, 5])
    s = result.sampling
    assert s is not None and set(s["k"]) == {1, 2, 3, 5} and (s["questions"] == 12).all() and (s["samples"] == 5).all()
    strict = s[s["mode"] == "strict"].set_index("k")
    acc = result.accuracy[result.accuracy["mode"] == "strict"].iloc[0]
    assert strict.loc[1, "pass_at_k"] == pytest.approx(acc["accuracy"])  # pass@1 = maj@1 = mean accuracy
    assert strict.loc[1, "maj_at_k"] == pytest.approx(acc["accuracy"])
    assert list(strict["pass_at_k"]) == sorted(strict["pass_at_k"])  # pass@k grows with k
    assert (strict["pass_ci_low"] <= strict["pass_at_k"]).all() and (strict["pass_at_k"] <= strict["pass_ci_high"]).all()
    assert (strict["maj_ci_low"] <= strict["maj_at_k"]).all() and (strict["maj_at_k"] <= strict["maj_ci_high"]).all()
    maj = result.majority[(result.majority["mode"] == "strict") & (result.majority["k"] == 5)].iloc[0]
    assert strict.loc[5, "maj_at_k"] == pytest.approx(maj["accuracy"])  # k = n: one subset, the first-k vote
    again = evaluate_frame(Collection.load(sampled), ks=[1, 2, 3, 5]).sampling
    assert again is not None and again.equals(s)  # every draw is seeded


def test_cli_evaluate_prints_and_writes_pass_at_k(sampled: Path, tmp_path: Path):
    out = tmp_path / "ev"
    r = CliRunner().invoke(app, ["evaluate", str(sampled), "--k", "1,3,5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "pass@k and maj@k over resamples" in r.stdout
    doc = json.loads((out / "results.json").read_text())
    (task,) = [t for t in doc["results"] if "pass@3,none" in doc["results"][t]]
    assert 0 <= doc["results"][task]["maj@3,resampled"] <= doc["results"][task]["pass@3,none"] <= 1
    cells = doc["thoughtsource"]["sampling"]
    assert {c["k"] for c in cells} == {1, 3, 5}
    iv = cells[0]["pass_at_k"]["interval"]
    assert iv["method"] == "bootstrap-over-questions" and iv["low"] <= cells[0]["pass_at_k"]["value"] <= iv["high"]
    assert (out / "sampling.csv").is_file() and (out / "sampling.md").is_file()
