"""The settings of ``thoughtsource serve``, validated in one place: every check of a value a user gives (label set,
page size, threshold, ...) is here, when the settings are made, before any file or database is opened."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import paths
from ..errors import DataError
from .similarity import DEFAULT_THRESHOLD

DEFAULT_LABELS = ["Incorrect reasoning", "Insufficient knowledge", "Incorrect reading comprehension", "Too verbose"]
MAX_LABELS = 9  # toggled by the keys 1-9
RESERVED_KEYS = ("comment", "preferred", "reviewed")  # annotation keys of their own, never a label


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
