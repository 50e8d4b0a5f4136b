"""The evaluation plots render real data into readable PNGs."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg

from thoughtsource.collection import Collection
from thoughtsource.datasets.cot_logs import log_to_samples, read_kojima_log_file
from thoughtsource.evaluate import evaluate_frame
from thoughtsource.reporting.plots import plot_accuracy, plot_trigger_heatmap


def test_plots_from_kojima_logs(shared_data: Path, tmp_path: Path) -> None:
    data = {}
    for name in ("aqua", "coin_flip", "singleeq"):
        samples = {}
        for method in ("zero_shot", "zero_shot_cot"):
            for s in log_to_samples(read_kojima_log_file(shared_data / "kojima_logs" / f"{name}_{method}.log")):
                if s.id in samples:
                    samples[s.id].generated_cot.extend(s.generated_cot)
                else:
                    samples[s.id] = s
        data[name] = {"test": list(samples.values())}
    r = evaluate_frame(Collection(data=data))
    assert len(r.accuracy) == 3 * 2 * 2  # datasets x (zero-shot, zero-shot-CoT) x modes
    a = plot_accuracy(r.accuracy, tmp_path / "acc.png")
    h = plot_trigger_heatmap(r.accuracy, tmp_path / "heat.png", mode="flexible")
    for p, min_h in ((a, 400), (h, 300)):
        img = mpimg.imread(p)
        assert img.shape[0] >= min_h and img.shape[1] >= 600, img.shape
        assert img.std() > 0.05  # not blank
    empty = r.accuracy.iloc[0:0]
    assert plot_accuracy(empty, tmp_path / "empty.png").exists()


def test_accuracy_plot_of_all_wrong_and_all_right_cells(tmp_path: Path) -> None:
    """0 of n and n of n (n = 3 and 1319 failed before): the plot is written, its error bars are not negative."""
    from thoughtsource.schema import Answer, GeneratedCot, Sample

    samples = []
    for i in range(3):
        cots = [GeneratedCot(id=f"c{i}{t}", cot_trigger=t, cot="...", model="m",
                             answers=[Answer(id=f"a{i}{t}", answer=" 7." if t == "right" else " 8.")]) for t in ("right", "wrong")]
        samples.append(Sample(id=f"q{i}", question="?", type="number", answer=["7"], generated_cot=cots))
    r = evaluate_frame(Collection(data={"toy": {"test": samples}}))
    strict = r.accuracy[r.accuracy["mode"] == "strict"].set_index("cot_trigger")
    assert strict.loc["wrong", "accuracy"] == 0.0 and strict.loc["right", "accuracy"] == 1.0
    assert (strict["ci_low"] <= strict["accuracy"]).all() and (strict["accuracy"] <= strict["ci_high"]).all()
    assert plot_accuracy(r.accuracy, tmp_path / "acc.png").read_bytes()[:4] == b"\x89PNG"
    big = r.accuracy.iloc[0:2].copy()
    from thoughtsource.statistics import wilson_intervals

    big["n"], big["correct"] = [1319, 1319], [0, 1319]
    big["accuracy"], big["ci_low"], big["ci_high"] = wilson_intervals(big["correct"], big["n"])
    assert plot_accuracy(big, tmp_path / "big.png").exists()


def test_plot_or_warn_turns_a_failure_into_a_warning(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    from thoughtsource.reporting.plots import plot_or_warn

    (tmp_path / "acc.png").mkdir()  # a folder where the PNG goes: the plot cannot be written
    empty = evaluate_frame(Collection(data={"toy": {"test": []}})).accuracy
    with caplog.at_level("WARNING", logger="thoughtsource"):
        assert plot_or_warn(plot_accuracy, empty, tmp_path / "acc.png") is None
    assert "plot acc.png not written" in caplog.text


def test_trigger_heatmap_is_drawn_per_model(examples_dir: Path, tmp_path: Path) -> None:
    from thoughtsource.reporting.plots import heatmap_cells

    runs = examples_dir / "model_runs"
    both = Collection.load(runs / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json").merge(
        Collection.load(runs / "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"))
    r = evaluate_frame(both)
    cells = heatmap_cells(r.accuracy)
    assert sorted(cells) == ["gpt-3.5-turbo", "gpt-4"]
    assert list(cells["gpt-4"].index) == ["zhou-01"]  # gpt-3.5-turbo's zhou-01 CoTs are not mixed in
    assert cells["gpt-4"].loc["zhou-01", ("n", "med_qa")] == 100
    assert cells["gpt-4"].loc["zhou-01", ("accuracy", "med_qa")] == 0.76
    assert cells["gpt-3.5-turbo"].loc["zhou-01", ("n", "med_qa")] == 67
    png = plot_trigger_heatmap(r.accuracy, tmp_path / "heat.png")
    one = plot_trigger_heatmap(evaluate_frame(Collection.load(runs / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json")).accuracy,
                               tmp_path / "one.png")
    assert mpimg.imread(png).shape[1] > 1.5 * mpimg.imread(one).shape[1]  # two panels side by side


def test_plot_labels_name_their_fields() -> None:
    from thoughtsource.reporting.plots import row_label

    assert row_label({"model": "m", "cot_trigger": None}, ["model", "cot_trigger"]) == "model: m · trigger: none"
    assert row_label({"cot_trigger": "None"}, ["cot_trigger"]) == "trigger: none"
    assert row_label({}, []) == "all"
