"""The evaluation plots render real data into readable PNGs."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image as mpimg

from thoughtsource.collection import Collection
from thoughtsource.datasets.cot_logs import log_to_samples, read_kojima_log_file
from thoughtsource.evaluate import evaluate_frame
from thoughtsource.plots import plot_accuracy, plot_trigger_heatmap


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
