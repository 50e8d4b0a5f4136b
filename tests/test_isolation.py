"""No test depends on the order the tests run in.

- What one test's in-process CLI run does to the process's logging is put back before the next
  (``tests/conftest.py``).  Tests 1 and 2 run in this order on one worker (pytest-xdist ``--dist loadfile`` keeps a
  file on one worker, in file order); without the put-back the second fails.
- What the dataset tests set in the environment (their cache, offline mode) ends with their module
  (``tests/datasets/conftest.py``).  Test 3 checks the environment; the last test runs it in a fresh pytest right after a
  dataset test, so the order is certain.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thoughtsource.cli import app


def test_1_a_quiet_command_through_clirunner(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["-q", "info", str(tmp_path / "missing.json")])
    assert result.exit_code == 1 and "missing.json" in str(result.exception)
    assert logging.getLogger("thoughtsource").level == logging.WARNING  # what -q does, in this process too


def test_2_the_next_test_gets_the_package_info_records(caplog: pytest.LogCaptureFixture) -> None:
    assert logging.getLogger("thoughtsource").level == logging.NOTSET
    with caplog.at_level(logging.INFO):
        logging.getLogger("thoughtsource.generation.published").info("an info record")
    assert [r.getMessage() for r in caplog.records] == ["an info record"]


def test_3_the_environment_is_the_runs_own_not_a_dataset_modules() -> None:
    cache = Path(os.environ["THOUGHTSOURCE_CACHE"])
    assert not cache.name.startswith("ts_cache"), f"a dataset module's cache leaked into this test: {cache}"
    expected = os.environ.get("THOUGHTSOURCE_TEST_EXPECT_CACHE")  # set by the test below, for its inner pytest
    if expected is not None:
        assert str(cache) == expected and "THOUGHTSOURCE_OFFLINE" not in os.environ


def test_a_dataset_module_leaves_the_environment_as_it_found_it(tmp_path: Path) -> None:
    """A dataset test, then test 3, in one pytest process: test 3 failed while the dataset cache was session-scoped."""
    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "THOUGHTSOURCE_OFFLINE"))}
    env.update(THOUGHTSOURCE_CACHE=str(tmp_path / "cache"), THOUGHTSOURCE_TEST_EXPECT_CACHE=str(tmp_path / "cache"))
    here = Path(__file__).relative_to(repo).as_posix()
    tests = ["tests/datasets/test_svamp.py::test_count", f"{here}::test_3_the_environment_is_the_runs_own_not_a_dataset_modules"]
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", *tests],
                         cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "2 passed" in out.stdout, out.stdout[-3000:] + out.stderr[-2000:]
