"""Published model-generated CoTs attached to dataset samples as ``generated_cot`` entries.

Kojima et al. (2022) published the logs of their zero-shot-CoT runs (text-davinci-002, "Let's think step
by step.") for the test sets of several datasets.  :func:`attach_published_cots` matches each log
record to a sample by normalized question text (the answer-choice list the authors appended to the
question is dropped, case, white space and punctuation are ignored) and appends the record as a
:class:`~thoughtsource.schema.GeneratedCot` (via :mod:`.cot_logs`).  Matching by text, not by position,
is deliberate: the logs are not in dataset order.  Repeated questions are paired in order.

The logs are optional raw files: :func:`sources` lists them per dataset spec and split, ``datasets.load``
picks up the ones present locally (``load(..., published_cots=False)`` turns this off) and includes
their checksums in the converted-cache key.  The match rate is logged and returned.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..schema import Sample
from ._base import DatasetSpec, SourceFile
from .cot_logs import KojimaRecord, read_kojima_log, to_generated_cot

log = logging.getLogger(__name__)


_CHOICES_TAIL = re.compile(r"\s*Answer Choices:\s*\(A\).*$", re.DOTALL)
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalize_question(text: str) -> str:
    """Matching key of a question: no appended answer choices, NFKC, lower case, only letters and digits."""
    text = _CHOICES_TAIL.sub("", text)
    text = unicodedata.normalize("NFKC", text).casefold()
    return _NON_WORD.sub(" ", text).strip()


def sources(ds: DatasetSpec, split: str) -> list[SourceFile]:
    """The published-CoT logs for one split of a dataset ([] when there are none): its spec's ``published_cots``."""
    return [s for s in ds.published_cots if not s.splits or split in s.splits]


@dataclass(frozen=True)
class MatchReport:
    dataset: str
    split: str
    log: str
    records: int  # records in the log
    matched: int  # records attached to a sample
    samples: int  # samples in the split

    @property
    def rate(self) -> float:
        """Share of the log's records that found their sample."""
        return self.matched / self.records if self.records else 0.0


def attach_published_cots(
    ds: DatasetSpec, split: str, samples: Sequence[Sample], files: Mapping[str, Path]
) -> list[MatchReport]:
    """Append the published CoTs of ``files`` (source name → local log path) to matching ``samples`` of a split of
    the dataset ``ds`` in place.

    A generated CoT already present (same id) is not added twice.  Returns one report per log.
    """
    dataset = ds.name
    reports: list[MatchReport] = []
    for source in sources(ds, split):
        path = files.get(source.name)
        if path is None:
            continue
        records = read_kojima_log(path)
        by_question: dict[str, deque[KojimaRecord]] = defaultdict(deque)
        for rec in records:
            by_question[normalize_question(rec.question)].append(rec)
        matched = 0
        for sample in samples:
            queue = by_question.get(normalize_question(sample.question))
            if not queue:
                continue
            rec = queue.popleft()
            cot = to_generated_cot(rec, sample_id=sample.id)
            if all(c.id != cot.id for c in sample.generated_cot):
                sample.generated_cot.append(cot)
            matched += 1
        report = MatchReport(dataset, split, source.name, len(records), matched, len(samples))
        log.info("%s/%s: attached %d of %d published CoTs from %s (%.1f%%)", dataset, split, matched, len(records),
                 source.name, 100 * report.rate)
        reports.append(report)
    return reports
