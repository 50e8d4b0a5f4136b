"""Statistics: overlap measures by hand, hashed n-grams against plain Python sets, lengths on real data, plots, CLI."""

from __future__ import annotations

import json
import math
import re
import statistics
from itertools import combinations, pairwise
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from thoughtsource.cli import app
from thoughtsource.collection import Collection
from thoughtsource.errors import ConfigError
from thoughtsource.reporting import stats
from thoughtsource.schema import Sample

WORD = re.compile(r"\w+(?:['’]\w+)*")  # the documented word tokenizer, written out independently


# --------------------------------------------------------------------------- overlap measures, by hand
def test_overlap_coefficient_and_jaccard_by_hand():
    a, b = {"w", "x", "y", "z"}, {"y", "z", "q"}
    # |A∩B| = 2, min(|A|,|B|) = 3, |A∪B| = 5
    assert stats.overlap_coefficient(a, b) == pytest.approx(2 / 3)
    assert stats.jaccard(a, b) == pytest.approx(2 / 5)
    # a subset: overlap coefficient 1, Jaccard |A|/|B|
    assert stats.overlap_coefficient({1, 2}, {1, 2, 3, 4}) == 1.0
    assert stats.jaccard({1, 2}, {1, 2, 3, 4}) == 0.5
    # disjoint and identical
    assert stats.overlap_coefficient({1}, {2}) == 0.0 and stats.jaccard({1}, {2}) == 0.0
    assert stats.overlap_coefficient("abc", "cab") == 1.0 and stats.jaccard("abc", "cab") == 1.0
    # empty: the overlap coefficient is undefined; Jaccard of two empty sets too
    assert math.isnan(stats.overlap_coefficient(set(), {1}))
    assert stats.jaccard(set(), {1}) == 0.0
    assert math.isnan(stats.jaccard(set(), set()))


def test_hashed_trigrams_match_hand_counted_sets():
    tok = stats.WordTokenizer()
    # "the cat sat on the mat" → the-cat-sat, cat-sat-on, sat-on-the, on-the-mat; "The cat sat." adds nothing new
    h1, l1 = tok.encode(["the cat sat on the mat", "The cat sat."])
    # "a cat sat on the mat today" → a-cat-sat, cat-sat-on, sat-on-the, on-the-mat, the-mat-today
    h2, l2 = tok.encode(["a cat sat on the mat today"])
    g1, g2 = stats.ngram_hashes(h1, l1, 3), stats.ngram_hashes(h2, l2, 3)
    assert g1.size == 4 and g2.size == 5
    inter = stats.intersection_size(g1, g2)
    assert inter == 3  # cat-sat-on, sat-on-the, on-the-mat
    pairs = stats.pairwise_overlap({"x": g1, "y": g2})
    row = pairs[(pairs.dataset_a == "x") & (pairs.dataset_b == "y")].iloc[0]
    assert row.intersection == 3
    assert row.overlap_coefficient == pytest.approx(3 / 4)
    assert row.jaccard == pytest.approx(3 / 6)
    m = stats.overlap_matrix(pairs, "jaccard")
    assert m.loc["y", "x"] == m.loc["x", "y"] == pytest.approx(0.5) and m.loc["x", "x"] == 1.0


def test_ngrams_never_span_two_texts():
    tok = stats.WordTokenizer()
    h, lengths = tok.encode(["a b", "c d", "e f g"])
    assert lengths.tolist() == [2, 2, 3]
    assert stats.ngram_hashes(h, lengths, 3).size == 1  # only e-f-g
    assert stats.ngram_hashes(h, lengths, 2).size == 4  # a-b, c-d, e-f, f-g
    assert stats.ngram_hashes(h, lengths, 1).size == 7
    with pytest.raises(ConfigError):
        stats.ngram_hashes(h, lengths, 0)


