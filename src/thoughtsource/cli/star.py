"""``thoughtsource star base``: a small model built and trained from scratch on easy arithmetic (a STaR base);
``thoughtsource star run``: the STaR loop (``--seeds``: repeated and aggregated);
``thoughtsource star compare``: several runs side by side (table, significance tests, plot);
``thoughtsource star report``: the same comparison as Markdown tables for the docs;
``thoughtsource star configs``: the run configs shipped in the package (``star run --config NAME``);
``thoughtsource star audit``: a run's logged generations regenerated from its checkpoints and compared.

Results go to stdout (human tables, or JSON with ``--json``); progress and logs go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import typer
from pydantic import BaseModel, Field

from ..console import console
from ..interrupt import graceful_sigint
from ..io import atomic_write, check_out
from ..star.config import CONFIGS_DIR, StarConfig, config_names, config_path
from .config_options import GivenOptions, config_options, options, set_path

star_app = typer.Typer(help="STaR: bootstrap reasoning with rationale generation and rationalization.", no_args_is_help=True)


class RunTaskOptions(BaseModel):
    """``star run``'s shorthands for the task's own options (``task_options``).  Each reaches the task under its own
    name, or as NAME_per_digit where the task counts per digit count (arithmetic's ``n_test_per_digit``), ``--digits``
    as min_digits and max_digits; an option the task does not take (its ``__init__``'s keywords,
    :func:`~thoughtsource.star.tasks.task_option_types`) is a usage error."""

    digits: str | None = Field(None, description="arithmetic: digit range, e.g. 1-5.")
    n_train: int | None = Field(None, description="Training problems.")
    n_test: int | None = Field(None, description="Test problems (arithmetic: per digit count).")
    per_iteration: int | None = Field(None, description="Fresh training problems sampled from the pool each iteration.")
    pool_size: int | None = Field(None, description="Size of the seeded pool training problems are sampled from.")
    n_dev: int | None = Field(None, description="Dev problems for choosing the best iteration (arithmetic: per digit count).")
    prompts: Literal["star", "reference"] | None = Field(
        None, description="Dataset tasks: star (the STaR authors' exemplars) or reference (the dataset's CoTs).")


#: ``star run``'s named options, in the order of its --help: StarConfig fields and the task's options
RUN_OPTIONS = [
    *options(StarConfig, "task", "model", {"path": "iterations", "short": "-n"},
             {"path": "rationalization", "name": "--no-rationalization", "off_only": True,
              "help": "STaR without rationalization (rationalization: false)."},
             "baseline", {"path": "sampling.k", "name": "--samples"}, "sampling.accumulate", {"path": "pseudo_labels.mode", "name": "--pseudo-labels"},
             {"path": "pseudo_labels.k", "name": "--pseudo-k"}),
    *options(RunTaskOptions, "digits", "n_train", "n_test"),
    *options(StarConfig, "fewshot_k", {"path": "steps.first", "name": "--steps-first"}, "steps.warmup_steps", "batch_size", "lr",
             {"path": "lora.enabled", "name": "--lora"}, {"path": "generation.batch_size", "name": "--gen-batch-size"},
             "generation.max_new_tokens", "generation.engine", {"path": "generation.server.command", "name": "--server-command"},
             "filter", "train_with_fewshot"),
    *options(RunTaskOptions, "per_iteration", "pool_size", "n_dev"),
    *options(StarConfig, "generation.threads", {"path": "report_to", "type": str}, "checkpoint_every"),
    *options(RunTaskOptions, "prompts"),
    *options(StarConfig, "seed", "train_seed"),
]


def _digits(value: str) -> tuple[int, int]:
    lo, _, hi = value.partition("-")
    try:
        return int(lo), int(hi or lo)
    except ValueError:
        raise typer.BadParameter(f"expected N or N-M, got {value!r}") from None


def _apply_options(data: dict[str, Any], given: GivenOptions) -> None:
    """``--set`` and the named options over ``data`` (a StarConfig as a dict): options not given change nothing."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..star.tasks import task_class, task_option_types

    given.apply(StarConfig, data)
    task = data.get("task") or StarConfig.model_fields["task"].default
    takes = task_option_types(task_class(task))
    for name, value in given.fields(RunTaskOptions).items():
        if name == "digits":
            if not value:
                continue
            values = dict(zip(("min_digits", "max_digits"), _digits(value), strict=True))
        else:
            values = {name: value}
        for key, v in values.items():
            target = key if key in takes else f"{key}_per_digit" if f"{key}_per_digit" in takes else None
            if target is None:
                known = ", ".join(sorted(takes.keys() - {"dataset"}))
                raise typer.BadParameter(f"not {task}: it takes no {key} (its options: {known})",
                                         param_hint="--" + name.replace("_", "-"))
            set_path(data, "task_options." + target, v)


@star_app.command("run")
@config_options(RUN_OPTIONS, after="config")
def run(
    out: Path = typer.Option(..., "--out", help="Run directory (config, iter_N/ artifacts, metrics.json, plots/)."),
    config: Path | None = typer.Option(None, "--config", help="YAML run config: a file, or the name of a shipped one "
                                       "(e.g. arithmetic_fresh; thoughtsource star configs lists them); command-line options win."),
    seeds: str | None = typer.Option(None, "--seeds", help="Repeat the run per seed (e.g. 0,1,2 or 0-4) into OUT/seed_<s>/, then write OUT/aggregate.json."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in --out from its last complete step."),
    as_json: bool = typer.Option(False, "--json", help="Print the final summary as JSON on stdout (progress and logs stay on stderr)."),
    *,
    given: GivenOptions,
) -> None:
    """Run STaR (or a baseline) and write metrics, rationales, checkpoints and plots under --out."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..star.seeds import parse_seeds, run_seeds, seed_dir

    if not out.is_file():  # (a file there is the loop's ConfigError: --out is the run's folder)
        check_out(out, folder=True)  # before a model is loaded or trained
    seed_list = parse_seeds(seeds) if seeds is not None else None
    if seed_list is not None and "seed" in given.fields(StarConfig):
        raise typer.BadParameter("give --seed or --seeds, not both", param_hint="--seeds")
    resumed = out / "config.json" if seed_list is None else seed_dir(out, seed_list[0]) / "config.json"
    data: dict[str, Any] = {}
    if config is not None:
        data = StarConfig.from_file(config).model_dump(mode="json", exclude_unset=True)
    elif resume and resumed.exists():
        data = StarConfig.from_file(resumed).model_dump(mode="json")
    _apply_options(data, given)
    cfg = StarConfig.from_dict(data, path=str(config_path(config)) if config else None)
    with _results_to_stdout(as_json), graceful_sigint():  # Ctrl-C while the model decodes: stop between steps
        if seed_list is None:
            from ..star import loop

            summary = loop.run_star(cfg, out, resume=resume)
        else:
            summary = run_seeds(cfg, out, seed_list, resume=resume)
    from ..star import dist

    if not dist.is_main():  # under `accelerate launch` rank 0 reports
        return
    written = out / ("metrics.json" if seed_list is None else "aggregate.json")
    console.print(f"wrote {written} and plots under {out / 'plots'}")
    if as_json:
        _print_json(run_result(out, summary))
    else:
        _print_summary(summary)


def run_result(out: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """What ``star run --json`` prints: the run's statistics (:func:`star.analysis.accuracy.run_stats`) and its summary."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..star.analysis.accuracy import run_stats

    return {"out": str(out), "seeds": summary.get("seeds"), "config": summary["config"],
            "stats": run_stats(summary), "summary": summary}


@contextlib.contextmanager
def _results_to_stdout(as_json: bool) -> Iterator[None]:
    """With --json, stdout carries only the JSON: anything printed while running goes to stderr."""
    if not as_json:
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield


def _finite(x: Any) -> Any:
    """NaN/inf (a diverged loss) as null, so that stdout is strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(_finite(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    sys.stdout.flush()


def _stdout() -> Any:
    from rich.console import Console

    c = Console()
    return c if c.is_terminal else Console(width=200)


def _print_tables(tables: list[Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    out = _stdout()
    for t in tables:
        table = Table(title=t.title, title_justify="left")
        for h in t.headers:
            table.add_column(h)
        for row in t.rows:
            table.add_row(*(Text(c) for c in row))
        out.print(table)
        for note in t.notes:
            out.print(Text(note, style="dim"))


def _print_summary(summary: dict[str, Any]) -> None:
    """The training funnel, then accuracy ± interval per iteration, the best iteration and iteration 0 comparisons."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..star.analysis import compare_runs as report

    pseudo = any(m.get("train_target") == "pseudo_label" for m in summary["iterations"])
    acc = "train acc vs pseudo-labels (before → after rat.)" if pseudo else "train acc (before → after rat.)"
    funnel = report.Table("STaR training", ["iter", acc, "kept (rationalized)", "steps"], [])
    for m in summary["iterations"] if "seeds" not in summary else []:  # the funnel of one run, not of pooled seeds
        if m["iteration"] and "train_n" in m:
            before, after = m.get("train_accuracy_before_rationalization"), m.get("train_accuracy_after_rationalization")
            funnel.rows.append([str(m["iteration"]), f"{before} → {after}", f"{m.get('kept')} ({m.get('kept_rationalized')})",
                                str(m.get("steps") or "")])
    runs = {"run" if "seeds" not in summary else f"{len(summary['seeds'])} seeds": summary}
    _print_tables([t for t in [funnel, *report.tables(runs)] if t.rows])


@star_app.command("configs")
def configs(as_json: bool = typer.Option(False, "--json", help="Names, files and descriptions as JSON on stdout.")) -> None:
    """The run configs shipped in the package, for ``star run --config NAME``: name and what it runs."""
    rows = []
    for name in config_names():
        path = CONFIGS_DIR / f"{name}.yaml"
        comments = [line[1:].strip() for line in path.read_text(encoding="utf-8").splitlines()[:8] if line.startswith("#")]
        described = [c for c in comments if "thoughtsource star run" not in c]
        rows.append({"name": name, "path": str(path), "description": described[0] if described else ""})
    if as_json:
        _print_json(rows)
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        typer.echo(f"{r['name']:{width}}  {r['description']}")


@star_app.command("base")
def base(
    out: Path = typer.Option(..., "--out", help="The model folder to write (config.json, model.safetensors, tokenizer, thoughtsource_base.json)."),
    config: Path | None = typer.Option(None, "--config", help="YAML recipe (e.g. configs/star/bootstrap/base.yaml): task_options, architecture, data, training, seed."),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the initial weights, the data and the training (overrides the config's)."),
    steps: int | None = typer.Option(None, "--steps", help="Training steps (overrides the config's)."),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads (1 when several builds run side by side)."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted build (OUT.work/), or keep a finished one."),
    as_json: bool = typer.Option(False, "--json", help="Print thoughtsource_base.json on stdout (progress and logs stay on stderr)."),
) -> None:
    """Build a LLaMA-shaped model with a character tokenizer and train it on gold scratchpads of easy problems.

    The folder it writes is an ordinary Hugging Face model: ``--model FOLDER`` takes it in ``star run``,
    ``generate`` and ``serve-model``.  Its accuracy per digit count (dev set) is printed and kept in
    ``thoughtsource_base.json``.
    """
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..star.scratch_model import BaseConfig, build_base

    check_out(out.parent, folder=True)
    data: dict[str, Any] = BaseConfig.from_file(config).model_dump(mode="json") if config else {}
    if seed is not None:
        data["seed"] = seed
    if steps is not None:
        data.setdefault("training", {})["steps"] = steps
    cfg = BaseConfig.from_dict(data, path=str(config) if config else None)
    with _results_to_stdout(as_json):
        info = build_base(cfg, out, resume=resume, threads=threads)
    console.print(f"wrote the base model to {out} ({info['parameters']:,} parameters)")
    if as_json:
        _print_json(info)
        return
    from ..star.analysis import compare_runs as report

    table = report.Table(f"base model {out.name}: dev accuracy per digit count (k = {info['k']})", ["digits", "correct", "accuracy"], [])
    for group, (k, n) in info["dev_correct_by_group"].items():
        table.rows.append([group, f"{k}/{n}", f"{k / n:.3f}" if n else "-"])
    _print_tables([table])


@star_app.command("compare")
def compare(
    runs: list[str] = typer.Argument(..., help="Runs: NAME=DIR (or a bare DIR); DIR holds metrics.json (one run) or aggregate.json (--seeds), or is a metrics JSON file."),
    out: Path | None = typer.Option(None, "--out", help="Also write the plot (test accuracy per iteration, Wilson 95 % bars) to this PNG."),
    group: str | None = typer.Option(None, "--group", help="Compare one group's accuracy (e.g. 2-digit)."),
    reference: str | None = typer.Option(None, "--reference", help="The arm the others are tested against (default: the first)."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Also write the tables as Markdown to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON on stdout instead of tables."),
) -> None:
    """Several runs side by side: accuracy ± Wilson interval per iteration, the best iteration (on dev),
    and each run against the reference and against its own iteration 0 (Fisher's exact test)."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..star.analysis import compare_runs as report

    for path in (out, markdown):
        if path is not None:
            check_out(path)
    loaded = report.load_arms(runs)
    result = report.comparison(loaded, reference, group)  # validates --reference before anything is written
    if out is not None:
        from ..star.analysis.plots import plot_compare

        console.print(f"wrote {plot_compare(loaded, out, group=group)}")
    if markdown is not None:
        _write_text(markdown, report.markdown(loaded, reference, group))
    if as_json:
        _print_json(result)
    else:
        _print_tables(report.tables(loaded, reference, group))


@star_app.command("report")
def report_cmd(
    runs: list[str] = typer.Argument(..., help="Runs: NAME=DIR (or a bare DIR or metrics JSON file), as for star compare."),
    out: Path = typer.Option(..., "--out", help="Markdown file to write."),
    reference: str | None = typer.Option(None, "--reference", help="The arm the others are tested against (default: the first)."),
    group: str | None = typer.Option(None, "--group", help="Report one group's accuracy (e.g. 2-digit)."),
    title: str | None = typer.Option(None, "--title", help="A ## heading above the tables."),
) -> None:
    """The Markdown tables of a STaR report (docs/star-results.md): accuracies with intervals, best
    iterations, significance of each comparison, per-group tables, seeds and rationale filter counts."""
    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..star.analysis import compare_runs as report

    check_out(out)
    _write_text(out, report.markdown(report.load_arms(runs), reference, group, title=title))


@star_app.command("audit")
def audit(
    run_dir: Path = typer.Argument(..., metavar="RUN", help="A STaR run folder (config.json, iter_N/)."),
    sample: int = typer.Option(64, "--sample", min=0, help="Rows regenerated per step (0: every row)."),
    seed: int | None = typer.Option(None, "--seed", help="Which rows (default: a fresh random seed, printed in the report)."),
    threads: int = typer.Option(1, "--threads", min=1, help="torch CPU threads while regenerating."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
) -> None:
    """Regenerate a sample of every logged generation from the checkpoint that made it (greedy, no store) and compare
    texts and fingerprints with the log; exit status 1 when anything differs."""
    import secrets

    # imported when the command runs, not at CLI start: `thoughtsource --help` stays fast
    from ..star.audit import regenerate_sample

    with _results_to_stdout(as_json):
        rep = regenerate_sample(run_dir, sample or None, secrets.randbelow(2**31) if seed is None else seed, threads=threads)
    if as_json:
        _print_json({**rep.model_dump(mode="json"), "ok": rep.ok, "problems": rep.problems()})
    else:
        typer.echo(rep.summary())
    if not rep.ok:
        raise typer.Exit(1)


def _write_text(path: Path, text: str) -> None:
    with atomic_write(path) as fh:
        fh.write(text)
    console.print(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.add_typer(star_app, name="star")
