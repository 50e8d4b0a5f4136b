"""Where thoughtsource keeps its state, and where it reads raw data.

* ``data_env()``: $THOUGHTSOURCE_DATA, the one variable naming the folder of raw data (``gsm8k/test.jsonl``,
  ``thoughtsource_examples/...``; the layout of ``shared/data``), honoured by every command.  The old name
  $THOUGHTSOURCE_SHARED_DATA is still read when $THOUGHTSOURCE_DATA is not set.
* ``home()``: $THOUGHTSOURCE_HOME or the user data dir: secrets, users, default databases.
* ``cache_dir()``: $THOUGHTSOURCE_CACHE, else ``$THOUGHTSOURCE_HOME/cache`` when $THOUGHTSOURCE_HOME is set, else
  the user cache dir: raw downloads, converted datasets, converted model weights.  Derived data only: safe to delete.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The raw-data variable, and the name it had before (read when the new one is not set).
DATA_ENV = "THOUGHTSOURCE_DATA"
OLD_DATA_ENV = "THOUGHTSOURCE_SHARED_DATA"


def data_env() -> Path | None:
    """The raw-data folder the user named ($THOUGHTSOURCE_DATA, else $THOUGHTSOURCE_SHARED_DATA), or None."""
    for name in (DATA_ENV, OLD_DATA_ENV):
        value = os.environ.get(name)
        if value:
            return Path(value).expanduser()
    return None


def home() -> Path:
    env = os.environ.get("THOUGHTSOURCE_HOME")
    if env:
        p = Path(env)
    else:
        from platformdirs import user_data_dir

        p = Path(user_data_dir("thoughtsource"))
    p.mkdir(parents=True, exist_ok=True)
    return p


def cache_dir(*parts: str) -> Path:
    env = os.environ.get("THOUGHTSOURCE_CACHE")
    if env:
        p = Path(env)
    elif os.environ.get("THOUGHTSOURCE_HOME"):
        p = home() / "cache"
    else:
        from platformdirs import user_cache_dir

        p = Path(user_cache_dir("thoughtsource"))
    p = p.joinpath(*parts)
    p.mkdir(parents=True, exist_ok=True)
    return p
