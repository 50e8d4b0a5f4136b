"""The package's import graph keeps the layer order and has no cycles: ``lint-imports`` with the contracts of
pyproject.toml (``[tool.importlinter]``), so the suite fails on a cycle or an upward import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import thoughtsource

pytest.importorskip("importlinter", reason="import-linter is a dev dependency (the dev extra)")

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept() -> None:
    src = str(Path(thoughtsource.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    run = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                               "sys.exit(lint_imports(no_cache=True, no_logo=True))"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout
