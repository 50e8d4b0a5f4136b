"""The settings of ``thoughtsource serve``, validated in one place: every check of a value a user gives (label set,
page size, threshold, ...) is here, when the settings are made, before any file or database is opened."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import paths
from ..errors import DataError
from .similarity import DEFAULT_THRESHOLD

DEFAULT_LABELS = ["Incorrect reasoning", "Insufficient knowledge", "Incorrect reading comprehension", "Too verbose"]
MAX_LABELS = 9  # toggled by the keys 1-9
RESERVED_KEYS = ("comment", "preferred", "reviewed")  # annotation keys of their own, never a label
_HOST_PORT = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::([0-9]{1,5}))?")


def host_name(header: str) -> str | None:
    """The host of a Host header, lower-cased and without its port: ``[::1]:8000`` → ``::1``, ``Example.org:80`` →
    ``example.org``.  Only a host and an optional port: a name (letters, digits, ``-``, ``_``, ``.``), an IPv4
    address or a bracketed IPv6 address, then ``:`` and 1-5 digits.  Anything else is None (refused):
    ``127.0.0.1:8000@evil.example`` (issue 42: it was read as 127.0.0.1 and served), a user part, a path, spaces."""
    m = _HOST_PORT.fullmatch(header.lower())
    if m is None or (m.group(2) is not None and int(m.group(2)) > 65535):
        return None
    host = m.group(1)
    if host.startswith("["):
        try:
            return str(ipaddress.IPv6Address(host[1:-1]))
        except ValueError:
            return None
    return host


def allowed_host(entry: str) -> str:
    """One ``--allowed-hosts`` entry as the host the Host check compares: ``*``, a bare IPv6 address, or what
    :func:`host_name` reads (a port given is ignored).  Anything else is refused: ``http://annotate.example.org``
    is a URL, not a host (it used to become the host ``http``, and every request was refused)."""
    entry = entry.strip()
    if entry == "*":
        return entry
    try:
        return str(ipaddress.IPv6Address(entry))
    except ValueError:
        pass
    host = host_name(entry)
    if host is None or not host.strip("."):
        raise ValueError(f"{entry!r} is not a host name: give the host alone, e.g. 'annotate.example.org' "
                         "(no scheme, user or path)")
    return host


class ServeSettings(BaseModel):
    """Settings of ``thoughtsource serve``."""

    model_config = ConfigDict(extra="forbid")

    files: list[Path] = Field(description="ThoughtSource JSON/JSONL/Parquet files to serve (merged).")
    db: Path = Field(default_factory=lambda: paths.home() / "annotations.sqlite", description="Annotation database (SQLite).")
    labels: list[str] = Field(default_factory=lambda: list(DEFAULT_LABELS), description="Label set, toggled by keys 1-9.")
    page_size: int = Field(25, ge=1, le=500, description="Samples per list page.")
    secure_cookies: bool = Field(False, description="Mark cookies Secure (set when served over HTTPS).")
    secret_dir: Path | None = Field(None, description="Where the secret key lives (default: paths.home()).")
    blind: bool = Field(False, description="Blind review for the whole server: annotators see no model, trigger, "
                                           "correctness or gold answer, and each sees a sample's CoTs under their own "
                                           "names, in their own order (both keyed with the server's secret).")
    blind_show_gold: bool = Field(False, description="During blind review, still show the gold answer and reference "
                                                     "CoT (which tell which CoTs are right): for teams that want it.")
    similarity_threshold: float = Field(DEFAULT_THRESHOLD, ge=0.05, le=1.0,
                                        description="Initial threshold of the similar-sentence highlighting.")
    allowed_hosts: list[str] | None = Field(None, description="Serve only requests whose Host header names one of "
                                            "these (the port aside); None: any (``serve`` sets it, see default_allowed_hosts).")
    upload_dir: Path | None = Field(None, description="Where files uploaded by admins are kept and served from on the "
                                                      "next start (default: an 'uploads' folder next to the database).")

    @field_validator("allowed_hosts")
    @classmethod
    def _allowed_hosts(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [allowed_host(h) for h in v]

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("give at least one label")
        if dup := next((x for i, x in enumerate(v) if x in v[:i]), None):
            raise ValueError(f"the label {dup!r} is given twice")
        # (DataError, not ValueError: pydantic passes it on as it is, the one-line error create_app gave before)
        if len(v) > MAX_LABELS:
            raise DataError(f"at most {MAX_LABELS} labels (keys 1-{MAX_LABELS}), got {len(v)}", field="labels")
        if any(k in RESERVED_KEYS for k in v):
            raise DataError("labels must be distinct and not 'comment', 'preferred' or 'reviewed'", field="labels")
        return v

    def model_post_init(self, __context: Any) -> None:
        if self.upload_dir is None:
            self.upload_dir = self.db.parent / "uploads"
