"""Prompt fragments: instructions, CoT triggers and answer-extraction prompts, looked up by id.

The bundled ``fragments.yaml`` holds every fragment of the ThoughtSource paper (same ids, same
texts) plus a few baselines.  Users add their own files with the same layout (YAML or JSON)::

    version: my-1
    instructions: {my-01: "Solve it."}
    cot_triggers: {my-t1: "Answer: Let's go slowly."}
    answer_extractions: {my-a1: "So the final answer is"}

A user fragment may not silently replace a bundled one with a different text: that would make two
CoTs with the same trigger id come from different prompts.  Such a clash is a :class:`ConfigError`.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigError, UnknownNameError
from ..io import read_json

log = logging.getLogger(__name__)

KINDS: tuple[str, ...] = ("instructions", "cot_triggers", "answer_extractions")
_KIND_NAMES = {"instructions": "instruction", "cot_triggers": "CoT trigger", "answer_extractions": "answer extraction"}

#: The answer-extraction pseudo-id that picks the right prompt for each sample (see ``build.auto_extraction``).
AUTO = "auto"


@dataclass(frozen=True)
class Fragments:
    """All known fragments: ``{kind: {id: text}}`` plus the version of the bundled file."""

    version: str
    instructions: dict[str, str] = field(default_factory=dict)
    cot_triggers: dict[str, str] = field(default_factory=dict)
    answer_extractions: dict[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def of_kind(self, kind: str) -> dict[str, str]:
        if kind not in KINDS:
            raise UnknownNameError("fragment kind", kind, KINDS)
        return getattr(self, kind)

    def get(self, kind: str, key: str) -> str:
        table = self.of_kind(kind)
        if key not in table:
            raise UnknownNameError(_KIND_NAMES[kind], key, table)
        return table[key]

    def instruction(self, key: str | None) -> str:
        return "" if key is None else self.get("instructions", key)

    def cot_trigger(self, key: str) -> str:
        return self.get("cot_triggers", key)

    def answer_extraction(self, key: str) -> str:
        return self.get("answer_extractions", key)

    def check(self, kind: str, keys: Iterable[str | None]) -> list[str]:
        """Problems (unknown ids, with suggestions) of ``keys`` of one kind; [] when all exist."""
        table = self.of_kind(kind)
        problems = []
        for k in keys:
            if k is None or (kind == "answer_extractions" and k == AUTO):
                continue
            if k not in table:
                problems.append(str(UnknownNameError(_KIND_NAMES[kind], k, table)))
        return problems


def bundled_path() -> Path:
    return Path(str(resources.files(__package__) / "fragments.yaml"))


def _read(path: Path) -> dict[str, Any]:
    if path.suffix == ".json":
        obj = read_json(path)
    else:
        import yaml

        try:
            obj = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError("fragments file not found", path=str(path)) from None
        except yaml.YAMLError as e:
            raise ConfigError(f"invalid YAML: {e}", path=str(path)) from None
    if not isinstance(obj, dict):
        raise ConfigError(f"expected a mapping with {', '.join(KINDS)}, got {type(obj).__name__}", path=str(path))
    problems = [f"unknown section '{k}' (expected one of {', '.join(KINDS)} or version)" for k in obj if k not in (*KINDS, "version")]
    for kind in KINDS:
        section = obj.get(kind) or {}
        if not isinstance(section, dict):
            problems.append(f"section '{kind}': expected a mapping id -> text, got {type(section).__name__}")
            continue
        problems.extend(f"{kind}.{k}: expected a text, got {type(v).__name__}" for k, v in section.items() if not isinstance(v, str))
    if problems:
        raise ConfigError("invalid fragments file", path=str(path), problems=problems)
    return obj


@lru_cache(maxsize=16)
def _load_cached(paths: tuple[str, ...]) -> Fragments:
    bundled = _read(bundled_path())
    tables: dict[str, dict[str, str]] = {kind: dict(bundled.get(kind) or {}) for kind in KINDS}
    problems: list[str] = []
    for p in paths:
        extra = _read(Path(p))
        for kind in KINDS:
            for key, text in (extra.get(kind) or {}).items():
                have = tables[kind].get(key)
                if have is not None and have != text:
                    problems.append(f"{p}: {kind}.{key} differs from the already loaded text; give it a new id")
                tables[kind][key] = text
    if problems:
        raise ConfigError("conflicting fragment ids", problems=problems)
    return Fragments(version=str(bundled["version"]), sources=(str(bundled_path()), *paths), **tables)


def load_fragments(user_files: Sequence[str | os.PathLike[str]] = ()) -> Fragments:
    """The bundled fragments plus any user files (YAML or JSON, same layout)."""
    return _load_cached(tuple(str(Path(p).resolve()) for p in user_files))


def combinations(
    instruction_keys: Sequence[str | None], cot_trigger_keys: Sequence[str], answer_extraction_keys: Sequence[str]
) -> Iterator[tuple[str | None, str, str]]:
    """Every (instruction, trigger, answer extraction) combination, in the given order."""
    yield from itertools.product(instruction_keys, cot_trigger_keys, answer_extraction_keys)


def combination_name(instruction: str | None, cot_trigger: str | None, answer_extraction: str | None) -> str:
    """The name evaluation uses for a combination: ``qa-01_kojima-01_kojima-A-D`` (None for a missing part)."""
    return "_".join(str(x) for x in (instruction, cot_trigger, answer_extraction))


__all__ = [
    "AUTO",
    "KINDS",
    "Fragments",
    "bundled_path",
    "combination_name",
    "combinations",
    "load_fragments",
]
