"""star.analysis.compare_runs (comparison, Markdown tables) and star.analysis.plots on synthetic run folders and on the real runs in docs/star-results."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.image as mpimg
import pytest
from star_synthetic import summary, write_run

from thoughtsource.errors import ConfigError
from thoughtsource.star.analysis import compare_runs
from thoughtsource.star.analysis.accuracy import fisher_exact
from thoughtsource.star.analysis.plots import plot_compare, plot_run
from thoughtsource.star.analysis.seed_aggregate import write_aggregate

DOCS = Path(__file__).resolve().parents[2] / "docs" / "star-results"
GROUPS = [{"1-digit": (k, 50), "2-digit": (j, 50)} for k, j in ((20, 0), (30, 5), (40, 10), (35, 20))]


@pytest.fixture
def arms(tmp_path: Path) -> dict[str, Path]:
    """Three run folders in the loop's schema: STaR (dev best at 2), no rationalization, direct (no dev split)."""
    star = write_run(tmp_path / "star", summary(test=[(20, 100), (35, 100), (50, 100), (55, 100)],
                                                 dev=[(10, 50), (20, 50), (30, 50), (28, 50)], by_group=GROUPS, filters=True))
    norat = write_run(tmp_path / "norat", summary(test=[(20, 100), (22, 100), (25, 100), (24, 100)],
                                                   dev=[(10, 50), (11, 50), (12, 50), (12, 50)], rationalization=False))
    direct = write_run(tmp_path / "direct", summary(test=[(15, 100), (30, 100), (28, 100), (33, 100)], baseline="direct"))
    return {"STaR": star, "norat": norat, "direct": direct}


def _load(arms: dict[str, Path]) -> compare_runs.Runs:
    return compare_runs.load_arms([f"{name}={path}" for name, path in arms.items()])


def test_comparison_against_the_reference_at_final_and_best(arms: dict[str, Path]) -> None:
    cmp = compare_runs.comparison(_load(arms), reference="norat")
    assert cmp["reference"] == "norat" and cmp["test"].startswith("Fisher")
    star = cmp["vs_reference"]["STaR"]
    # final: 55/100 vs 24/100; best on dev: STaR iteration 2 (50/100) vs norat iteration 2 (first of the 12/50 tie, 25/100)
    assert (star["final"]["iteration"], star["final"]["reference_iteration"]) == (3, 3)
    assert star["final"]["p_value"] == pytest.approx(fisher_exact(55, 100, 24, 100), rel=1e-5)
    assert star["final"]["significant_at_0.05"] is True
    assert (star["best"]["iteration"], star["best"]["reference_iteration"]) == (2, 2)
    assert star["best"]["difference"] == pytest.approx(0.25)
    assert "norat" not in cmp["vs_reference"]
    # direct has no dev split: its best is chosen on test, and says so
    assert cmp["arms"]["direct"]["best"]["chosen_on"] == "test" and cmp["arms"]["direct"]["best"]["iteration"] == 3
    assert cmp["arms"]["STaR"]["best"]["chosen_on"] == "dev"
    # default reference: the first arm
    assert compare_runs.comparison(_load(arms))["reference"] == "STaR"
    with pytest.raises(ConfigError, match="reference"):
        compare_runs.comparison(_load(arms), reference="nope")


def test_markdown_tables(arms: dict[str, Path]) -> None:
    md = compare_runs.markdown(_load(arms), reference="norat", title="Arithmetic")
    assert md.startswith("## Arithmetic\n")
    for heading in ("### Test accuracy per iteration", "### Dev accuracy per iteration", "### Best iteration per arm",
                    "### Each arm against its iteration 0", "### Each arm against norat", "### Test accuracy per group: STaR",
                    "### Rationale filter", "### Rejected rationales (examples)"):
        assert heading in md, heading
    lines = md.splitlines()
    # STaR's best on dev (iteration 2) carries the star, its test-best iteration 3 does not
    row2 = next(line for line in lines if line.startswith("| 2 | 50/100"))
    assert "50/100 = 0.500 [0.404, 0.596] ★" in row2
    assert "★" not in next(line for line in lines if line.startswith("| 3 | 55/100")).split("|")[2]
    star_final = next(line for line in lines if line.startswith("| STaR − norat | final"))
    assert star_final.endswith("| yes |") and "+0.310 [+0.176, +0.429]" in star_final
    assert "| 3 | 35/50 = 0.700 [0.562, 0.809] | 20/50 = 0.400 [0.276, 0.538] |" in md
    assert "| STaR | 1 | verified | 6 | 2/6 = 0.333 [0.097, 0.700] | 10 | 7/10 = 0.700 [0.397, 0.892] |" in md
    assert "`<scratch> </scratch> 1 2 \\| 3`" in md  # one line, pipes escaped for the table


