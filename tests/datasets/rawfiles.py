"""Run a dataset module's converter straight on raw files (no resolution, no cache)."""

from __future__ import annotations

import importlib
from pathlib import Path

from thoughtsource.schema import Sample


def module(name: str):
    return importlib.import_module(f"thoughtsource.datasets.{name}")


def files_for(name: str, split: str, data_dir: Path) -> dict[str, Path]:
    """SourceFile.name → path under ``data_dir`` for the files of ``split`` that exist there."""
    spec = module(name).SPEC
    out = {}
    for src in spec.sources_for(split):
        path = data_dir / src.name
        if path.exists():
            out[src.name] = path
        elif not src.optional:
            raise FileNotFoundError(path)
    return out


def convert(name: str, split: str, data_dir: Path) -> list[Sample]:
    return list(module(name).convert(files_for(name, split, data_dir), split))


def by_id(samples: list[Sample]) -> dict[str, Sample]:
    return {s.id: s for s in samples}
