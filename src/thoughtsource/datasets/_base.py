"""What a dataset module declares: its spec (metadata + raw source files) and a converter.

A dataset module ``thoughtsource/datasets/<name>.py`` defines::

    SPEC = DatasetSpec(
        name="gsm8k", description="...", homepage="...", citation="...", license="MIT",
        answer_type="number", splits=("train", "test"),
        sources=(SourceFile("train.jsonl", url="https://...", sha256="...", size=4166206, format="jsonl"), ...),
        converter_version=1,
    )

    def convert(files: dict[str, Path], split: str) -> Iterator[Sample]: ...

``files`` maps each ``SourceFile.name`` (a relative path such as ``"gsm8k/train.jsonl"``) to a local,
checksum-verified path.  ``convert`` reads only those raw files and uses the helpers of ``_parse.py``.
Resolution (data_dir → $THOUGHTSOURCE_DATA → user cache; download + verify) and the converted cache
(Parquet keyed by source checksums + converter version) are shared and live in ``_resolve.py`` /
``_cache.py``; a module never re-implements them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..schema import AnswerType, Sample


@dataclass(frozen=True)
class SourceFile:
    """One raw file of a dataset, as published by its authors."""

    name: str  # relative path under the data dir, e.g. "gsm8k/train.jsonl"
    url: str  # canonical download URL
    sha256: str
    size: int  # bytes
    format: str = ""  # jsonl, json, csv, tsv, xml, zip, log, txt
    splits: tuple[str, ...] = ()  # splits that need this file; () = every split
    optional: bool = False  # extra material (e.g. published CoT logs); the dataset loads without it


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    description: str
    homepage: str
    citation: str
    license: str
    answer_type: AnswerType
    splits: tuple[str, ...]
    sources: tuple[SourceFile, ...]
    converter_version: int = 1
    paper_counts: dict[str, int] = field(default_factory=dict)  # Table 6 of the ThoughtSource paper, per split or "total"
    counts: dict[str, int] = field(default_factory=dict)  # samples per split this converter yields from the pinned raw files
    verified_on_real_data: bool = True  # False when only a synthetic fixture in the raw format was available

    def sources_for(self, split: str) -> list[SourceFile]:
        return [s for s in self.sources if not s.splits or split in s.splits]


Converter = Callable[[dict[str, Path], str], Iterator[Sample]]
