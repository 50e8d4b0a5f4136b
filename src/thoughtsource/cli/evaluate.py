"""``evaluate``: score a ThoughtSource file, print accuracy tables, write results.json, tables and plots."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ..console import console, note, print_json, stdout
from ..errors import ConfigError
from ..io import FileSamples, check_out, iter_entries, write_entries


class ModeOption(str, Enum):
    strict = "strict"
    flexible = "flexible"


_SHORT = {"cot_trigger": "trigger", "answer_extraction": "extraction", "instruction": "instr."}


def _value(v: Any) -> str:
    """A cell as shown: no trigger / no instruction is "none", as in the plots."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..reporting.plots import shown_value as shown

    return shown(v)


def row_label(row: Any, fields: list[str]) -> str:
    """"instruction: none · trigger: zhou-01 · extraction: kojima-A-D": every part names its field."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..reporting.plots import row_label as label

    return label(row, fields)


def _pct(v: float) -> str:
    """A proportion as the CSV and Markdown tables write it (0.820: one unit everywhere)."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..evaluate import fmt_proportion

    return fmt_proportion(v)


def _acc(r: Any) -> str:
    return f"{_pct(r['accuracy'])} ({_pct(r['ci_low'])}–{_pct(r['ci_high'])})"


def evaluate(
    file: Path = typer.Argument(..., help="ThoughtSource JSON, JSONL or Parquet with generated CoTs."),
    mode: ModeOption = typer.Option(ModeOption.strict, "--mode", help="Answer extraction mode shown and stored."),
    out: Path | None = typer.Option(None, "--out", help="Folder for tables and plots \\[default: <file stem>_evaluation]."),
    scored: Path | None = typer.Option(None, "--scored", help="Also write the file with correct_answer set (JSON)."),
    ks: str | None = typer.Option(None, "--k", help="Self-consistency sizes, e.g. '1,3,5' \\[default: 1,3,5,10,20,40 and n]."),
    as_json: bool = typer.Option(False, "--json", help="Print results.json on stdout instead of the tables."),
) -> None:
    """Extract and score every answer, of every answer type, with 95% Wilson intervals and maj@k.

    Writes results.json (config, versions, git commit, models, per-cell n / accuracy / interval /
    no-answer rate), CSV and Markdown tables and, with the plots extra, PNG plots.
    """
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..evaluate import evaluate_frame, write_tables
    from ..reporting.results import results_document, write_results

    try:
        k_list = [int(k) for k in ks.split(",")] if ks else None
    except ValueError:
        raise ConfigError(f"--k: expected comma-separated integers, got {ks!r}") from None
    check_out(out or Path(f"{file.stem}_evaluation"), folder=True)
    if scored is not None:
        check_out(scored)
    # the file is read a sample at a time, never held whole: scoring, the models for results.json, --scored's copy
    c = FileSamples(file)
    m = mode.value
    out_dir = out or Path(f"{file.stem}_evaluation")
    # answers.csv is written as the answers are scored; the other tables come from compact per-answer codes
    result = evaluate_frame(c, mode=m, ks=k_list, answers_csv=out_dir / "answers.csv")  # type: ignore[arg-type]
    document = results_document(result, c, file=file, mode=m, ks=k_list, out_dir=out_dir)
    if result.empty:
        console.print(f"[yellow]{file}: no generated answers to evaluate[/]", highlight=False, soft_wrap=True)
        if as_json:  # a script still gets a document, with no results
            print_json(document)
        raise typer.Exit(0)
    if as_json:
        print_json(document)
    else:
        _print_tables(result, m, file)
    written = [write_results(out_dir / "results.json", document), *write_tables(result, out_dir)]
    written.extend(_plots(result, out_dir, m))
    note(f"wrote {', '.join(p.name for p in written)} to {out_dir}", highlight=False)
    if scored is not None:
        from ..evaluate import scored_entries

        write_entries(scored_entries(iter_entries(file), result, mode=m), scored, "json")  # type: ignore[arg-type]
        note(f"wrote the scored file to {scored}", highlight=False)