def test_hashed_overlap_equals_string_sets_on_real_files(examples_dir: Path):
    c = Collection.load(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json")
    for f in ("annotated/annotated_wt_davinci.json", "annotated/annotated_ob_davinci.json", "annotated/cs_davinci_annotated.json"):
        c = c.merge(Collection.load(examples_dir / f))
    report = stats.compute_stats(c, progress=False)

    def string_ngrams(texts: list[str], n: int = 3) -> set[str]:
        out = set()
        for t in texts:
            toks = WORD.findall(t.lower())
            out.update(" ".join(toks[i : i + n]) for i in range(len(toks) - n + 1))
        return out

    for field, get in (("question", lambda x: x.question), ("cot", lambda x: " ".join(x.cot))):
        sets = {d: string_ngrams([get(x) for xs in sp.values() for x in xs]) for d, sp in c}
        pairs = report.overlap[field].set_index(["dataset_a", "dataset_b"])
        for a, b in combinations(sets, 2):
            key = (a, b) if (a, b) in pairs.index else (b, a)
            row = pairs.loc[key]
            assert row.intersection == len(sets[a] & sets[b])
            assert row.overlap_coefficient == pytest.approx(stats.overlap_coefficient(sets[a], sets[b]), nan_ok=True)
            assert row.jaccard == pytest.approx(stats.jaccard(sets[a], sets[b]), nan_ok=True)
    # the worldtree test questions in annotated_wt_davinci are WorldTree questions: shared n-grams exist
    wt = report.overlap["question"].set_index(["dataset_a", "dataset_b"]).loc[("worldtree", "worldtree")]
    assert wt.overlap_coefficient == 1.0


# --------------------------------------------------------------------------- lengths on a real dataset (GSM8K test)
def _gsm8k_test(shared_data: Path) -> tuple[Collection, list[dict]]:
    raw = [json.loads(line) for line in (shared_data / "gsm8k" / "test.jsonl").read_text().splitlines() if line.strip()]
    samples = []
    for i, r in enumerate(raw):
        steps, _, answer = r["answer"].partition("####")
        samples.append(Sample(id=f"gsm8k-{i}", question=r["question"], type="number",
                              cot=[s for s in steps.strip().split("\n") if s.strip()], answer=[answer.strip()]))
    half = len(samples) // 2
    return Collection(data={"gsm8k": {"a": samples[:half], "b": samples[half:]}}), raw


def test_length_statistics_on_gsm8k_match_an_independent_computation(shared_data: Path):
    c, raw = _gsm8k_test(shared_data)
    report = stats.compute_stats(c, progress=False)
    assert report.counts.set_index("split").loc["a", "samples"] + report.counts.set_index("split").loc["b", "samples"] == 1319
    assert report.counts["number"].sum() == 1319 and report.counts["with_reference_cot"].sum() == 1319
    half = len(raw) // 2
    for split, rows in (("a", raw[:half]), ("b", raw[half:]), ("all", raw)):
        q = [len(WORD.findall(r["question"].lower())) for r in rows]
        cot = [len(WORD.findall(" ".join(s for s in r["answer"].partition("####")[0].strip().split("\n") if s.strip()).lower()))
               for r in rows]
        for field, values in (("question", q), ("cot", cot)):
            got = report.length_summary.set_index(["dataset", "split", "field"]).loc[("gsm8k", split, field)]
            assert got["n"] == len(values)
            assert got["min"] == min(values) and got["max"] == max(values)
            assert got["mean"] == pytest.approx(statistics.fmean(values))
            assert got["median"] == pytest.approx(statistics.median(values))
            quartiles = statistics.quantiles(values, n=4, method="inclusive")
            assert got["q25"] == pytest.approx(quartiles[0]) and got["q75"] == pytest.approx(quartiles[2])
            assert got["q95"] == pytest.approx(statistics.quantiles(values, n=20, method="inclusive")[-1])
    # per-text rows: one per question and per reference CoT; no context, choices or generated CoTs in GSM8K
    assert set(report.lengths["field"]) == {"question", "cot"}
    assert (report.lengths["field"] == "question").sum() == 1319
    # the first GSM8K question, counted by hand: "Janet’s ducks lay 16 eggs per day. ..." has 52 word tokens
    assert report.lengths.iloc[0]["length"] == len(WORD.findall(raw[0]["question"].lower())) == 52
    vocab = set()
    for r in raw:
        vocab.update(WORD.findall(r["question"].lower()))
        vocab.update(WORD.findall(" ".join(s for s in r["answer"].partition("####")[0].strip().split("\n") if s.strip()).lower()))
    assert report.vocabulary.iloc[0]["vocabulary"] == len(vocab)


def test_generated_cots_and_context_are_counted_per_text(examples_dir: Path):
    c = Collection.load(examples_dir / "annotated" / "annotated_set.json")
    report = stats.compute_stats(c, progress=False)
    expected = sum(1 for _, _, x in c.samples() for g in x.generated_cot if g.cot and g.cot.strip())
    assert (report.lengths["field"] == "generated_cot").sum() == expected > 0
    counts = report.counts.set_index(["dataset", "split"])
    for d, s, xs in ((d, s, xs) for d, sp in c for s, xs in sp.items()):
        assert counts.loc[(d, s), "generated_cots"] == sum(len(x.generated_cot) for x in xs)
        assert counts.loc[(d, s), "samples"] == len(xs)


def _assert_same_report(a: stats.StatsReport, b: stats.StatsReport) -> None:
    import pandas as pd

    for name in ("counts", "lengths", "length_summary", "vocabulary"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_dtype=False, obj=name)
    assert a.overlap.keys() == b.overlap.keys()
    for f in a.overlap:
        pd.testing.assert_frame_equal(a.overlap[f], b.overlap[f], obj=f)


@pytest.mark.parametrize("name", ["tests_unit_data/worldtree_100_dataset.json", "annotated/annotated_set.json",
                                  "model_runs/thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"])
def test_stats_of_a_file_read_a_sample_at_a_time_equal_those_of_the_loaded_file(examples_dir: Path, name: str,
                                                                                 monkeypatch: pytest.MonkeyPatch):
    """``stats --file F`` reads F a sample at a time and tokenizes a batch of texts at a time (here 7): every table is
    that of the loaded file (datasets by name, as the command orders them), with and without a split filter."""
    from thoughtsource.io import FileSamples

    monkeypatch.setattr(stats, "ENCODE_BATCH", 7)
    f = examples_dir / name
    loaded = Collection.load(f)
    ordered = Collection(data=dict(sorted(loaded.data.items())))
    _assert_same_report(stats.compute_stats(ordered, progress=False, n=2),
                        stats.compute_stats(FileSamples(f), progress=False, n=2, sort_datasets=True))
    split = next(s for _, sp in loaded for s in sp)
    only = Collection(data={d: {s: xs for s, xs in sp.items() if s == split} for d, sp in ordered.data.items()})
    only = Collection(data={d: sp for d, sp in only.data.items() if sp})
    _assert_same_report(stats.compute_stats(only, progress=False),
                        stats.compute_stats(FileSamples(f), progress=False, split=split, sort_datasets=True))


@pytest.mark.slow
def test_stats_of_a_file_finish_under_a_memory_cap_that_loading_exceeds(gpt35_replicated: tuple, tmp_path: Path):
    """``stats --file`` on a 300 MB run (71,700 samples, 215,000 short real CoTs) under RLIMIT_AS of 700 MB; before,
    the file was loaded whole (``Collection.load`` of it alone needs ~1.4 GB)."""
    from thoughtsource.testing.scale import run_cli_capped

    big, written = gpt35_replicated
    out = tmp_path / "out"
    p = run_cli_capped(["stats", "--file", str(big), "--out", str(out), "--no-plots"], 700)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads((out / "stats.json").read_text())
    assert sum(r["samples"] for r in data["counts"]) == written.samples
    assert sum(r["generated_cots"] for r in data["counts"]) == written.cots


@pytest.mark.slow
def test_embedded_tokenizer_counts_model_tokens(examples_dir: Path):
    from transformers import AutoTokenizer

    from thoughtsource.embedded import embedded_model_dir

    c = Collection.load(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(split="train", number_samples=20)
    report = stats.compute_stats(c, tokenizer="embedded", progress=False)
    assert report.tokenizer == "embedded"
    hf = AutoTokenizer.from_pretrained(embedded_model_dir())
    questions = [x.question for x in c["worldtree"]["train"]]
    expected = [len(hf(q, add_special_tokens=False)["input_ids"]) for q in questions]
    got = report.lengths[report.lengths["field"] == "question"]["length"].tolist()
    assert got == expected
    # subword tokens outnumber words
    words = stats.compute_stats(c, progress=False).lengths
    assert sum(got) > words[words["field"] == "question"]["length"].sum()


def test_unknown_tokenizer_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown tokenizer 'spacy'"):
        stats.get_tokenizer("spacy")


# --------------------------------------------------------------------------- markdown, plots, CLI
def test_markdown_table_and_paper_comparison(examples_dir: Path):
    c = Collection.load(examples_dir / "annotated" / "annotated_set.json")
    report = stats.compute_stats(c, progress=False)
    text = stats.render_markdown(report, {"lengths": "img/stats_lengths.png"})
    assert "| commonsense_qa | validation | 11 |" in text
    assert "12,102" in text  # the paper's CommonsenseQA count, next to ours
    assert "![token lengths](img/stats_lengths.png)" in text
    assert "### question: overlap coefficient" in text and "### question: Jaccard" in text
    assert "jaccard" not in stats.overlap_coefficient.__doc__.lower()


def _labels_collide(fig, axis) -> bool:
    """Tick labels overlap: bounding boxes for horizontal text; for rotated text, the gap between neighbours
    measured perpendicular to the text must exceed the text height."""
    renderer = fig.canvas.get_renderer()
    labels = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
    rotated = [t for t in labels if t.get_rotation() % 180]
    if not rotated:
        return any(a.overlaps(b) for a, b in combinations([t.get_window_extent(renderer) for t in labels], 2))
    angle = math.radians(rotated[0].get_rotation())
    height = rotated[0].get_fontsize() * fig.dpi / 72
    xs = sorted(axis.axes.transData.transform((tick, 0))[0] for tick in axis.get_ticklocs())
    return min(b - a for a, b in pairwise(xs)) * math.sin(angle) < height


@pytest.mark.slow
def test_plots_have_legible_non_overlapping_labels(examples_dir: Path, tmp_path: Path):
    from thoughtsource.reporting import stats_plots

    c = Collection.load(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json")
    for f in ("annotated/annotated_set.json", "annotated/medical_incorrect_1.json", "annotated/annotated_ob_davinci.json"):
        c = c.merge(Collection.load(examples_dir / f))
    # more datasets than the palette has colours, with long names, to stress the layout
    data = dict(c.data)
    for i in range(10):
        data[f"copy_{i}_of_worldtree_long_name"] = c.data["worldtree"]
    report = stats.compute_stats(Collection(data=data), progress=False)
    for make in (lambda: stats_plots.plot_lengths(report), lambda: stats_plots.plot_overlap(report),
                 lambda: stats_plots.plot_counts(report), lambda: stats_plots.plot_lengths(report, kind="violin")):
        fig = make()
        fig.canvas.draw()
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                assert not _labels_collide(fig, axis), f"overlapping tick labels in {ax.get_title()!r}"
            assert all(t.get_fontsize() >= 7 for t in ax.texts)
        paths = stats_plots.save_figure(fig, tmp_path / "fig", formats=("png",))
        assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert paths[0].stat().st_size < 300_000


@pytest.mark.slow
def test_cli_writes_tables_and_figures(examples_dir: Path, tmp_path: Path):
    out = tmp_path / "out"
    r = CliRunner().invoke(app, [
        "stats", "--file", str(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"),
        "--file", str(examples_dir / "annotated" / "annotated_set.json"), "--file", str(examples_dir / "annotated" / "medical_incorrect_1.json"),
        "--out", str(out), "--img-dir", "img", "--svg", "--n", "2",
    ])
    assert r.exit_code == 0, r.output
    text = (out / "stats.md").read_text()
    assert "2-gram overlap between datasets" in text and "| worldtree | train | 100 |" in text
    for name in ("counts", "lengths", "overlap_coefficient", "jaccard"):
        assert (out / "img" / f"stats_{name}.png").stat().st_size > 5_000
        assert (out / "img" / f"stats_{name}.svg").exists()
        assert f"(img/stats_{name}.png)" in text
    data = json.loads((out / "stats.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    assert data["n"] == 2 and data["tokenizer"] == "word"
    assert {r["dataset"] for r in data["counts"]} == {"worldtree", "commonsense_qa", "strategy_qa", "open_book_qa", "med_qa"}
    # MedQA has no reference CoTs: its CoT overlap is undefined, written as null
    med = [p for p in data["overlap"]["cot"] if "med_qa" in (p["dataset_a"], p["dataset_b"])]
    assert med and all(p["overlap_coefficient"] is None for p in med)
    assert any(r["field"] == "generated_cot" for r in data["length_summary"])
    r = CliRunner().invoke(app, ["stats", "--file", str(examples_dir / "annotated" / "annotated_set.json"), "--out", str(out), "--tokenizer", "spacy"])
    assert r.exit_code != 0


def test_cli_split_filter_and_no_plots(examples_dir: Path, tmp_path: Path):
    r = CliRunner().invoke(app, ["stats", "--file", str(examples_dir / "annotated" / "annotated_set.json"), "--out", str(tmp_path),
                                 "--split", "train", "--no-plots"])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "stats.json").read_text())
    assert {r["split"] for r in data["counts"]} == {"train"}
    assert not list(tmp_path.glob("*.png"))
    assert np.isfinite([r["mean"] for r in data["length_summary"]]).all()


@pytest.mark.slow
def test_paper_overlap_findings_on_the_real_datasets(shared_data: Path, tmp_path: Path):
    """The paper's Figure 2 findings: EntailmentBank questions are WorldTree questions (overlap 1.0);
    SVAMP was seeded from ASDiv and MAWPS shares sources with ASDiv (clear overlap); unrelated sets barely overlap."""
    r = CliRunner().invoke(app, ["stats", "asdiv", "svamp", "mawps", "worldtree", "entailment_bank", "gsm8k",
                                 "--data-dir", str(shared_data), "--out", str(tmp_path), "--no-plots"])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "stats.json").read_text())
    q = {(p["dataset_a"], p["dataset_b"]): p for p in data["overlap"]["question"]}
    eb_wt = q[("entailment_bank", "worldtree")]
    assert eb_wt["overlap_coefficient"] > 0.99  # every EntailmentBank question n-gram is in WorldTree
    assert eb_wt["jaccard"] < eb_wt["overlap_coefficient"]  # WorldTree is larger: Jaccard is not 1
    assert q[("asdiv", "svamp")]["overlap_coefficient"] > 0.1
    assert q[("asdiv", "mawps")]["overlap_coefficient"] > 0.1
    assert q[("entailment_bank", "svamp")]["overlap_coefficient"] < 0.01
    counts = {(c["dataset"], c["split"]): c["samples"] for c in data["counts"]}
    assert counts[("gsm8k", "train")] == 7473 and counts[("gsm8k", "test")] == 1319
    assert sum(v for (d, _), v in counts.items() if d == "entailment_bank") == 1840


def test_unique_sorted_equals_numpy_unique():
    rng = np.random.default_rng(0)
    for values in (np.empty(0, dtype=np.uint64), np.array([7], dtype=np.uint64),
                   rng.integers(0, 50, 1000).astype(np.uint64), rng.integers(0, 2**63, 5000, dtype=np.uint64)):
        assert np.array_equal(stats.unique_sorted(values), np.unique(values))


def test_cli_keeps_hand_written_notes(examples_dir: Path, tmp_path: Path):
    from thoughtsource.cli.stats import NOTES_MARKER

    args = ["stats", "--file", str(examples_dir / "annotated" / "annotated_set.json"), "--out", str(tmp_path), "--no-plots", "--no-json"]
    assert CliRunner().invoke(app, args).exit_code == 0
    md = tmp_path / "stats.md"
    md.write_text(md.read_text() + f"\n{NOTES_MARKER}\n## Notes\nkeep me\n")
    assert CliRunner().invoke(app, [*args, "--n", "2"]).exit_code == 0
    text = md.read_text()
    assert "2-gram overlap" in text and text.count("keep me") == 1 and text.rstrip().endswith("keep me")
    assert not (tmp_path / "stats.json").exists()


def test_empty_and_tiny_collections(tmp_path: Path):
    from thoughtsource.reporting import stats_plots

    empty = stats.compute_stats(Collection(), progress=False)
    assert empty.counts.empty and empty.length_summary.empty and "median" in empty.length_summary.columns
    tiny = Collection(data={"x": {"train": [], "test": [Sample(id="1", question="Why?", type="text")]}})
    r = stats.compute_stats(tiny, progress=False)
    assert r.counts.set_index("split").loc["train", "samples"] == 0
    assert r.length_summary.set_index("split").loc["test", "max"] == 1
    row = r.overlap["question"].iloc[0]
    assert row.ngrams_a == 0 and math.isnan(row.overlap_coefficient)  # a 1-token question has no 3-grams
    assert len(stats_plots.write_all(r, tmp_path)) == 4


def _loaded_merge(names: list[str], files: list[Path], data_dir: Path, split: str | None) -> Collection:
    """What ``stats`` computed on before issue 33's streaming of several inputs: the files loaded and merged, each named
    dataset loaded and the files' samples of it merged in, datasets by name, then the split filter."""
    from thoughtsource import datasets as registry

    collection = Collection()
    for f in files:
        collection = collection.merge(Collection.load(f))
    data = dict(collection.data)
    for name in names:
        loaded = registry.load(name, splits=[split] if split else None, data_dir=data_dir)
        data[name] = Collection(data={name: loaded}).merge(Collection(data={name: data[name]})).data[name] if name in data else loaded
    if split:
        data = {d: {s: xs for s, xs in sp.items() if s == split} for d, sp in data.items()}
        data = {d: sp for d, sp in data.items() if sp}
    return Collection(data=dict(sorted(data.items())))


@pytest.mark.parametrize("names, split", [([], None), ([], "train"), (["strategy_qa", "worldtree"], None),
                                          (["strategy_qa", "worldtree"], "train")])
def test_stats_of_several_inputs_merged_on_disk_equal_those_of_the_loaded_merge(examples_dir: Path, shared_data: Path,
                                                                                tmp_path: Path, names: list[str],
                                                                                split: str | None,
                                                                                monkeypatch: pytest.MonkeyPatch):
    """``stats`` with several files or dataset names merges them by sample id on disk (``collection.MergeIndex``)
    instead of in memory: every table equals that of the loaded merge, on real files (two runs of the same samples,
    annotated files sharing them, WorldTree) and the real StrategyQA and WorldTree datasets, whose samples the files'
    CoTs are merged into; with and without a split filter."""
    from thoughtsource.cli.stats import _merged_stats

    monkeypatch.setattr(stats, "ENCODE_BATCH", 7)
    runs = examples_dir / "model_runs"
    files = [examples_dir / "tests_unit_data" / "worldtree_100_dataset.json", examples_dir / "annotated" / "annotated_set.json",
             runs / "thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json",
             runs / "thoughtsource_67_huggingface_endpoint_flan-T5-xxl_None_None-kojima-01-zhou-01.json",
             examples_dir / "annotated" / "annotated_st_davinci.json"]
    loaded = _loaded_merge(names, files, shared_data, split)
    assert len(loaded) > 0
    streamed = _merged_stats(names, files, shared_data, False, split, "word", 2, tmp_path / "out")
    _assert_same_report(stats.compute_stats(loaded, progress=False, n=2), streamed)
    assert [p.name for p in (tmp_path / "out").iterdir()] == []  # the index removed


@pytest.mark.slow
def test_stats_of_two_files_finish_under_a_memory_cap_the_loaded_merge_exceeds(examples_dir: Path, tmp_path: Path):
    """``stats --file A --file B`` on two 40 MB runs of the same 9,564 samples (the released GPT-3.5 run's, new ids)
    under RLIMIT_AS of 520 MB; loading and merging them (what the command did before) runs out of memory under the
    same cap (measured: 189 MB peak RSS streamed, 534 MB loaded; docs/large-files.md)."""
    import shutil

    from thoughtsource.testing.scale import run_capped, run_cli_capped, write_replicated

    run = "model_runs/thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    written = write_replicated(json.loads((examples_dir / run).read_text()), a, 40 << 20)
    shutil.copy(a, b)
    out = tmp_path / "out"
    p = run_cli_capped(["stats", "--file", str(a), "--file", str(b), "--out", str(out), "--no-plots"], 520)
    assert p.returncode == 0, p.stderr[-3000:]
    data = json.loads((out / "stats.json").read_text())
    assert sum(r["samples"] for r in data["counts"]) == written.samples  # every sample of B merged into A's
    assert sum(r["generated_cots"] for r in data["counts"]) == written.cots
    p = run_capped("from thoughtsource import Collection\nfrom thoughtsource.reporting.stats import compute_stats\n"
                   f"compute_stats(Collection.load({str(a)!r}).merge(Collection.load({str(b)!r})), progress=False)", 520)
    assert p.returncode != 0 and "MemoryError" in p.stderr, p.stderr[-3000:]


def test_the_papers_table6_rows_are_facts_of_their_datasets_spec():
    from thoughtsource import datasets

    rows = {d: datasets.spec(d).paper_table6 for d in datasets.DATASETS if datasets.spec(d).paper_table6}
    assert len(rows) == 14 and rows == stats.PAPER_TABLE6  # the old name, one release
    for d, row in rows.items():
        spec = datasets.spec(d)
        assert row.samples == spec.paper_counts.get("total", sum(spec.paper_counts.values())), d  # one count, twice stated
        assert row.with_reference_cot <= row.samples and row.with_generated_cot <= row.samples, d
    assert rows["commonsense_qa"] == (12_102, 10_962, 1_221, 3_037, "multiplechoice")
    assert stats._paper_table6("no_such_dataset") is None
