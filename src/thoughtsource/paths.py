"""Where thoughtsource keeps its state.

* ``home()``: $THOUGHTSOURCE_HOME or the user data dir: secrets, users, default databases.
* ``cache_dir()``: $THOUGHTSOURCE_CACHE or the user cache dir: raw downloads, converted datasets,
  converted model weights.  Derived data only: safe to delete.
"""

from __future__ import annotations

import os
from pathlib import Path


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
    else:
        from platformdirs import user_cache_dir

        p = Path(user_cache_dir("thoughtsource"))
    p = p.joinpath(*parts)
    p.mkdir(parents=True, exist_ok=True)
    return p
