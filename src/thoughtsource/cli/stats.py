"""``stats``: counts, token lengths, vocabulary and n-gram overlap of datasets, as markdown tables and PNGs."""

from __future__ import annotations

import logging
import shlex
import sys
import time
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..collection import MergeIndex
from ..console import note, progress
from ..errors import DataError
from ..io import Entry, FileSamples, atomic_write, write_json
from .generate import old_name

if TYPE_CHECKING:
    from ..reporting.stats import StatsReport

log = logging.getLogger(__name__)

NOTES_MARKER = "<!-- hand-written notes below: kept when stats.md is regenerated -->"


class TokenizerName(str, Enum):
    word = "word"
    embedded = "embedded"


class PlotKind(str, Enum):
    box = "box"
    violin = "violin"


def stats(
    datasets: list[str] = typer.Argument(None, help="Registered dataset names; none and no --file: every dataset whose raw files are present."),
    file: list[Path] = typer.Option(None, "--file", "-f", help="ThoughtSource JSON/JSONL/Parquet file(s); samples of a dataset also named are merged in by id."),
    all_available: bool = typer.Option(False, "--all", help="Every registered dataset whose raw files are present, besides --file."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for stats.md, stats.json and the figures."),
    tokenizer: TokenizerName = typer.Option(TokenizerName.word, "--tokenizer", help="word: fast, no model; embedded: the embedded SmolLM2 tokenizer."),
    ngram: int = typer.Option(None, "--ngram", min=1, help="n-gram size for the overlap between datasets \\[default: 3]."),
    n: int = typer.Option(None, "--n", min=1, hidden=True, help="Old name of --ngram."),
    split: str = typer.Option(None, "--split", help="Only this split of every dataset."),
    data_dir: Path = typer.Option(None, "--data-dir", help="Folder with the raw dataset files (default: the usual resolution)."),
    img_dir: str = typer.Option(".", "--img-dir", help="Sub-folder of --out for the figures (links in stats.md are relative)."),
    svg: bool = typer.Option(False, "--svg", help="Also write SVG figures."),
    kind: PlotKind = typer.Option(PlotKind.box, "--kind", help="Length plots as box or violin plots."),
    title: str = typer.Option("Dataset statistics", "--title", help="Heading of stats.md."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Tables only."),
    json_out: bool = typer.Option(True, "--json/--no-json", help="Also write every table as stats.json."),
) -> None:
    """Statistics of datasets (the paper's Table 6, Figures 1 and 2): stats.md, stats.json and PNGs."""
    # pandas and the statistics, imported when the command runs: `thoughtsource --help` stays fast
    from ..reporting.stats import compute_stats, render_markdown

    n = old_name(ngram, n, "--ngram", "--n") or 3
    t0 = time.perf_counter()
    if file and len(file) == 1 and not datasets and not all_available:  # one file: read a sample at a time
        report = compute_stats(FileSamples(file[0]), tokenizer=tokenizer.value, n=n, split=split, sort_datasets=True)
        if not int(report.counts["samples"].sum()):
            raise DataError("no samples to describe" + (f" (split {split!r})" if split else ""))
        note(f"{int(report.counts['samples'].sum()):,} samples in {len(report.datasets)} dataset(s): "
             f"{', '.join(report.datasets)}", highlight=False)
    else:
        report = _merged_stats(datasets or [], file or [], data_dir, all_available, split, tokenizer.value, n, out)
    images: dict[str, str] = {}
    if not no_plots:
        # the plots (matplotlib, the plots extra) imported only when they are drawn
        from ..reporting.stats_plots import write_all

        t1 = time.perf_counter()
        paths = write_all(report, out / img_dir, formats=("png", "svg") if svg else ("png",), kind=kind.value)
        images = {k: str(p.relative_to(out)) for k, p in paths.items()}
        report.timings["plots"] = time.perf_counter() - t1
    command = "thoughtsource " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv and "thoughtsource" in sys.argv[0] else None
    text = render_markdown(report, images, title=title, command=command)
    previous = out / "stats.md"
    if previous.exists():  # keep a hand-written tail: everything from the marker line on
        old = previous.read_text(encoding="utf-8")
        if NOTES_MARKER in old:
            text += "\n" + old[old.index(NOTES_MARKER):]
    with atomic_write(out / "stats.md") as fh:
        fh.write(text)
    if json_out:
        write_json(out / "stats.json", {
            "tokenizer": report.tokenizer, "n": report.n,
            "counts": _records(report.counts),
            "length_summary": _records(report.length_summary),
            "vocabulary": _records(report.vocabulary),
            "overlap": {f: _records(df) for f, df in report.overlap.items()},
            "timings": report.timings,
        })
    note(f"wrote {out / 'stats.md'}" + (f", {out / 'stats.json'}" if json_out else "") + (f" and {len(images)} figure(s)" if images else "")
                  + f" in {time.perf_counter() - t0:.1f} s", highlight=False)


def _records(df) -> list[dict]:
    """Rows as dicts with NaN as None, so stats.json is strict JSON (an undefined overlap is null)."""
    return df.astype(object).where(df.notna(), None).to_dict("records")


def _merged_stats(datasets: list[str], files: list[Path], data_dir: Path | None, all_available: bool, split: str | None,
                  tokenizer: str, n: int, out: Path) -> StatsReport:
    """The statistics of named datasets and files, merged by sample id on disk (``collection.MergeIndex``, in ``out``).

    The named datasets are loaded one at a time (each dataset's loader builds it in memory), then the files are read a
    sample at a time; a file's samples of a named dataset are merged into the loaded ones by id (so the file's
    generated CoTs are attached).  Without names or files: every registered dataset, with the splits whose raw files
    are present locally (nothing is downloaded).  Memory: the largest named dataset, not their sum, nor the files'.
    """
    # the registry, pandas and the statistics, imported when the command runs: `thoughtsource --help` stays fast
    from .. import datasets as registry
    from ..reporting.stats import compute_stats

    explicit = not all_available and (bool(datasets) or bool(files))
    todo = datasets if explicit else registry.names()
    markers: list[Entry] = []  # the named datasets' splits, empty ones included, in their order
    with MergeIndex(out) as index:
        with progress() as bar:
            task = bar.add_task("load datasets", total=len(todo))
            for name in todo:
                if explicit:
                    loaded = registry.load(name, splits=[split] if split else None, data_dir=data_dir)
                else:
                    splits = [s for s in registry.available_splits(name, data_dir) if split is None or s == split]
                    if not splits:
                        log.info("skipping %s: no raw files present%s", name, f" for split {split!r}" if split else "")
                        bar.advance(task)
                        continue
                    loaded = registry.load(name, splits=splits, data_dir=data_dir, download=False)
                markers += [Entry(name, None, None), *(Entry(name, s, None) for s in loaded)]
                index.add((name, s, x) for s, xs in loaded.items() for x in xs)
                del loaded
                bar.advance(task)
        for f in files:
            index.add((d, s, x) for d, s, x in FileSamples(f).samples() if split is None or s == split)

        def entries() -> Iterator[Entry]:
            yield from markers
            yield from index.entries()

        report = compute_stats(entries(), tokenizer=tokenizer, n=n, split=split, sort_datasets=True)
    total = int(report.counts["samples"].sum())
    if not total:
        raise DataError("no samples to describe" + (f" (split {split!r})" if split else ""))
    note(f"{total:,} samples in {len(report.datasets)} dataset(s): {', '.join(report.datasets)}", highlight=False)
    return report


def register(app: typer.Typer) -> None:
    app.command(name="stats")(stats)
