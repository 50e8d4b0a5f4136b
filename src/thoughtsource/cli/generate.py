"""``generate``: CoTs and answers for a dataset or a file, with any backend, cached and resumable."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import typer

from ..collection import Collection
from ..config import read_yaml_mapping
from ..console import note, print_json, stdout
from ..errors import ConfigError, DataError, GenerationFailed
from ..generation import GenerateReport, generate, generate_entries
from ..generation.config import GenerateConfig
from ..io import FileSamples, check_out, iter_entries, write_entries
from .config_options import GivenOptions, apply_sets, config_options, options

log = logging.getLogger(__name__)


def _load_yaml(path: Path) -> dict[str, Any]:
    return read_yaml_mapping(path, "a mapping of GenerateConfig fields")


def select_samples(full: Any, split: str | None, n_samples: int | None, seed: int, flag: str = "--limit") -> Any:
    """The samples to generate for; a split no dataset has is an error (``Collection.select``), a too-large
    ``n_samples`` a warning (naming ``flag``, the option the user gave)."""
    selected = full.select(split=split, number_samples=n_samples, seed=seed)
    if n_samples is not None:
        for d, splits in selected.data.items():
            for s, xs in splits.items():
                if len(xs) < n_samples:
                    log.warning("%s %d: %s/%s has only %d samples; generating for all %d", flag, n_samples, d, s, len(xs), len(xs))
    return selected


def old_name(value: Any, old_value: Any, name: str, old: str) -> Any:
    """An option with a hidden old name (``--n-samples`` for ``--limit``): either, not both."""
    if old_value is None:
        return value
    if value is not None:
        raise typer.BadParameter(f"give {name} or its old name {old}, not both", param_hint=f"'{name}'")
    return old_value


#: ``generate``'s named options that set a GenerateConfig field, in the order of its --help
GENERATE_OPTIONS = options(
    GenerateConfig,
    {"path": "instruction_keys", "name": "--instructions", "csv": True},
    {"path": "cot_trigger_keys", "name": "--triggers", "csv": True},
    {"path": "answer_extraction_keys", "name": "--extractions", "csv": True},
    "backend", {"path": "base_urls", "name": "--base-url"}, "model", "chat", "n", "temperature", "max_tokens",
    "answer_max_tokens", "few_shot", "few_shot_split", "concurrency", "batch_size",
    {"path": "fragments_files", "name": "--fragments"}, "author", "seed", "db", "allow_empty",
)


@config_options(GENERATE_OPTIONS, after="config")
def generate_cmd(
    dataset: list[str] = typer.Option(None, "--dataset", "-d", help="Registered dataset(s) to load (e.g. gsm8k)."),
    file: Path = typer.Option(None, "--file", "-f", help="A ThoughtSource JSON/JSONL/Parquet file instead of --dataset."),
    data_dir: Path = typer.Option(None, "--data-dir", help="Folder of raw dataset files (default: $THOUGHTSOURCE_DATA / cache)."),
    split: str = typer.Option(None, "--split", help="Split to generate for (default: every split)."),
    limit: int = typer.Option(None, "--limit", min=1, help="How many samples: a random subset of this many per dataset "
                                                          "and split (seeded by --select-seed). Not --n (CoTs per prompt)."),
    n_samples: int = typer.Option(None, "--n-samples", min=1, hidden=True, help="Old name of --limit."),
    select_seed: int = typer.Option(0, "--select-seed", help="Seed of the sample subset."),
    out: Path = typer.Option(None, "--out", "-o", help="Output ThoughtSource JSON (written atomically); required unless --dry-run."),
    config: Path = typer.Option(None, "--config", help="YAML file of GenerateConfig fields (flags win over it)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only print the number of calls and estimated tokens."),
    as_json: bool = typer.Option(False, "--json", help="A run summary as JSON on stdout (requests, cached, called, failures, "
                                                      "attached CoTs and answers, the output file); logs stay on stderr."),
    reasoning_effort: str = typer.Option(None, "--reasoning-effort",
                                         help="Reasoning budget of a reasoning model (low, medium, high; openai backend)."),
    reasoning_max_tokens: int = typer.Option(None, "--reasoning-max-tokens", min=1,
                                             help="Reasoning token budget (openai backend: vLLM's thinking_token_budget, "
                                                  "OpenRouter's reasoning.max_tokens)."),
    think_tags: str = typer.Option(None, "--think-tags",
                                   help="Start and end tag of inline reasoning, comma-separated (default <think>,</think> for "
                                        "openai; transformers splits only when given)."),
    *,
    given: GivenOptions,
) -> None:
    """Generate CoTs and extracted answers; completions are cached in SQLite, so a rerun only fills gaps.

    Example: thoughtsource generate --dataset gsm8k --split test --limit 20 --triggers kojima-01,none
    --backend openai --base-url http://127.0.0.1:8000/v1 --model NAME --out gsm8k_20.json
    """
    if bool(dataset) == bool(file):
        raise ConfigError("give either --dataset or --file")
    if out is None and not dry_run:
        raise typer.BadParameter("needed unless --dry-run", param_hint="'--out'")
    if out is not None and not dry_run:
        check_out(out)  # before any data is loaded or any completion asked for
    settings: dict[str, Any] = _load_yaml(config) if config else {}
    if "model" in apply_sets(GenerateConfig, settings, given.sets):
        settings.pop("engine", None)  # the file's published key of the model gives way to the flag's model
    flags = given.fields(GenerateConfig)
    reasoning_options: dict[str, Any] = {"reasoning_effort": reasoning_effort, "reasoning_max_tokens": reasoning_max_tokens}
    if think_tags is not None:
        tags = [t.strip() for t in think_tags.split(",")]
        if len(tags) != 2 or not all(tags):
            raise typer.BadParameter("two tags, comma-separated: START,END", param_hint="'--think-tags'")
        reasoning_options["think_tags"] = tags
    if any(v is not None for v in reasoning_options.values()):
        settings["backend_options"] = {**settings.get("backend_options", {}),
                                       **{k: v for k, v in reasoning_options.items() if v is not None}}
    if "model" in flags:
        settings.pop("engine", None)
    settings.update(flags)
    try:
        cfg = GenerateConfig.parse(settings)
    except ConfigError as e:
        if config is None:
            raise
        raise ConfigError("invalid generate config (this file with the flags on top)", path=str(config), problems=e.problems) from None

    if file and split is None and limit is None and n_samples is None and not dry_run and not cfg.few_shot \
            and cfg.idx_range is None:  # every sample of a file: read, generated for and written a chunk at a time
        _generate_streaming(file, out, cfg, as_json)
        return
    if file:
        full = Collection.load(file)
    else:
        splits = [split] if split else None
        if splits and cfg.few_shot and cfg.few_shot_split not in splits:
            splits.append(cfg.few_shot_split)
        full = Collection.from_datasets(dataset, splits=splits, data_dir=data_dir)
    flag = "--n-samples" if n_samples is not None else "--limit"
    collection = select_samples(full, split, old_name(limit, n_samples, "--limit", "--n-samples"), select_seed, flag)
    if len(collection) == 0:
        raise DataError("no samples to generate for" + (f" (split '{split}')" if split else ""), path=str(file) if file else None)
    report = generate(collection, cfg, dry_run=dry_run, exemplar_pool=full)
    if dry_run:
        if as_json:
            print_json(run_summary(report, None, len(collection)))
        else:
            stdout.print(report.summary(), highlight=False)
        return
    collection.dump(out)
    note(f"wrote {len(collection)} samples to {out}", highlight=False)
    if as_json:
        print_json(run_summary(report, out, len(collection)))
    if report.errors:
        raise GenerationFailed(f"{report.failure_summary()}; the output lacks them. Run the same command again to fill them in",
                               report=report)


def _generate_streaming(file: Path, out: Path, cfg: Any, as_json: bool) -> None:
    """``generate --file F --out O`` over every sample of F: the file is read, generated for and written
    ``generation.CHUNK_SAMPLES`` samples at a time (``generation.generate_entries`` into ``io.write_entries``), so memory
    does not grow with it; the output is what the in-memory path writes, byte for byte."""
    if next(iter(FileSamples(file).samples()), None) is None:
        raise DataError("no samples to generate for", path=str(file))
    report = GenerateReport()
    samples, _ = write_entries(generate_entries(iter_entries(file), cfg, report=report), out, "json")
    note(f"wrote {samples} samples to {out}", highlight=False)
    if as_json:
        print_json(run_summary(report, out, samples))
    if report.errors:
        raise GenerationFailed(f"{report.failure_summary()}; the output lacks them. Run the same command again to fill them in",
                               report=report)


def run_summary(report: Any, out: Path | None, samples: int) -> dict[str, Any]:
    """What ``generate --json`` prints: the :class:`GenerateReport`'s counts, the samples and the output file."""
    import dataclasses

    data = dataclasses.asdict(report)
    return {"out": str(out) if out is not None else None, "samples": samples, "ok": not report.errors, **data}


def register(app: typer.Typer) -> None:
    app.command("generate")(generate_cmd)
