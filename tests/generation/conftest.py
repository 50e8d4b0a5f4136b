"""Shared by the generation tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def _without_dates(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    for splits in data.values():
        for samples in splits.values():
            for x in samples:
                for g in x["generated_cot"]:
                    g.pop("date")
    return data


@pytest.fixture
def without_dates() -> Callable[[Path], dict[str, Any]]:
    """A written ThoughtSource JSON file as data, without the generated CoTs' dates (which differ between runs)."""
    return _without_dates
