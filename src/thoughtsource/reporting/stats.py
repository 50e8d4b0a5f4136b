"""Dataset statistics: counts, token lengths, vocabulary and n-gram overlap between datasets.

What the ThoughtSource paper reports in Table 6 (counts), Figure 1 (length distributions) and
Figure 2 (n-gram overlap), computed offline and fast:

* **Tokenizers** need no download.  ``"word"`` (default) lower-cases and takes runs of letters/digits
  (``\\w+``, with inner apostrophes: ``don't`` is one token); punctuation is not a token.
  ``"embedded"`` uses the embedded SmolLM2 model's (byte-level BPE) tokenizer via transformers.
* **Lengths** are counted per text: one text per sample for question, context, choices (all choices
  of a sample together) and the reference CoT (its steps together); one text per generated CoT.
  Empty fields are left out, so a summary describes the samples that have the field (``n``).
* **n-gram overlap** between two datasets compares the *sets* of n-grams (within one text, never
  across two texts) of all their splits.  Both measures are reported under their real names:
  the Szymkiewicz–Simpson **overlap coefficient** |A∩B| / min(|A|, |B|) (what the paper's Figure 2
  shows; the published code computed it but called it Jaccard) and the **Jaccard index**
  |A∩B| / |A∪B|.  N-grams are 64-bit hashes (tokens hashed with pandas' SipHash, combined
  polynomially), kept as sorted unique numpy arrays; with a few million n-grams a collision is
  about as likely as 1 in 10^6, far below the two decimals reported.

Library functions compute; :mod:`thoughtsource.reporting.stats_plots` draws; ``thoughtsource stats`` writes both.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from ..console import progress as make_progress
from ..datasets import DATASETS, spec
from ..embedded import embedded_model_dir
from ..errors import ConfigError
from ..io import Entry, FileSamples, data_entries, iter_entries
from ..schema import ANSWER_TYPES

if TYPE_CHECKING:
    from ..collection import Collection
    from ..datasets._base import PaperTable6

log = logging.getLogger(__name__)

FIELDS: tuple[str, ...] = ("question", "context", "choices", "cot", "generated_cot")
"""Text fields whose token lengths are measured (``cot`` = the reference CoT)."""
FIELD_LABELS = {
    "question": "question",
    "context": "context",
    "choices": "choices",
    "cot": "reference CoT",
    "generated_cot": "generated CoT",
}
OVERLAP_FIELDS: tuple[str, ...] = ("question", "cot")
VOCABULARY_FIELDS: tuple[str, ...] = ("question", "context", "choices", "cot")
QUANTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
TOKENIZERS: tuple[str, ...] = ("word", "embedded")

_WORD_RE = re.compile(r"\w+(?:['’]\w+)*")
_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant (golden ratio) for combining token hashes



# --------------------------------------------------------------------------- tokenizers
class Tokenizer(Protocol):
    name: str

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(token_hashes, lengths)``: uint64 hashes of every token of every text, flat, and tokens per text."""
        ...


class WordTokenizer:
    """Lower-cased words and numbers (``\\w+``, inner apostrophes kept); needs nothing but ``re``."""

    name = "word"

    def tokenize(self, text: str) -> list[str]:
        return _WORD_RE.findall(text.lower())

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        toks = [_WORD_RE.findall(t.lower()) for t in texts]
        lengths = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
        flat = np.fromiter(chain.from_iterable(toks), dtype=object, count=int(lengths.sum()))
        codes, distinct = pd.factorize(flat)  # hash each distinct token once
        return pd.util.hash_array(np.asarray(distinct, dtype=object), categorize=False)[codes], lengths


class HFTokenizer:
    """A transformers tokenizer (default: the embedded SmolLM2 model's); special tokens are not counted."""

    def __init__(self, path: str | None = None) -> None:
        from transformers import AutoTokenizer

        self.path = path or str(embedded_model_dir())
        self.name = "embedded" if path is None else f"hf:{self.path}"
        self._tok = AutoTokenizer.from_pretrained(self.path)

    def tokenize(self, text: str) -> list[str]:
        return self._tok.tokenize(text)

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if not texts:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        backend = getattr(self._tok, "backend_tokenizer", None)
        if backend is not None:  # the Rust tokenizer directly: batched, no Python-side BatchEncoding (~2x faster)
            ids = [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]
        else:
            ids = self._tok(list(texts), add_special_tokens=False)["input_ids"]
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(chain.from_iterable(ids), dtype=np.uint64, count=int(lengths.sum()))
        return pd.util.hash_array(flat), lengths


def get_tokenizer(name: str = "word") -> Tokenizer:
    """``"word"`` or ``"embedded"`` (the embedded model's tokenizer; no download)."""
    if name == "word":
        return WordTokenizer()
    if name == "embedded":
        return HFTokenizer()
    raise ConfigError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZERS)}")


# --------------------------------------------------------------------------- n-gram sets and overlap measures
def ngram_hashes(token_hashes: np.ndarray, lengths: np.ndarray, n: int = 3) -> np.ndarray:
    """Sorted unique 64-bit hashes of the n-grams inside each text (none spans two texts).

    ``token_hashes``/``lengths`` as returned by :meth:`Tokenizer.encode`.  Texts shorter than ``n``
    tokens contribute nothing (as in the published code).
    """
    if n < 1:
        raise ConfigError(f"n-gram size must be at least 1, got {n}")
    total = token_hashes.size
    if total < n:
        return np.empty(0, dtype=np.uint64)
    width = total - n + 1
    grams = token_hashes[:width].astype(np.uint64, copy=True)
    for k in range(1, n):
        grams *= _MIX
        grams += token_hashes[k : k + width]
    ends = np.repeat(np.cumsum(lengths), lengths)[:width]  # end offset of the text each position lies in
    valid = np.arange(n, width + n) <= ends
    return unique_sorted(grams[valid])


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort + neighbour compare: several times faster than ``np.unique`` on uint64)."""
    a = np.sort(values)
    if a.size < 2:
        return a
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def intersection_size(a: np.ndarray, b: np.ndarray) -> int:
    """|A ∩ B| of two sorted arrays of unique values."""
    if a.size > b.size:
        a, b = b, a
    if a.size == 0:
        return 0
    idx = np.searchsorted(b, a)
    idx[idx == b.size] = 0
    return int(np.count_nonzero(b[idx] == a))


def overlap_coefficient_from_sizes(intersection: int, size_a: int, size_b: int) -> float:
    """Szymkiewicz–Simpson: |A∩B| / min(|A|, |B|); NaN when a set is empty."""
    smaller = min(size_a, size_b)
    return intersection / smaller if smaller else math.nan


def jaccard_from_sizes(intersection: int, size_a: int, size_b: int) -> float:
    """Jaccard: |A∩B| / |A∪B|; NaN when both sets are empty."""
    union = size_a + size_b - intersection
    return intersection / union if union else math.nan


def overlap_coefficient(a: Iterable[Any], b: Iterable[Any]) -> float:
    """Szymkiewicz–Simpson overlap coefficient of two collections taken as sets."""
    sa, sb = set(a), set(b)
    return overlap_coefficient_from_sizes(len(sa & sb), len(sa), len(sb))


def jaccard(a: Iterable[Any], b: Iterable[Any]) -> float:
    """Jaccard index of two collections taken as sets."""
    sa, sb = set(a), set(b)
    return jaccard_from_sizes(len(sa & sb), len(sa), len(sb))


def pairwise_overlap(ngram_sets: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per unordered pair of datasets (and each with itself): sizes, intersection, both measures."""
    names = list(ngram_sets)
    rows = []
    for i, a in enumerate(names):
        for b in names[i:]:
            sa, sb = ngram_sets[a], ngram_sets[b]
            inter = sa.size if a == b else intersection_size(sa, sb)
            rows.append({
                "dataset_a": a, "dataset_b": b, "ngrams_a": int(sa.size), "ngrams_b": int(sb.size), "intersection": inter,
                "overlap_coefficient": overlap_coefficient_from_sizes(inter, sa.size, sb.size),
                "jaccard": jaccard_from_sizes(inter, sa.size, sb.size),
            })
    return pd.DataFrame(rows, columns=["dataset_a", "dataset_b", "ngrams_a", "ngrams_b", "intersection", "overlap_coefficient", "jaccard"])


def overlap_matrix(pairs: pd.DataFrame, metric: str = "overlap_coefficient", names: Sequence[str] | None = None) -> pd.DataFrame:
    """A symmetric dataset × dataset matrix of ``metric`` from :func:`pairwise_overlap` rows."""
    if names is None:
        names = list(dict.fromkeys([*pairs["dataset_a"], *pairs["dataset_b"]]))
    m = pd.DataFrame(np.nan, index=list(names), columns=list(names))
    for a, b, v in zip(pairs["dataset_a"], pairs["dataset_b"], pairs[metric], strict=True):
        if a in m.index and b in m.index:
            m.loc[a, b] = m.loc[b, a] = v
    return m


# --------------------------------------------------------------------------- the report
@dataclass
class StatsReport:
    """Everything ``thoughtsource stats`` shows.  All tables are pandas DataFrames."""

    tokenizer: str
    n: int
    counts: pd.DataFrame  # dataset, split, samples, per answer type, with_reference_cot, with_generated_cot, generated_cots
    lengths: pd.DataFrame  # dataset, split, field, length: one row per non-empty text
    length_summary: pd.DataFrame  # dataset, split ("all" = every split), field, n, min, q05..q95, mean, max
    vocabulary: pd.DataFrame  # dataset, tokens, vocabulary (distinct tokens over VOCABULARY_FIELDS)
    overlap: dict[str, pd.DataFrame] = field(default_factory=dict)  # field → pairwise_overlap rows
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def datasets(self) -> list[str]:
        return list(dict.fromkeys(self.counts["dataset"]))


def _texts(samples: Sequence[Any], name: str) -> list[str]:
    if name == "question":
        return [x.question or "" for x in samples]
    if name == "context":
        return [x.context or "" for x in samples]
    if name == "choices":
        return ["\n".join(x.choices) for x in samples]
    if name == "cot":
        return [" ".join(x.cot) for x in samples]
    raise ValueError(name)


def count_table(collection: Collection) -> pd.DataFrame:
    """Per dataset and split: samples, samples per answer type, reference and generated CoTs."""
    acc = _Accumulator(get_tokenizer("word"), texts=False)
    for e in data_entries(collection.data):
        acc.add(e)
    return acc.counts()


COUNT_COLUMNS = ["dataset", "split", "samples", *ANSWER_TYPES, "with_reference_cot", "with_generated_cot", "generated_cots"]
#: Texts of one field of one split tokenized at a time.
ENCODE_BATCH = 2048


@dataclass
class _Split:
    """What :func:`compute_stats` keeps of one split: its counts, and per field the token lengths of its texts and (for
    the vocabulary and overlap fields) their token hashes, encoded a batch of texts at a time."""

    samples: int = 0
    types: Counter[str] = field(default_factory=Counter)
    with_reference_cot: int = 0
    with_generated_cot: int = 0
    generated_cots: int = 0
    pending: dict[str, list[str]] = field(default_factory=lambda: {f: [] for f in FIELDS})
    lengths: dict[str, list[np.ndarray]] = field(default_factory=lambda: {f: [] for f in FIELDS})
    hashes: dict[str, list[np.ndarray]] = field(default_factory=lambda: {f: [] for f in FIELDS})


