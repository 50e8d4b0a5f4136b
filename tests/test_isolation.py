"""No test depends on the order the tests run in: what one test's in-process CLI run does to the process's logging is
put back before the next (``tests/conftest.py``).  The two tests below run in this order on one worker (pytest-xdist
``--dist loadfile`` keeps a file on one worker, in file order); without the put-back the second fails."""

from __future__ import annotations

import logging
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
