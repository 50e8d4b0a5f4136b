"""Run configs: reading YAML files that must hold a mapping (errors name the file).

The published ThoughtSource library's generate config lives with generation:
:mod:`thoughtsource.generation.published`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .errors import ConfigError


def _strict_loader() -> Any:
    """yaml's SafeLoader refusing a key given twice in one mapping (yaml keeps the last one silently)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
                if isinstance(key, str | int | float | bool) and key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"the key '{key}' is given twice",
                                                            key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def yaml_problem(e: Exception) -> str:
    """A YAML parse error in one line: where (line, column) and what, without yaml's multi-line excerpt."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    context = getattr(e, "context", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML{where}: {problem}" + (f" ({context})" if context else "")


def read_yaml_mapping(path: str | os.PathLike[str], expected: str) -> dict[str, Any]:
    """The mapping in a YAML file (an empty file is ``{}``); ConfigError names the file and the problem, in one line."""
    import yaml

    p = Path(path)
    try:
        obj = yaml.load(p.read_text(encoding="utf-8"), Loader=_strict_loader()) or {}  # a SafeLoader
    except FileNotFoundError:
        raise ConfigError("config file not found", path=str(p)) from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); a YAML config is UTF-8",
                          path=str(p)) from None
    except yaml.YAMLError as e:
        raise ConfigError(yaml_problem(e), path=str(p)) from None
    if not isinstance(obj, dict):
        raise ConfigError(f"expected {expected}, got {type(obj).__name__}", path=str(p))
    return obj