class _Accumulator:
    """Samples in, one at a time (``io.Entry`` items: a file read a sample at a time, or a collection's data), in the
    order :func:`compute_stats` reads them: per dataset, its splits in order of first sight."""

    def __init__(self, tok: Tokenizer, *, texts: bool = True) -> None:
        self.tok, self.texts = tok, texts
        self.data: dict[str, dict[str, _Split]] = {}
        self.t_tok = 0.0

    def add(self, e: Any) -> None:
        splits = self.data.setdefault(e.dataset, {})
        if e.split is None:
            return
        sp = splits.setdefault(e.split, _Split())
        x = e.sample
        if x is None:
            return
        sp.samples += 1
        sp.types[x.type] += 1
        sp.with_reference_cot += any(step.strip() for step in x.cot)
        sp.with_generated_cot += bool(x.generated_cot)
        sp.generated_cots += len(x.generated_cot)
        if not self.texts:
            return
        for name in FIELDS:
            if name == "generated_cot":
                sp.pending[name].extend(c.cot for c in x.generated_cot if c.cot and c.cot.strip())
            else:
                text = _texts([x], name)[0]
                if text.strip():
                    sp.pending[name].append(text)
            if len(sp.pending[name]) >= ENCODE_BATCH:
                self._encode(sp, name)

    def _encode(self, sp: _Split, name: str) -> None:
        texts = sp.pending[name]
        if not texts:
            return
        t = time.perf_counter()
        hashes, lens = self.tok.encode(texts)
        self.t_tok += time.perf_counter() - t
        sp.lengths[name].append(np.asarray(lens, dtype=np.int64))
        if name in VOCABULARY_FIELDS or name in OVERLAP_FIELDS:
            sp.hashes[name].append(hashes)
        sp.pending[name] = []

    def counts(self) -> pd.DataFrame:
        rows = [{"dataset": d, "split": s, "samples": sp.samples, **{t: sp.types.get(t, 0) for t in ANSWER_TYPES},
                 "with_reference_cot": sp.with_reference_cot, "with_generated_cot": sp.with_generated_cot,
                 "generated_cots": sp.generated_cots}
                for d, splits in self.data.items() for s, sp in splits.items()]
        return pd.DataFrame(rows, columns=COUNT_COLUMNS)

    def field(self, d: str, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(token hashes, token lengths, the split of each text) of one field of a dataset, its splits in order."""
        splits = self.data[d]
        for sp in splits.values():
            self._encode(sp, name)
        lens = [np.concatenate(sp.lengths[name]) if sp.lengths[name] else np.empty(0, dtype=np.int64) for sp in splits.values()]
        hashes = [h for sp in splits.values() for h in sp.hashes[name]]
        for sp in splits.values():  # what the tables need is taken: free it as the dataset is done
            sp.lengths[name], sp.hashes[name] = [], []
        labels = np.repeat(np.asarray(list(splits), dtype=object), [len(x) for x in lens]) if splits else np.empty(0, dtype=object)
        flat = np.concatenate(hashes) if hashes else np.empty(0, dtype=np.uint64)
        return flat, np.concatenate(lens) if lens else np.empty(0, dtype=np.int64), labels


def summarize_lengths(lengths: pd.DataFrame) -> pd.DataFrame:
    """min / quantiles / mean / max of ``length`` per dataset, split and field, plus split ``"all"``."""
    qcols = [f"q{round(p * 100):02d}" for p in QUANTILES]
    order = ["dataset", "split", "field", "n", "min", *qcols, "mean", "max"]
    if lengths.empty:
        return pd.DataFrame(columns=order).rename(columns={"q50": "median"})
    both = pd.concat([lengths, lengths.assign(split="all")], ignore_index=True)
    g = both.groupby(["dataset", "split", "field"], sort=False)["length"]
    out = g.agg(n="size", min="min", mean="mean", max="max")
    q = g.quantile(list(QUANTILES)).unstack()
    q.columns = qcols
    out = out.join(q).reset_index()
    out = out[order].rename(columns={"q50": "median"})
    return out


def compute_stats(
    collection: Collection | FileSamples | Iterable[Entry],
    *,
    tokenizer: str | Tokenizer = "word",
    n: int = 3,
    progress: bool = True,
    split: str | None = None,
    sort_datasets: bool = False,
) -> StatsReport:
    """Counts, token lengths, vocabulary sizes and pairwise n-gram overlap of every dataset in ``collection``.

    A file too large to load is read a sample at a time (``io.FileSamples``): what is kept is per split its counts,
    the token length of each text and the token hashes of the vocabulary and overlap fields (8 bytes a token), never
    the texts; so is a stream of :class:`~thoughtsource.io.Entry` items (``stats`` of several inputs merges them on disk
    and passes ``MergeIndex.entries()``).  ``split``: only that split (datasets without it left out); ``sort_datasets``:
    datasets by name."""
    tok = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    if n < 1:
        raise ConfigError(f"n-gram size must be at least 1, got {n}")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    acc = _Accumulator(tok)
    if isinstance(collection, FileSamples):
        entries: Iterable[Entry] = iter_entries(collection.path)
    elif hasattr(collection, "data"):
        entries = data_entries(collection.data)
    else:
        entries = collection
    for e in entries:
        if split is None or e.split in (None, split):
            acc.add(e)
    if split is not None:  # datasets without the split are left out
        acc.data = {d: sp for d, sp in acc.data.items() if sp}
    if sort_datasets:
        acc.data = dict(sorted(acc.data.items()))
    counts = acc.counts()
    timings["counts"] = time.perf_counter() - t0

    length_parts: list[pd.DataFrame] = []
    vocab_rows: list[dict[str, Any]] = []
    ngram_sets: dict[str, dict[str, np.ndarray]] = {f: {} for f in OVERLAP_FIELDS}
    t_ngram = 0.0
    datasets = list(acc.data)
    with make_progress(enabled=progress) as bar:
        task = bar.add_task("statistics", total=len(datasets))
        for d in datasets:
            vocab_parts: list[np.ndarray] = []
            for name in FIELDS:
                hashes, lens, text_splits = acc.field(d, name)
                if len(lens):
                    length_parts.append(pd.DataFrame({"dataset": d, "split": text_splits, "field": name, "length": lens}))
                if name in VOCABULARY_FIELDS:
                    vocab_parts.append(hashes)
                if name in OVERLAP_FIELDS:
                    t2 = time.perf_counter()
                    ngram_sets[name][d] = ngram_hashes(hashes, lens, n)
                    t_ngram += time.perf_counter() - t2
            flat = np.concatenate(vocab_parts) if vocab_parts else np.empty(0, dtype=np.uint64)
            vocab_rows.append({"dataset": d, "tokens": int(flat.size), "vocabulary": int(unique_sorted(flat).size)})
            log.debug("%s: %d samples", d, sum(sp.samples for sp in acc.data[d].values()))
            bar.advance(task)
    t_tok = acc.t_tok
    timings["tokenize"] = t_tok
    timings["ngrams"] = t_ngram

    t3 = time.perf_counter()
    lengths = (
        pd.concat(length_parts, ignore_index=True)
        if length_parts
        else pd.DataFrame({"dataset": [], "split": [], "field": [], "length": []})
    )
    lengths["length"] = lengths["length"].astype(np.int64)
    summary = summarize_lengths(lengths)
    timings["summaries"] = time.perf_counter() - t3
    t4 = time.perf_counter()
    overlap = {f: pairwise_overlap(sets) for f, sets in ngram_sets.items()}
    timings["pairs"] = time.perf_counter() - t4
    report = StatsReport(
        tokenizer=tok.name, n=n, counts=counts, lengths=lengths, length_summary=summary,
        vocabulary=pd.DataFrame(vocab_rows, columns=["dataset", "tokens", "vocabulary"]), overlap=overlap, timings=timings,
    )
    log.info("statistics of %d dataset(s), %d samples: %.1f s", len(datasets), int(counts["samples"].sum()), time.perf_counter() - t0)
    return report


# --------------------------------------------------------------------------- markdown
def markdown_table(df: pd.DataFrame, floatfmt: str = "{:.1f}", na: str = "") -> str:
    """A GitHub markdown table; numbers right-aligned, ints with thousands separators."""

    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return na
        if isinstance(v, (bool, np.bool_)):
            return str(v)
        if isinstance(v, (int, np.integer)):
            return f"{int(v):,}"
        if isinstance(v, (float, np.floating)):
            return floatfmt.format(v)
        return str(v).replace("|", "\\|")

    cols = [str(c) for c in df.columns]
    numeric = [pd.api.types.is_numeric_dtype(df[c]) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---:" if num else "---" for num in numeric) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False, name=None)]
    return "\n".join(lines)


def _paper_table6(dataset: str) -> PaperTable6 | None:
    """A registered dataset's row of the ThoughtSource paper's Table 6 (its spec's ``paper_table6``), else None."""
    return spec(dataset).paper_table6 if dataset in DATASETS else None


def __getattr__(name: str) -> Any:
    """``PAPER_TABLE6`` (dataset name → its Table 6 row), now each dataset's ``DatasetSpec.paper_table6``: kept for one
    release."""
    if name == "PAPER_TABLE6":
        return {d: row for d in DATASETS if (row := _paper_table6(d)) is not None}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def paper_comparison(counts: pd.DataFrame) -> pd.DataFrame:
    """Our totals per dataset next to the paper's Table 6 (blank where the paper has no such dataset)."""
    ours = counts.groupby("dataset", sort=False)[["samples", "with_reference_cot", "with_generated_cot", "generated_cots", *ANSWER_TYPES]].sum()
    rows = []
    for d, r in ours.iterrows():
        paper = _paper_table6(str(d))
        rows.append({
            "dataset": d,
            "answer type": "/".join(t for t in ANSWER_TYPES if r[t] > 0),
            "samples": int(r["samples"]), "samples (paper)": paper[0] if paper else None,
            "with ref. CoT": int(r["with_reference_cot"]), "with ref. CoT (paper)": paper[1] if paper else None,
            "with gen. CoT": int(r["with_generated_cot"]), "with gen. CoT (paper)": paper[2] if paper else None,
            "gen. CoTs": int(r["generated_cots"]), "gen. CoTs (paper)": paper[3] if paper else None,
            "answer type (paper)": paper[4] if paper else None,
        })
    df = pd.DataFrame(rows)
    for c in df.columns:
        if c.endswith("(paper)") and c != "answer type (paper)":
            df[c] = df[c].astype("Int64")
    return df


def render_markdown(
    report: StatsReport, images: dict[str, str] | None = None, title: str = "Dataset statistics", command: str | None = None
) -> str:
    """The tables of ``report`` (and links to ``images``: name → relative path) as one markdown document."""
    images = images or {}
    out = [f"# {title}", ""]
    if command:
        out += [f"Generated by `{command}`.", ""]
    out.append(
        f"Tokenizer: `{report.tokenizer}`; n-gram size: {report.n}.  Lengths are in tokens, over the samples that "
        "have the field (`n`); `choices` counts all choices of a sample together; generated CoTs count one text each."
    )
    out += ["", "## Samples per dataset and split", ""]
    counts = report.counts
    used_types = [t for t in ANSWER_TYPES if counts[t].sum() > 0]
    out.append(markdown_table(counts[["dataset", "split", "samples", *used_types, "with_reference_cot", "with_generated_cot", "generated_cots"]]))
    out += ["", "## Compared with the paper's Table 6", ""]
    out.append(markdown_table(paper_comparison(counts)))
    if "counts" in images:
        out += ["", f"![samples per dataset]({images['counts']})"]
    out += ["", "## Token lengths", ""]
    if "lengths" in images:
        out += [f"![token lengths]({images['lengths']})", ""]
    s = report.length_summary
    for name in FIELDS:
        part = s[(s["field"] == name) & (s["split"] == "all")].drop(columns=["field", "split"])
        if part.empty:
            continue
        out += [f"### {FIELD_LABELS[name]} (all splits)", "", markdown_table(part), ""]
    out += ["### Per split", ""]
    per_split = s[s["split"] != "all"].copy()
    per_split["field"] = per_split["field"].map(FIELD_LABELS)
    out += [markdown_table(per_split[["dataset", "split", "field", "n", "min", "median", "mean", "q95", "max"]]), ""]
    out += ["## Vocabulary and n-gram sets", "",
            f"Tokens and distinct tokens over question, context, choices and reference CoT; distinct {report.n}-grams "
            "of the questions and of the reference CoTs (the sets compared below); all splits.", ""]
    vocab = report.vocabulary.copy()
    for f, pairs in report.overlap.items():
        own = pairs[pairs["dataset_a"] == pairs["dataset_b"]].set_index("dataset_a")["ngrams_a"]
        vocab[f"{FIELD_LABELS[f]} {report.n}-grams"] = vocab["dataset"].map(own).fillna(0).astype(int)
    out += [markdown_table(vocab), ""]
    out += [
        f"## {report.n}-gram overlap between datasets", "",
        "Overlap coefficient (Szymkiewicz–Simpson) = |A∩B| / min(|A|,|B|): the share of the smaller dataset's "
        "n-grams found in the other (what the paper's Figure 2 shows). Jaccard = |A∩B| / |A∪B|. "
        "Sets are the distinct n-grams of all splits of a dataset; values < 0.01 are left blank.", "",
    ]
    for key in ("overlap_coefficient", "jaccard"):
        if key in images:
            out += [f"![{key}]({images[key]})", ""]
    for f, pairs in report.overlap.items():
        for metric in ("overlap_coefficient", "jaccard"):
            m = overlap_matrix(pairs, metric)
            m = m.where(m >= 0.01)
            label = "overlap coefficient" if metric == "overlap_coefficient" else "Jaccard"
            out += [f"### {FIELD_LABELS[f]}: {label}", "", markdown_table(m.reset_index(names=""), floatfmt="{:.2f}"), ""]
    if report.timings:
        out += ["## Timings", "", ", ".join(f"{k} {v:.2f} s" for k, v in report.timings.items()), ""]
    return "\n".join(out).rstrip() + "\n"