def test_report_on_the_real_runs_in_docs() -> None:
    runs = compare_runs.load_arms([f"STaR={DOCS / 'star_metrics.json'}", str(DOCS / "direct_metrics.json")])
    assert list(runs) == ["STaR", "direct"]
    cmp = compare_runs.comparison(runs)
    final = cmp["vs_reference"]["direct"]["final"]
    assert (final["a"]["correct"], final["b"]["correct"], final["a"]["n"]) == (5, 2, 24)
    assert final["p_value"] == pytest.approx(0.4158007587, rel=1e-5) and final["significant_at_0.05"] is False
    md = compare_runs.markdown(runs)
    assert "| 0 | 3/24 = 0.125 [0.043, 0.310] ★ | 1/24 = 0.042 [0.007, 0.202] |" in md  # the docs' 0.04–0.31 interval
    assert "| 0 | 3/8 = 0.375 [0.137, 0.694] | 0/8 = 0.000 [0.000, 0.324] | 0/8 = 0.000 [0.000, 0.324] |" in md
    assert "no dev split" in md


def test_aggregate_folder_is_an_arm(arms: dict[str, Path], tmp_path: Path) -> None:
    runs = {s: summary(test=[(10, 100), (20 + s, 100)], seed=s) for s in (0, 1)}
    write_aggregate(tmp_path / "seeds", runs)
    loaded = compare_runs.load_arms([f"seeds={tmp_path / 'seeds'}", f"star={arms['STaR']}"])
    assert loaded["seeds"]["seeds"] == [0, 1] and loaded["seeds"]["iterations"][1]["test_correct"] == 41
    md = compare_runs.markdown(loaded)
    assert "### Seeds" in md and "| seeds | 1 | 0.200, 0.210 | 0.205 | 0.007 | 41/200 = 0.205 [0.155, 0.266] |" in md


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no STaR run"):
        compare_runs.load_run(tmp_path)
    (tmp_path / "x.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(ConfigError, match="not a STaR metrics summary"):
        compare_runs.load_run(tmp_path / "x.json")
    (tmp_path / "a").mkdir()
    write_run(tmp_path / "a", summary(test=[(1, 2)]))
    with pytest.raises(ConfigError, match="two arms"):
        compare_runs.load_arms([str(tmp_path / "a"), f"a={tmp_path / 'a'}"])


def _readable(png: Path, min_w: int = 600) -> None:
    img = mpimg.imread(png)
    assert img.shape[1] >= min_w and img.shape[0] >= 400, img.shape
    assert img.std() > 0.05


def test_plots_with_error_bars(arms: dict[str, Path], tmp_path: Path) -> None:
    runs = _load(arms)
    written = plot_run(runs["STaR"], tmp_path / "run")
    assert [p.name for p in written] == ["accuracy.png", "train.png", "per_group.png"]
    for p in written:
        _readable(p)
    _readable(plot_compare(runs, tmp_path / "cmp.png"))
    _readable(plot_compare(runs, tmp_path / "cmp_1digit.png", group="1-digit"))
    old = compare_runs.load_run(DOCS / "star_metrics.json")  # an old run without counts per group
    assert [p.name for p in plot_run(old, tmp_path / "old")] == ["accuracy.png", "train.png", "per_group.png"]


def test_a_run_in_its_first_iteration_loads_from_its_iteration_files(tmp_path: Path) -> None:
    from thoughtsource.io import write_json
    from thoughtsource.star.analysis.compare_runs import load_run

    run = tmp_path / "run"
    m0 = {"iteration": 0, "test_n": 10, "test_correct": 3, "test_accuracy": 0.3}
    write_json(run / "config.json", {"task": "arithmetic"})
    for n in (0, 1, 10):  # numeric order, not text order
        write_json(run / f"iter_{n}" / "metrics.json", {**m0, "iteration": n})
    summary = load_run(run)
    assert [m["iteration"] for m in summary["iterations"]] == [0, 1, 10] and summary["config"] == {"task": "arithmetic"}


def test_accuracy_axes_scale_to_the_data_and_its_error_bars() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from thoughtsource.star.analysis.accuracy import Proportion
    from thoughtsource.star.analysis.plots import _errorbar, _finish

    low = [Proportion(2, 236), Proportion(53, 236), Proportion(3, 236)]  # experiment 2: 0.8 %, 22.5 %, 1.3 %
    fig, ax = plt.subplots()
    _errorbar(ax, [0, 1, 2], low, label="direct")
    _finish(ax, [0, 1, 2], "test accuracy", "")
    bottom, top = ax.get_ylim()
    assert low[1].interval[1] < top < 0.4 and bottom < 0  # the 22.5 % bar [17.6, 28.2] fits; not squeezed into 0-100 %
    plt.close(fig)
    fig, ax = plt.subplots()
    _errorbar(ax, [0, 1], [Proportion(90, 100), Proportion(99, 100)], label="high")
    _finish(ax, [0, 1], "test accuracy", "")
    assert ax.get_ylim()[1] == pytest.approx(1.02)  # never beyond 100 %
    plt.close(fig)
