"""thoughtsource.evaluate on real files: ThoughtSource model runs and the Kojima et al. logs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from thoughtsource.collection import Collection
from thoughtsource.datasets.cot_logs import read_kojima_log_file, rescore_log, to_generated_cot
from thoughtsource.evaluate import evaluate, evaluate_frame, majority_vote, write_tables
from thoughtsource.schema import Answer, GeneratedCot, Sample, model_name
from thoughtsource.statistics import wilson_interval, wilson_intervals


def test_majority_vote_and_documented_tie_breaking() -> None:
    assert majority_vote([3, 3, 4, 4, 3]) == 3
    assert majority_vote([3.0, 3.0, 4.0, 4.0, 3.0], "number") == 3.0
    assert majority_vote([4, 3, 3, 4]) == 4  # tie: the value seen first wins
    assert majority_vote([3, 4, 4, 3]) == 3
    assert majority_vote([None, None, 5, None]) == 5  # no-answers do not vote
    assert majority_vote([None, None]) is None
    assert majority_vote([]) is None
    assert majority_vote([2.0000000001, 2.0, 7.0], "number") == 2.0000000001  # values within 1e-6 vote together
    assert majority_vote(["B", "C", "C"], "multiplechoice") == "C"
    assert majority_vote(["The Paris", "paris", "London"], "text") == "The Paris"


def test_wilson_interval_against_a_hand_computed_value() -> None:
    # 8 of 10, z = 1.959964, z² = 3.841459: centre = (0.8 + z²/20) / (1 + z²/10) = 0.992073 / 1.384146 = 0.716740,
    # half = z * sqrt(0.8*0.2/10 + z²/400) / (1 + z²/10) = 1.959964 * 0.160011 / 1.384146 = 0.226578
    # -> [0.490162, 0.943318] (the textbook value for 8/10 is [0.4902, 0.9433]).
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.490162, abs=2e-6)
    assert hi == pytest.approx(0.943318, abs=2e-6)
    assert wilson_interval(0, 10)[0] == 0.0
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


def test_wilson_interval_contains_the_estimate_at_0_and_n_for_every_n_up_to_2000() -> None:
    # The old code returned a lower bound of 5.55e-17 for 0 of 3 (and an upper bound below 1 for n of n at 151
    # sizes up to 500, e.g. 1319), so the accuracy plot's error bars were negative and matplotlib raised.
    import numpy as np

    for n in range(1, 2001):
        for k in (0, n):
            lo, hi = wilson_interval(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n, lo, hi)
        assert wilson_interval(0, n)[0] == 0.0 and wilson_interval(n, n)[1] == 1.0
    ns = np.arange(1, 2001)
    for ks in (np.zeros_like(ns), ns):
        p, lo, hi = wilson_intervals(ks, ns)
        assert ((lo >= 0.0) & (lo <= p) & (p <= hi) & (hi <= 1.0)).all()
        assert np.allclose(lo, [wilson_interval(int(k), int(n))[0] for k, n in zip(ks, ns, strict=True)])


def test_model_name() -> None:
    assert model_name("{'name': 'gpt-4', 'temperature': 0, 'max_tokens': 512}") == "gpt-4"
    assert model_name("text-davinci-002") == "text-davinci-002"
    assert model_name({"name": "x"}) == "x"
    assert model_name(None) == "None"


def _sc_collection() -> Collection:
    """One number question sampled 5 times ([3, 3, 4, 4, 3]) and one sampled 4 times with a tie."""

    def cot(i: int, text: str) -> GeneratedCot:
        return GeneratedCot(
            id=f"c{i}",
            cot_trigger="kojima-01",
            cot="...",
            model="m",
            answers=[Answer(id=f"a{i}", answer_extraction="kojima-numerals", answer=text)],
        )

    q1 = Sample(
        id="q1",
        question="?",
        type="number",
        answer=["3"],
        generated_cot=[cot(i, f" {v}.") for i, v in enumerate([3, 3, 4, 4, 3])],
    )
    q2 = Sample(
        id="q2",
        question="?",
        type="number",
        answer=["3"],
        generated_cot=[cot(10 + i, f" {v}.") for i, v in enumerate([4, 3, 3, 4])],
    )
    return Collection(data={"toy": {"test": [q1, q2]}})


def test_self_consistency_table() -> None:
    r = evaluate_frame(_sc_collection(), ks=[1, 3, 4, 5])
    strict = r.majority[r.majority["mode"] == "strict"].set_index("k")
    # maj@1: q1 -> 3 (right), q2 -> 4 (wrong); maj@4: q1 [3,3,4,4] tie -> 3 (right), q2 [4,3,3,4] tie -> 4 (wrong)
    assert strict.loc[1, ["n", "correct"]].tolist() == [2, 1]
    assert strict.loc[3, ["n", "correct"]].tolist() == [2, 2]  # q1 [3,3,4] -> 3, q2 [4,3,3] -> 3
    assert strict.loc[4, ["n", "correct"]].tolist() == [2, 1]
    assert strict.loc[5, ["n", "correct"]].tolist() == [1, 1]  # only q1 has 5 samples
    acc = r.accuracy[r.accuracy["mode"] == "strict"].iloc[0]
    assert (acc["n"], acc["correct"]) == (9, 5)
    assert r.to_dict("strict") == {"accuracy": {"None_kojima-01_kojima-numerals": pytest.approx(5 / 9)}}


def test_self_consistency_samples_are_scored_per_question_not_as_independent_items() -> None:
    """9 samples of 2 questions are 2 independent observations, not 9: mean over each question's samples, then over
    questions, with an interval over the 2 questions (the old code gave Wilson(5, 9) = 26.7–81.1 %)."""
    import numpy as np

    r = evaluate_frame(_sc_collection(), ks=[1])
    acc = r.accuracy[r.accuracy["mode"] == "strict"].iloc[0]
    assert (acc["n"], acc["questions"]) == (9, 2)
    assert acc["accuracy"] == pytest.approx((3 / 5 + 2 / 4) / 2)  # q1: 3 of 5 samples right, q2: 2 of 4
    lo, hi = wilson_interval(0.55 * 2, 2)
    assert (acc["ci_low"], acc["ci_high"]) == (pytest.approx(lo), pytest.approx(hi))
    assert acc["ci_high"] - acc["ci_low"] > 0.8  # two questions tell little
    assert acc["stderr"] == pytest.approx(np.std([3 / 5, 2 / 4], ddof=1) / np.sqrt(2))
    # one answer per question: the binomial proportion and its Wilson interval, as before
    one = _sc_collection()
    for _, _, x in one.samples():
        x.generated_cot = x.generated_cot[:1]
    single = evaluate_frame(one).accuracy.iloc[0]
    assert (single["n"], single["questions"], single["correct"]) == (2, 2, 1)
    assert (single["ci_low"], single["ci_high"]) == wilson_interval(1, 2)


@pytest.fixture(scope="module")
def kojima_gsm8k(shared_data: Path) -> Collection:
    path = shared_data / "kojima_logs" / "gsm8k_zero_shot_cot.log"
    if not path.exists():
        pytest.skip(f"{path} not present")
    log = read_kojima_log_file(path)
    samples = [
        Sample(
            id=str(r.index),
            question=r.question,
            type="number",
            answer=[r.gold.replace(",", "")],
            generated_cot=[to_generated_cot(r)],
        )
        for r in log.records
    ]
    return Collection(data={"gsm8k": {"test": samples}})


def test_number_answers_are_scored_not_counted_wrong(kojima_gsm8k: Collection, shared_data: Path) -> None:
    result = kojima_gsm8k.evaluate()
    log = read_kojima_log_file(shared_data / "kojima_logs" / "gsm8k_zero_shot_cot.log")
    expected = rescore_log(log, "strict").our_accuracy / 100
    assert result == {"accuracy": {"None_kojima-01_kojima-numerals": pytest.approx(expected)}}
    assert 0.40 < expected < 0.45  # the published ThoughtSource evaluation scored every number answer 0
    flags = [a.correct_answer for _, _, s in kojima_gsm8k.samples() for _, a in s.iter_answers()]
    assert None not in flags and sum(flags) == round(expected * len(flags))


def test_evaluate_frame_columns_and_tables(kojima_gsm8k: Collection, tmp_path: Path) -> None:
    r = evaluate_frame(kojima_gsm8k)
    assert len(r.answers) == 2 * 1319
    acc = r.accuracy.set_index("mode")
    assert set(acc.index) == {"strict", "flexible"}
    row = acc.loc["strict"]
    assert row["n"] == 1319 and row["model"] == "text-davinci-002" and row["dataset"] == "gsm8k"
    assert row["ci_low"] < row["accuracy"] < row["ci_high"]
    assert r.majority.empty  # one sample per prompt: no self-consistency table
    written = write_tables(r, tmp_path)
    assert {p.name for p in written} == {"accuracy.csv", "accuracy.md", "answers.csv"}
    md = (tmp_path / "accuracy.md").read_text()
    assert "| gsm8k" in md and "text-davinci-002" in md


MODEL_RUNS = {
    # file: (answers, answers whose stored correct_answer we overturn, why)
    "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json": (600, 0),
    "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json": (1206, 3),
    "thoughtsource_67_huggingface_endpoint_flan-T5-xxl_None_None-kojima-01-zhou-01.json": (1206, 7),
    "thoughtsource_167_cohere_command-xlarge-nightly_None_None.json": (1002, 62),
}


@pytest.mark.parametrize("name", sorted(MODEL_RUNS))
def test_rescoring_model_runs_matches_their_stored_correct_answer(examples_dir: Path, name: str) -> None:
    """GPT-4, GPT-3.5, Flan-T5 and Cohere runs: we agree with the stored verdicts except documented cases."""
    path = examples_dir / "model_runs" / name
    c = Collection.load(path)
    r = evaluate_frame(c, modes=("strict",))
    a = r.answers
    n, overturned = MODEL_RUNS[name]
    assert len(a) == n
    stored = a["stored_correct"].astype(bool)
    dis = a[a["correct"] != stored]
    assert len(dis) == overturned
    # Each overturned verdict is one the published evaluator got wrong (docs/evaluation.md):
    #  - bool answers given as the letter of the stored choices ["True", "False"] ("A.", "B).") were never mapped;
    #  - 'B) Amoxicillin-clavulanate.' was matched to choice A 'Amoxicillin' (a substring of the answer).
    assert dis["correct"].all()
    assert set(dis["rule"]) <= {"bool:letter", "mc:letter"}
    mc = dis[dis["rule"] == "mc:letter"]
    assert (mc["pred"] == "B").all() and len(mc) in (0, 3)


def test_annotated_files_all_stay_incorrect(examples_dir: Path) -> None:
    # The annotated sets were selected as wrong answers; our scorer agrees on every one.
    for path in sorted((examples_dir / "annotated").glob("*.json")):
        r = evaluate_frame(Collection.load(path), modes=("strict",))
        assert len(r.answers) > 0
        assert not r.answers["correct"].any(), path.name
        assert (r.answers["stored_correct"] == False).all()  # noqa: E712


def test_overwrite_false_keeps_stored_values(examples_dir: Path) -> None:
    c = Collection.load(examples_dir / "model_runs" / "thoughtsource_167_cohere_command-xlarge-nightly_None_None.json")
    evaluate(c, overwrite=False)
    kept = [a.correct_answer for _, _, s in c.samples() for _, a in s.iter_answers()]
    evaluate(c)  # overwrite
    new = [a.correct_answer for _, _, s in c.samples() for _, a in s.iter_answers()]
    assert sum(k != m for k, m in zip(kept, new, strict=True)) == 62


def test_accuracies_are_never_pooled_across_models(examples_dir: Path) -> None:
    """gpt-4 and gpt-3.5-turbo share the prompt None_zhou-01_kojima-A-D: each model keeps its own accuracy."""
    runs = examples_dir / "model_runs"
    gpt4 = Collection.load(runs / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json")
    gpt35 = Collection.load(runs / "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json")
    alone = {"gpt-4": gpt4.evaluate()["accuracy"], "gpt-3.5-turbo": gpt35.evaluate()["accuracy"]}
    assert alone["gpt-4"]["None_zhou-01_kojima-A-D"] == 0.88  # one model: the paper's flat form
    both = Collection.load(runs / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json").merge(
        Collection.load(runs / "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"))
    result = both.evaluate()
    assert result == {"accuracy": alone}
    r = evaluate_frame(both)
    assert r.to_dict(by_model=True) == {"accuracy": alone}
    assert evaluate_frame(gpt4).to_dict(by_model=True) == {"accuracy": {"gpt-4": alone["gpt-4"]}}
    with pytest.raises(ValueError, match="2 models"):
        r.to_dict(by_model=False)


def _reasoning_collection():
    """Model r1 reasons (token counts recorded): 8 finished CoTs of 10..80 reasoning tokens, the short half right and
    the long half wrong, and 2 cut off mid-thought at 500 tokens; model plain writes 3 CoTs of 3, 5 and 7 words."""
    from thoughtsource.collection import Collection
    from thoughtsource.reasoning import CONTENT_EXTRACTION
    from thoughtsource.schema import Answer, GeneratedCot, Sample

    def r1(i: int, tokens: int, answer: str, truncated: bool = False) -> GeneratedCot:
        return GeneratedCot(id=f"r{i}", cot="think " * (tokens // 2), model={"name": "r1"},
                            answers=[Answer(id=f"r{i}a", answer_extraction=CONTENT_EXTRACTION, answer=answer)],
                            reasoning={"source": "reasoning_content", "reasoning_tokens": tokens, "answer_tokens": 4,
                                       "truncated": truncated})

    cots = [r1(i, 10 * (i + 1), "The answer is 7." if i < 4 else "The answer is 8.") for i in range(8)]
    cots += [r1(8, 500, "", True), r1(9, 500, "", True)]
    cots += [GeneratedCot(id=f"p{n}", cot=" ".join(["so"] * n), model={"name": "plain"},
                          answers=[Answer(id=f"p{n}a", answer_extraction="kojima-numerals", answer="7")]) for n in (3, 5, 7)]
    sample = Sample(id="q", question="3 + 4?", type="number", answer=["7"], generated_cot=cots)
    return Collection(data={"toy": {"test": [sample]}})


def test_reasoning_length_distribution_truncation_rate_and_accuracy_by_length() -> None:
    result = evaluate_frame(_reasoning_collection())
    assert result.has_reasoning
    r = {row["model"]: row for row in result.reasoning.to_dict("records")}
    assert (r["r1"]["unit"], r["r1"]["cots"], r["r1"]["reasoning_cots"], r["r1"]["truncated"]) == ("tokens", 10, 10, 2)
    assert (r["r1"]["mean"], r["r1"]["median"], r["r1"]["max"], r["r1"]["truncation_rate"]) == (136.0, 55.0, 500.0, 0.2)
    assert r["r1"]["trunc_ci_low"] < 0.2 < r["r1"]["trunc_ci_high"]
    assert (r["plain"]["unit"], r["plain"]["median"], r["plain"]["truncation_rate"]) == ("words", 5.0, 0.0)
    b = result.by_length[(result.by_length["mode"] == "strict") & (result.by_length["model"] == "r1")]
    assert b["bin"].tolist() == [1, 2, 3, 4] and b["n"].tolist() == [2, 2, 2, 2]  # the truncated CoTs are not scored
    assert b["accuracy"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert b[["length_low", "length_high"]].values.tolist() == [[10, 20], [30, 40], [50, 60], [70, 80]]
    plain = result.by_length[(result.by_length["mode"] == "strict") & (result.by_length["model"] == "plain")]
    assert plain["unit"].unique().tolist() == ["words"] and plain["n"].sum() == 3 and plain["accuracy"].tolist() == [1.0] * len(plain)


def test_mean_over_datasets_row(examples_dir: Path, tmp_path: Path) -> None:
    """The papers' mean over datasets: per model and prompt, the unweighted mean of the per-dataset accuracies
    (GPT-4, zhou-01, six datasets with three different answer-extraction prompts), in the Markdown table too."""
    from thoughtsource.evaluate import MEAN_OVER_DATASETS, evaluate_frame, mean_over_datasets, write_tables

    c = Collection.load(examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json")
    result = evaluate_frame(c, modes=("strict",))
    acc = result.accuracy
    mean = mean_over_datasets(acc)
    assert len(mean) == 1 and list(mean.columns) == list(acc.columns)
    row = mean.iloc[0]
    assert row["dataset"] == MEAN_OVER_DATASETS and row["answer_extraction"] == "" and row["n"] == 600
    assert row["accuracy"] == pytest.approx(acc["accuracy"].mean()) == pytest.approx(0.82)
    assert math.isnan(row["ci_low"])
    write_tables(result, tmp_path)
    md = (tmp_path / "accuracy.md").read_text(encoding="utf-8")
    assert md.count(MEAN_OVER_DATASETS) == 1 and "| 0.820 " in md
    assert MEAN_OVER_DATASETS not in (tmp_path / "accuracy.csv").read_text(encoding="utf-8")  # the CSV keeps the cells
    # one dataset: no mean
    assert mean_over_datasets(acc[acc["dataset"] == "med_qa"]).empty
