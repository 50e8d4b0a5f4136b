"""Registry of source datasets.

``DATASETS`` maps each name to the module that declares it.  Modules are imported only when used.
The datasets issue fills this registry; :func:`load` is the hook that ``Collection.from_datasets``
calls.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from ..errors import UnknownNameError
from ..schema import Sample

DATASETS: dict[str, str] = {}


def names() -> list[str]:
    return sorted(DATASETS)


def get(name: str) -> Any:
    """The module of a registered dataset."""
    if name not in DATASETS:
        raise UnknownNameError("dataset", name, DATASETS)
    return importlib.import_module(DATASETS[name])


def load(
    name: str, splits: list[str] | None = None, data_dir: str | os.PathLike[str] | None = None, **kwargs: Any
) -> dict[str, list[Sample]]:
    """``{split: [Sample, ...]}`` of a registered dataset."""
    module = get(name)
    return module.load(splits=splits, data_dir=data_dir, **kwargs)