def _plots(result: Any, out_dir: Path, mode: str) -> list[Path]:
    """The accuracy plot, trigger heatmap and (reasoning models) the reasoning-length plot; a plot that cannot be
    drawn (no matplotlib, an error) is a warning."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..reporting.plots import plot_accuracy, plot_or_warn, plot_reasoning, plot_trigger_heatmap

    drawn = [plot_or_warn(plot_accuracy, result.accuracy, out_dir / "accuracy.png", mode=mode),
             plot_or_warn(plot_trigger_heatmap, result.accuracy, out_dir / "trigger_heatmap.png", mode=mode)]
    if result.has_reasoning:
        drawn.append(plot_or_warn(plot_reasoning, result.reasoning, out_dir / "reasoning.png", lengths=result.lengths,
                                  by_length=result.by_length, mode=mode))
    return [p for p in drawn if p is not None]


def accuracy_table(acc: Any, title: str, keys: tuple[str, ...] = ()) -> Table:
    """The accuracy table as ``evaluate`` prints it (also ``runs evaluate``): the columns that vary (``keys`` first,
    then dataset, split, model, instruction, trigger, extraction), n, accuracy with its 95% interval in three
    decimals, no-answers; then a "mean over datasets" row per combination measured on several datasets."""
    import pandas as pd

    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..evaluate import MEAN_OVER_DATASETS, mean_over_datasets

    keys = (*keys, "dataset", "split", "model", "instruction", "cot_trigger", "answer_extraction")
    varying = [k for k in keys if acc[k].nunique(dropna=False) > 1] or ["dataset"]
    fixed = [k for k in keys if k not in varying]
    shared = row_label(acc.iloc[0], fixed).replace(" · ", ", ") if fixed else ""
    table = Table(title=title, caption=shared or None)
    for col in varying:
        table.add_column(_SHORT.get(col, col), overflow="ellipsis", no_wrap=True)
    repeated = bool((acc["questions"] != acc["n"]).any())  # self-consistency: scored per question
    numeric = (("n", 4), *((("questions", 4),) if repeated else ()), ("accuracy (95% CI)", 19), ("none", 4))
    for col, width in numeric:
        table.add_column(col, justify="right", no_wrap=True, min_width=width)
    blocks = [g for _, g in acc.groupby("file", sort=False)] if "file" in acc else [acc]
    for block in blocks:
        mean = mean_over_datasets(block.drop(columns=["file"], errors="ignore"))
        if "file" in block and not mean.empty:
            mean = mean.assign(file=block["file"].iloc[0])
        rows = pd.concat([block, mean], ignore_index=True) if not mean.empty else block
        for _, r in rows.iterrows():
            qs = (str(r["questions"]),) if repeated else ()
            is_mean = r["dataset"] == MEAN_OVER_DATASETS
            cells = [("" if is_mean and k == "split" else _value(r[k])) for k in varying]
            shown = _pct(r["accuracy"]) if is_mean else _acc(r)
            table.add_row(*cells, str(r["n"]), *qs, shown, str(r["no_answer"]), style="bold" if is_mean else None)
    return table


def _print_tables(result: Any, m: str, file: Path) -> None:
    """The accuracy table, the pooled line and the maj@k table, on stdout."""
    acc = result.accuracy[result.accuracy["mode"] == m]
    stdout.print(accuracy_table(acc, f"accuracy ({m}) — {file.name}"))
    other = "flexible" if m == "strict" else "strict"
    combination = ("instruction", "cot_trigger", "answer_extraction")
    theirs = {tuple(c[k] for k in ("model", *combination)): c["accuracy"] for c in result.pooled_cells(other)}
    mine: dict[str, list[dict[str, Any]]] = {}
    for c in result.pooled_cells(m):  # pooled over datasets and splits, never over models
        mine.setdefault(c["model"], []).append(c)
    for model, cells in mine.items():
        stdout.print(f"pooled (model: {model}): " + "; ".join(
            f"{row_label(c, list(combination))}: {_pct(c['accuracy'])} "
            f"({other} {_pct(theirs.get(tuple(c[k] for k in ('model', *combination)), float('nan')))})" for c in cells),
            highlight=False)

    maj = result.majority[result.majority["mode"] == m]
    if not maj.empty:
        mt = Table(title=f"self-consistency maj@k ({m})")
        for col in ("dataset", "model", "trigger", "k", "prompts", "accuracy (95% CI)"):
            right = col in ("k", "prompts", "accuracy (95% CI)")
            mt.add_column(col, justify="right" if right else "left", no_wrap=True, overflow="ellipsis")
        for _, r in maj.iterrows():
            mt.add_row(str(r["dataset"]), str(r["model"]), _value(r["cot_trigger"]), str(r["k"]), str(r["n"]), _acc(r))
        stdout.print(mt)
    sampling = result.sampling
    if sampling is not None and not sampling.empty and not (sub := sampling[sampling["mode"] == m]).empty:
        st = Table(title=f"pass@k and maj@k over resamples ({m}; 95% bootstrap CI over questions)")
        for col in ("dataset", "model", "trigger", "k", "questions", "pass@k", "maj@k"):
            st.add_column(col, justify="left" if col in ("dataset", "model", "trigger") else "right", no_wrap=True,
                          overflow="ellipsis")
        for _, r in sub.iterrows():
            st.add_row(str(r["dataset"]), str(r["model"]), _value(r["cot_trigger"]), str(r["k"]), str(r["questions"]),
                       f"{_pct(r['pass_at_k'])} ({_pct(r['pass_ci_low'])}–{_pct(r['pass_ci_high'])})",
                       f"{_pct(r['maj_at_k'])} ({_pct(r['maj_ci_low'])}–{_pct(r['maj_ci_high'])})")
        stdout.print(st)
    if result.has_reasoning:
        rt = Table(title="reasoning length per model (truncated: cut off mid-thought, 95% Wilson CI)")
        for col in ("model", "CoTs", "unit", "mean", "p10", "median", "p90", "max", "truncated"):
            rt.add_column(col, justify="left" if col in ("model", "unit") else "right", no_wrap=True, overflow="ellipsis")
        for r in result.reasoning.to_dict("records"):
            rt.add_row(str(r["model"]), str(r["cots"]), r["unit"], *(f"{r[k]:.0f}" for k in ("mean", "p10", "median", "p90", "max")),
                       f"{_pct(r['truncation_rate'])} ({_pct(r['trunc_ci_low'])}–{_pct(r['trunc_ci_high'])})")
        stdout.print(rt)


def register(app: typer.Typer) -> None:
    app.command()(evaluate)
