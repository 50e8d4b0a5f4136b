"""Run configs: reading YAML files that must hold a mapping (errors name the file).

The published ThoughtSource library's generate config lives with generation:
:mod:`thoughtsource.generation.published`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .errors import ConfigError


def read_yaml_mapping(path: str | os.PathLike[str], expected: str) -> dict[str, Any]:
    """The mapping in a YAML file (an empty file is ``{}``); ConfigError names the file and the problem."""
    import yaml

    p = Path(path)
    try:
        obj = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError("config file not found", path=str(p)) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML: {e}", path=str(p)) from None
    if not isinstance(obj, dict):
        raise ConfigError(f"expected {expected}, got {type(obj).__name__}", path=str(p))
    return obj
