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
from typing import NamedTuple

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


#: Where Kojima et al. (2022) published their zero-shot-CoT logs, at the commit we pinned.
KOJIMA_LOGS = "https://raw.githubusercontent.com/kojima-takeshi188/zero_shot_cot/5ef330fcdeec0cd26aee27943504f91f8ec1c33c/log"


def kojima_log(stem: str, sha256: str, size: int, split: str) -> SourceFile:
    """One published zero-shot-CoT log of Kojima et al. (an optional raw file of the split it answers)."""
    return SourceFile(f"kojima_logs/{stem}_zero_shot_cot.log", f"{KOJIMA_LOGS}/{stem}_zero_shot_cot.log", sha256, size, "log",
                      (split,), optional=True)


class PaperTable6(NamedTuple):
    """A dataset's row of the ThoughtSource paper's Table 6."""

    samples: int
    with_reference_cot: int  # examples with human reference CoTs
    with_generated_cot: int  # examples with AI-generated CoTs
    generated_cots: int  # number of AI-generated CoTs
    answer_type: str


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
    paper_table6: PaperTable6 | None = None  # the dataset's row of the paper's Table 6 (reporting.stats compares with it)
    published_cots: tuple[SourceFile, ...] = ()  # published model-generated CoT logs (optional), attached by published_cots

    def sources_for(self, split: str) -> list[SourceFile]:
        return [s for s in self.sources if not s.splits or split in s.splits]


Converter = Callable[[dict[str, Path], str], Iterator[Sample]]
