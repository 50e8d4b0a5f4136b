"""ServeSettings: every check of a `serve` option happens when the settings are made, before anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from thoughtsource.errors import DataError
from thoughtsource.web.app import ServeSettings as FromApp
from thoughtsource.web.settings import DEFAULT_LABELS, ServeSettings


def test_defaults_and_the_old_import_path(tmp_path: Path) -> None:
    s = ServeSettings(files=[tmp_path / "x.json"], db=tmp_path / "a.sqlite")
    assert FromApp is ServeSettings and s.labels == DEFAULT_LABELS and s.upload_dir == tmp_path / "uploads"


@pytest.mark.parametrize(("labels", "error", "match"), [
    ([], ValidationError, "at least one label"),
    (["a", "a"], ValidationError, "given twice"),
    ([f"l{i}" for i in range(10)], DataError, r"at most 9 labels \(keys 1-9\), got 10"),
    (["good", "comment"], DataError, "not 'comment', 'preferred' or 'reviewed'"),
    (["reviewed"], DataError, "not 'comment', 'preferred' or 'reviewed'"),
])
def test_a_label_set_the_app_cannot_use_is_refused_when_the_settings_are_made(tmp_path: Path, labels: list[str],
                                                                               error: type[Exception], match: str) -> None:
    """The database is not even created: the check no longer waits for create_app (the same error and message)."""
    with pytest.raises(error, match=match):
        ServeSettings(files=[tmp_path / "x.json"], db=tmp_path / "a.sqlite", labels=labels)
    assert not (tmp_path / "a.sqlite").exists()
