"""Reading and writing ThoughtSource data: JSON, JSONL, Parquet and HF ``datasets``.

The ThoughtSource JSON format is ``{dataset_name: {split: [sample, ...]}}``.  Every writer goes
through :func:`atomic_write` (temp file in the same folder, fsync, rename), so a crash never leaves
a half-written file.

Parquet / Arrow layout (one table per dataset and split): typed columns for every declared field,
nested ``generated_cot`` → ``answers`` / ``annotations`` as lists of structs, and at each level an
``extra_json`` column holding, as JSON, the keys the schema does not know and any value that does not
fit its column's type.  Reading merges ``extra_json`` back, so the round trip is lossless.

Files larger than memory: :func:`iter_samples` / :func:`iter_entries` read any of the three formats a sample at a
time, :func:`write_entries` writes a stream (``docs/large-files.md``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from pydantic import ValidationError

from .answers import semantic_problems
from .errors import DataError
from .schema import Annotation, Answer, GeneratedCot, Sample

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

Data = dict[str, dict[str, list[Sample]]]


# --------------------------------------------------------------------------- atomic writes
TEMP_SUFFIX = ".tmp"


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w", encoding: str | None = "utf-8") -> Iterator[Any]:
    """Open a temp file next to ``path``; on success fsync it and rename it over ``path``.

    The temp file is named ``.<name>.<pid>.<random>.tmp``.  A writer killed before the rename
    (SIGKILL, power loss) leaves it behind; the next write of the same ``path`` removes the temp
    files of processes that are gone.
    """
    path = Path(path)
    if path.is_dir():
        raise DataError("is a folder; expected the path of a file to write", path=str(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=path.parent)
    except OSError as e:  # named by the path the user gave, not the temp file's
        raise DataError(f"cannot write there: {e.strerror}", path=str(path)) from None
    # mkstemp creates 0600; give the file the mode a plain open() would (0666 less the umask).
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_out(path: str | os.PathLike[str], *, folder: bool = False) -> None:
    """Refuse an output that cannot be written before any work is done (not after an hour of generation).

    ``path`` is a file to write (``folder=False``) or a folder to write into: a folder where a file is meant, a file
    where a folder is meant or stands in its way, or a folder the user may not write in is a :class:`DataError`
    naming it.  Nothing is created.
    """
    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise DataError("is a file; expected a folder to write into", path=str(path))
    if not folder and path.is_dir():
        raise DataError("is a folder; expected the path of a file to write", path=str(path))
    where = path if folder else path.parent
    existing = where
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise DataError(f"cannot write there: {existing} is a file, where a folder is needed", path=str(path))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DataError(f"cannot write there: no permission to write in {existing}", path=str(path))
    if not folder and path.exists() and not path.is_file():  # /dev/null, a FIFO: no temp file is renamed over it
        raise DataError("is not a regular file; it cannot be replaced (give the path of a file to write)", path=str(path))
    try:  # what atomic_write will do: a temp file in the folder (os.access says yes to root on /proc, a read-only mount)
        fd, probe = tempfile.mkstemp(prefix=".thoughtsource-check.", suffix=TEMP_SUFFIX, dir=existing)
    except OSError as e:
        raise DataError(f"cannot write there: {e.strerror} (creating a file in {existing})", path=str(path)) from None
    os.close(fd)
    os.unlink(probe)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def remove_stale_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Delete the temp files :func:`atomic_write` left next to ``path`` when its writer was killed.

    Only files of the form ``.<name>.<pid>.<random>.tmp`` whose process no longer runs are removed
    (a concurrent writer's temp file is kept).
    """
    path = Path(path)
    removed: list[Path] = []
    prefix = f".{path.name}."
    try:
        candidates = [p for p in path.parent.iterdir() if p.name.startswith(prefix) and p.name.endswith(TEMP_SUFFIX)]
    except FileNotFoundError:
        return removed
    for p in candidates:
        pid = p.name[len(prefix):].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            removed.append(p)
            log.info("removed %s, left by a killed write of %s", p.name, path.name)
    return removed


def json_safe(obj: Any) -> Any:
    """``obj`` with NaN/inf as None, numpy scalars as Python numbers, paths as strings (strict JSON)."""
    import math

    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    item = getattr(obj, "item", None)  # numpy / pandas scalars
    if callable(item):
        return json_safe(item())
    return str(obj)


def write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> None:
    with atomic_write(path) as fh:
        json.dump(obj, fh, ensure_ascii=False, indent=indent)
        fh.write("\n")


# --------------------------------------------------------------------------- JSON reading
def read_json(path: str | os.PathLike[str]) -> Any:
    """json.load with errors that name the file, line and column."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError("file not found", path=str(path)) from None
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text ({e.reason} at byte {e.start})", path=str(path)) from None
    if not text.strip():
        raise DataError(EMPTY_FILE, path=str(path))
    if looks_like_csv(text):
        raise DataError(CSV_FILE, path=str(path))
    return _decode(text, path=str(path))


EMPTY_FILE = "the file is empty (expected ThoughtSource JSON, JSONL or Parquet)"
CSV_FILE = ("this is a CSV table, not a ThoughtSource file: thoughtsource reads ThoughtSource JSON, JSONL or Parquet "
            "(CSV is what evaluate and runs write, e.g. answers.csv, accuracy.csv)")
TABLE_SUFFIXES = (".csv", ".tsv")


def looks_like_csv(text: str) -> bool:
    """A first line of comma- or tab-separated names (``dataset,split,model,...``) and no JSON opening."""
    first = text.lstrip().split("\n", 1)[0].strip()
    if not first or first[0] in "{[\"":
        return False
    return ("," in first or "\t" in first) and ":" not in first


def check_input(path: str | os.PathLike[str]) -> None:
    """An empty file and a CSV table each get their own message, not 'invalid JSON: Expecting value' (or, for an
    empty JSONL file, a collection of nothing)."""
    path = Path(path)
    if path.suffix.lower() in TABLE_SUFFIXES and path.is_file():
        raise DataError(CSV_FILE, path=str(path))
    try:
        st = path.stat()
    except OSError:
        return
    if path.is_file() and st.st_size == 0:
        raise DataError(EMPTY_FILE, path=str(path))


MAX_JSON_DEPTH = 100  # ThoughtSource data needs ~12 levels; deeper values could not be written back (serializer limit)


def _decode(text: str, *, path: str, line: int | None = None) -> Any:
    """json.loads with one clear :class:`DataError` for broken JSON and for JSON nested more than ``MAX_JSON_DEPTH``
    levels (10,000 levels made json.loads raise RecursionError; a few hundred loaded but could not be exported)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON: {e.msg}", path=path, line=e.lineno if line is None else line, column=e.colno) from None
    except RecursionError:
        obj = None
        depth = MAX_JSON_DEPTH + 1
    else:
        depth = json_depth(obj, MAX_JSON_DEPTH)
    if depth > MAX_JSON_DEPTH:
        raise DataError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep", path=path, line=line)
    return obj


def json_depth(obj: Any, limit: int) -> int:
    """How deeply lists and objects nest in ``obj`` (a scalar: 0), counted up to ``limit + 1``; iterative."""
    deepest = 0
    stack = [(obj, 1)] if isinstance(obj, (list, dict)) else []
    while stack:
        value, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
        for v in value.values() if isinstance(value, dict) else value:
            if isinstance(v, (list, dict)):
                stack.append((v, depth + 1))
    return deepest


def _validation_message(err: ValidationError) -> tuple[str, str]:
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"])
    msg = first["msg"]
    if first["type"] == "missing":
        msg = "required field is missing"
    elif "input" in first and first["type"] != "missing":
        msg += f", got {first['input']!r}"[:200]
    return field, msg


def parse_record(rec: Any, i: int, *, path: str | None, dataset: str, split: str, line: int | None = None,
                 numbered: bool = False) -> Sample:
    """One decoded sample record (the ``i``-th of its split) as a :class:`Sample`, or a :class:`DataError` naming the
    file, the dataset/split/record (its id, else ``#i``; ``numbered``: its id and ``#i``, where no line says where it
    is) and the field.  Every reader, in memory or streaming, uses it."""
    rid = rec.get("id") if isinstance(rec, dict) else None
    rid = f"#{i}" if rid is None else f"{rid} (#{i})" if numbered else rid
    if not isinstance(rec, dict):
        raise DataError(
            f"expected a sample object, got {type(rec).__name__}", path=path, line=line, dataset=dataset, split=split,
            record=str(rid),
        )
    try:
        return Sample.model_validate(rec)
    except ValidationError as e:
        field, msg = _validation_message(e)
        raise DataError(msg, path=path, line=line, dataset=dataset, split=split, record=str(rid), field=field) from None


def record_problems(sample: Sample, i: int, dataset: str, split: str, seen: set[str]) -> list[str]:
    """The semantic problems of one sample, and a duplicate id within its split (``seen``: the ids so far, updated)."""
    problems = [f"{dataset}/{split}/{sample.id}: {p}" for p in semantic_problems(sample)]
    if sample.id in seen:  # sample ids address samples (merging, the annotator's URLs): one per split
        problems.append(f"{dataset}/{split}/{sample.id}: duplicate sample id (record #{i})")
    seen.add(sample.id)
    return problems


def warn_problems(problems: list[str], count: int, path: str | None) -> None:
    """Log ``count`` schema violations, showing the first 20 of ``problems``."""
    shown = "\n".join(f"  - {p}" for p in problems[:20])
    more = f"\n  ... and {count - 20} more" if count > 20 else ""
    log.warning("%s: %d schema violation(s):\n%s%s", path or "data", count, shown, more)


def parse_data(obj: Any, *, path: str | None = None, validate: bool = False, warn: bool = True) -> Data:
    """Turn the decoded ThoughtSource JSON structure into samples.

    Structural errors always raise :class:`DataError`.  Semantic problems (per answer type) raise with
    ``validate=True``; otherwise they are logged as warnings (a count plus the first 20).
    """
    if not isinstance(obj, dict):
        raise DataError(f"expected an object {{dataset: {{split: [samples]}}}}, got {type(obj).__name__}", path=path)
    data: Data = {}
    problems: list[str] = []
    for ds_name, splits in obj.items():
        if not ds_name.strip():
            raise DataError("a dataset name is empty", path=path)
        if not isinstance(splits, dict):
            raise DataError(f"expected an object {{split: [samples]}}, got {type(splits).__name__}", path=path, dataset=ds_name)
        data[ds_name] = {}
        for split, records in splits.items():
            if not split.strip():
                raise DataError("a split name is empty", path=path, dataset=ds_name)
            if not isinstance(records, list):
                raise DataError(
                    f"expected a list of samples, got {type(records).__name__}", path=path, dataset=ds_name, split=split
                )
            samples: list[Sample] = []
            seen: set[str] = set()
            for i, rec in enumerate(records):
                sample = parse_record(rec, i, path=path, dataset=ds_name, split=split)
                if validate or warn:  # (not when no one reads them, e.g. Collection.merge's copy of its data)
                    problems.extend(record_problems(sample, i, ds_name, split, seen))
                samples.append(sample)
            data[ds_name][split] = samples
    if problems:
        if validate:
            raise DataError(f"{len(problems)} schema violation(s)", path=path, problems=problems)
        if warn:
            warn_problems(problems, len(problems), path)
    return data


def load_json(path: str | os.PathLike[str], *, validate: bool = False) -> Data:
    return parse_data(read_json(path), path=str(path), validate=validate)


def data_to_obj(data: Data) -> dict[str, dict[str, list[dict[str, Any]]]]:
    return {d: {s: [x.to_dict() for x in xs] for s, xs in splits.items()} for d, splits in data.items()}


def dump_json(data: Data, path: str | os.PathLike[str], indent: int | None = 2) -> None:
    write_json(path, data_to_obj(data), indent=indent)


# --------------------------------------------------------------------------- JSONL
def dump_jsonl(data: Data, path: str | os.PathLike[str]) -> None:
    """One sample per line, with ``dataset`` and ``split`` keys added."""
    with atomic_write(path) as fh:
        for d, splits in data.items():
            for s, xs in splits.items():
                for x in xs:
                    fh.write(json.dumps({"dataset": d, "split": s, **x.to_dict()}, ensure_ascii=False) + "\n")


def load_jsonl(path: str | os.PathLike[str], *, validate: bool = False) -> Data:
    obj: dict[str, dict[str, list[Any]]] = {}
    records = 0
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            rec = _jsonl_record(raw, lineno, str(path), first=not records)
            if rec is None:
                continue
            records += 1
            obj.setdefault(rec.pop("dataset"), {}).setdefault(rec.pop("split"), []).append(rec)
    if not records:
        raise DataError(EMPTY_FILE, path=str(path))
    return parse_data(obj, path=str(path), validate=validate)


def _jsonl_record(raw: bytes, lineno: int, path: str, *, first: bool) -> dict[str, Any] | None:
    """One JSONL line decoded and checked to carry ``dataset`` and ``split`` names; None for a blank line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"not UTF-8 text ({e.reason} at byte {e.start} of the line)", path=path, line=lineno) from None
    if not line.strip():
        return None
    if first and looks_like_csv(line):
        raise DataError(CSV_FILE, path=path)
    rec = _decode(line, path=path, line=lineno)
    if not isinstance(rec, dict) or "dataset" not in rec or "split" not in rec:
        raise DataError("expected an object with 'dataset' and 'split' keys", path=path, line=lineno)
    if not isinstance(rec["dataset"], str) or not isinstance(rec["split"], str):
        raise DataError("'dataset' and 'split' must be names (strings)", path=path, line=lineno)
    return rec


# --------------------------------------------------------------------------- Arrow / Parquet
def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    s = pa.string()
    annotation = pa.struct([("author", s), ("date", s), ("key", s), ("value", s), ("extra_json", s)])
    answer = pa.struct(
        [
            ("id", s),
            ("answer_extraction", s),
            ("answer_extraction_template", s),
            ("answer_extraction_text", s),
            ("answer", s),
            ("correct_answer", pa.bool_()),
            ("extra_json", s),
        ]
    )
    cot = pa.struct(
        [
            ("id", s),
            ("fragments_version", s),
            ("instruction", s),
            ("cot_trigger", s),
            ("cot_trigger_template", s),
            ("prompt_text", s),
            ("cot", s),
            ("answers", pa.list_(answer)),
            ("author", s),
            ("date", s),
            ("api_service", s),
            ("model", s),
            ("comment", s),
            ("annotations", pa.list_(annotation)),
            ("extra_json", s),
        ]
    )
    return pa.schema(
        [
            ("dataset", s),
            ("split", s),
            ("id", s),
            ("ref_id", s),
            ("question", s),
            ("type", s),
            ("choices", pa.list_(s)),
            ("context", s),
            ("cot", pa.list_(s)),
            ("answer", pa.list_(s)),
            ("generated_cot", pa.list_(cot)),
            ("feedback_json", s),
            ("extra_json", s),
        ]
    )


_NESTED = {"answers": Answer, "annotations": Annotation}


def _to_row(obj: dict[str, Any], model: type, arrow_type: Any) -> dict[str, Any]:
    """Split a dumped model dict into typed columns + extra_json (lossless)."""
    import pyarrow as pa

    row: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    names = {f.name: f.type for f in arrow_type}
    for key, value in obj.items():
        typ = names.get(key)
        if key == "extra_json" or typ is None:
            extra[key] = value
        elif key in _NESTED:
            row[key] = [_to_row(v, _NESTED[key], typ.value_type) for v in value]
        elif key == "generated_cot":
            row[key] = [_to_row(v, GeneratedCot, typ.value_type) for v in value]
        elif value is None:
            row[key] = None
        elif (
            (pa.types.is_string(typ) and isinstance(value, str))
            or (pa.types.is_boolean(typ) and isinstance(value, bool))
            or (pa.types.is_list(typ) and isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            row[key] = value
        else:  # e.g. a model given as a dict, a non-string annotation value
            extra[key] = value
            row[key] = json.dumps(value, ensure_ascii=False) if pa.types.is_string(typ) else None
    row["extra_json"] = json.dumps(extra, ensure_ascii=False) if extra else None
    return row


def _from_row(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if k != "extra_json"}
    for key in ("generated_cot", "answers", "annotations"):
        if isinstance(out.get(key), list):
            out[key] = [_from_row(v) for v in out[key]]
    if row.get("extra_json"):
        out.update(_decode(row["extra_json"], path="extra_json column"))
    return out


def to_arrow(samples: list[Sample], dataset: str, split: str) -> pa.Table:
    import pyarrow as pa

    schema = _arrow_schema()
    rows = []
    for x in samples:
        d = x.to_dict()
        feedback = d.pop("feedback", None)
        row = _to_row(d, Sample, schema)
        row.update(dataset=dataset, split=split, feedback_json=json.dumps(feedback, ensure_ascii=False))
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)


def _row_record(row: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """A Parquet row as (dataset, split, the sample's record)."""
    d = _from_row(row)
    dataset, split = d.pop("dataset"), d.pop("split")
    d["feedback"] = json.loads(d.pop("feedback_json") or "null")
    return dataset, split, d


def from_arrow(table: pa.Table) -> Data:
    data: Data = {}
    for row in table.to_pylist():
        dataset, split, d = _row_record(row)
        data.setdefault(dataset, {}).setdefault(split, []).append(Sample.model_validate(d))
    return data


def dump_parquet(data: Data, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``out_dir/<dataset>/<split>.parquet`` per dataset and split (each atomically)."""
    import pyarrow.parquet as pq

    written = []
    for d, splits in data.items():
        for s, xs in splits.items():
            path = Path(out_dir) / d / f"{s}.parquet"
            with atomic_write(path, "wb") as fh:
                pq.write_table(to_arrow(xs, d, s), fh)
            written.append(path)
    return written


def load_parquet(path: str | os.PathLike[str]) -> Data:
    """Read one Parquet file or every ``*.parquet`` below a folder."""
    import pyarrow.parquet as pq

    path = Path(path)
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise DataError("no .parquet files found", path=str(path))
    data: Data = {}
    for f in files:
        try:
            table = pq.read_table(f)
        except Exception as e:  # pyarrow raises several types for broken files
            raise DataError(f"cannot read Parquet: {e}", path=str(f)) from None
        missing = [c for c in ("dataset", "split", "id") if c not in table.column_names]
        if missing:  # written by another tool: no traceback at the first row
            raise DataError(f"not a ThoughtSource Parquet file: no column {', '.join(missing)} (its columns: "
                            f"{', '.join(table.column_names[:8]) or 'none'}{', ...' if len(table.column_names) > 8 else ''})",
                            path=str(f))
        try:
            loaded = from_arrow(table)
        except DataError as e:  # e.g. an extra_json value nested too deeply
            raise DataError(e.message, path=str(f)) from None
        except ValidationError as e:
            where, what = _validation_message(e)
            raise DataError(f"not a valid ThoughtSource sample: {where}: {what}", path=str(f)) from None
        except (ValueError, TypeError, KeyError) as e:  # e.g. feedback_json that is not JSON, a column of another type
            raise DataError(f"not a valid ThoughtSource Parquet file: {type(e).__name__}: {e}", path=str(f)) from None
        for d, splits in loaded.items():
            for s, xs in splits.items():
                data.setdefault(d, {}).setdefault(s, []).extend(xs)
    return data


# --------------------------------------------------------------------------- streaming
# Files larger than memory are read a sample at a time (ThoughtSource JSON with ijson's incremental parser, JSONL a
# line at a time, Parquet a batch of rows at a time) and written as they come: memory does not grow with the number
# of samples.  Every sample goes through the same parse_record / record_problems as the in-memory readers.
PARQUET_BATCH = 256  # Parquet rows decoded at a time, and written per row group


class Entry(NamedTuple):
    """One item of a streamed file: a sample, or (``sample`` None) the first sight of a split (``split`` None: of a
    dataset), so that empty splits and datasets survive a conversion.  ``index``: the sample's place in its split."""

    dataset: str
    split: str | None
    sample: Sample | None
    index: int = -1  # type: ignore[assignment]  # shadows tuple.index on purpose: the field's public name


OnInvalid = Callable[[DataError], None]
T = TypeVar("T")


def iter_samples(path: str | os.PathLike[str], *, on_invalid: OnInvalid | None = None) -> Iterator[tuple[str, str, Sample]]:
    """``(dataset, split, sample)`` of a ThoughtSource JSON, JSONL or Parquet file (or folder of Parquet shards), one at
    a time and in file order, never the whole file in memory::

        for dataset, split, sample in iter_samples("run.jsonl"):
            print(dataset, split, sample.id, len(sample.generated_cot))

    A malformed record raises a :class:`DataError` naming the file, the line (JSONL), row (Parquet) or the sample's
    id or ``#index``, and the field; with ``on_invalid`` it is passed there instead and the record skipped (a JSON
    syntax error cannot be skipped: the rest of the file cannot be read).
    """
    for e in iter_entries(path, on_invalid=on_invalid):
        if e.sample is not None:
            yield e.dataset, e.split or "", e.sample


def iter_entries(path: str | os.PathLike[str], *, on_invalid: OnInvalid | None = None) -> Iterator[Entry]:
    """The :class:`Entry` items of a file, opened by its extension as ``Collection.load`` does."""
    p = Path(path)
    check_input(p)
    if p.is_dir() or p.suffix == ".parquet":
        return _iter_parquet(p, on_invalid)
    if p.suffix == ".jsonl":
        return _iter_jsonl(p, on_invalid)
    return _iter_json(p, on_invalid)


class FileSamples:
    """A file's samples, read again from disk on every pass (a :class:`~thoughtsource.schema.SampleSource` that never
    holds the whole file): what ``evaluate`` scores a file with.  ``samples()`` is :func:`iter_samples`, restricted to
    the index range in each split when one is given; ``data`` does load everything (for the callers that need it)."""

    def __init__(self, path: str | os.PathLike[str], idx_range: tuple[int, int] | None = None) -> None:
        self.path = Path(path)
        self.idx_range = idx_range
        self._warned = False
        check_input(self.path)

    def _samples(self) -> Iterator[tuple[str, str, Sample]]:
        entries = iter_entries(self.path)
        if not self._warned:  # the semantic problems Collection.load logs, once (not on every pass)
            self._warned = True
            entries = checked(entries, path=str(self.path), warn=True)
        for e in entries:
            if e.sample is not None:
                yield e.dataset, e.split or "", e.sample

    def samples(self) -> Iterator[tuple[str, str, Sample]]:
        if self.idx_range is None:
            yield from self._samples()
            return
        a, b = self.idx_range
        seen: dict[tuple[str, str], int] = {}
        for d, s, sample in self._samples():
            i = seen.get((d, s), 0)
            seen[(d, s)] = i + 1
            if i in range(a, b):
                yield d, s, sample

    @property
    def data(self) -> Data:
        out: Data = {}
        for d, s, sample in self.samples():
            out.setdefault(d, {}).setdefault(s, []).append(sample)
        return out

    def in_idx_range(self, idx_range: tuple[int, int] | None) -> FileSamples:
        return self if idx_range is None else FileSamples(self.path, idx_range)


def data_entries(data: Data) -> Iterator[Entry]:
    """The :class:`Entry` items of data in memory, as :func:`iter_entries` gives those of its file."""
    for d, splits in data.items():
        yield Entry(d, None, None)
        for s, xs in splits.items():
            yield Entry(d, s, None)
            for i, x in enumerate(xs):
                yield Entry(d, s, x, i)


def _open_input(p: Path) -> Any:
    try:
        return open(p, "rb")
    except FileNotFoundError:
        raise DataError("file not found", path=str(p)) from None
    except OSError as e:
        raise DataError(f"cannot read it: {e.strerror}", path=str(p)) from None


_JSON_TYPES = {"start_map": "dict", "start_array": "list"}


def _event_type(event: str, value: Any) -> str:
    return _JSON_TYPES.get(event, type(value).__name__)


def _iter_json(p: Path, on_invalid: OnInvalid | None) -> Iterator[Entry]:
    import ijson

    path = str(p)
    with _open_input(p) as fh:
        head = fh.read(4096)
        if not head.strip():
            raise DataError(EMPTY_FILE, path=path)
        if looks_like_csv(head.decode("utf-8", "replace")):
            raise DataError(CSV_FILE, path=path)
        fh.seek(0)
        where: dict[str, Any] = {}
        try:
            yield from _json_entries(ijson.basic_parse(fh, use_float=True), path, on_invalid, where)
        except ijson.JSONError as e:
            text = e.args[0] if e.args else str(e)  # yajl's message is bytes at times, with the text and a caret
            text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
            first = text.strip().split("\n", 1)[0]
            if "UTF8" in first:
                raise DataError("not UTF-8 text", path=path, **where) from None
            line, column = _locate_syntax_error(p)
            raise DataError(f"invalid JSON: {first}", path=path, line=line, column=column, **where) from None


LOCATE_LIMIT = 256 << 20  # bytes: a syntax error's line and column are found in files up to this size


def _locate_syntax_error(p: Path) -> tuple[int | None, int | None]:
    """The line and column of the first syntax error in JSON file ``p`` (yajl does not say): ijson's pure-Python
    backend gives the character offset, read again up to it (slow, so only in files up to ``LOCATE_LIMIT``)."""
    import re

    import ijson

    if p.stat().st_size > LOCATE_LIMIT:
        return None, None
    offset = None
    with open(p, "rb") as fh:
        try:
            for _ in ijson.get_backend("python").basic_parse(fh):
                pass
        except ijson.JSONError as e:
            m = re.search(r" at (\d+)$", str(e))
            offset = int(m.group(1)) if m else None
    if offset is None:
        return None, None
    line, column, left = 1, 1, offset
    with open(p, encoding="utf-8", errors="replace", newline="") as fh:
        while left and (chunk := fh.read(min(left, 1 << 20))):
            left -= len(chunk)
            newlines = chunk.count("\n")
            line += newlines
            column = len(chunk) - chunk.rfind("\n") if newlines else column + len(chunk)
    return line, column


def _json_entries(events: Iterator[tuple[str, Any]], path: str, on_invalid: OnInvalid | None,
                  where: dict[str, Any]) -> Iterator[Entry]:
    """``{dataset: {split: [sample, ...]}}`` from ijson's events; ``where`` tracks the place, for syntax errors."""
    ev = iter(events)
    event, value = next(ev, ("end", None))
    if event != "start_map":
        raise DataError(f"expected an object {{dataset: {{split: [samples]}}}}, got {_event_type(event, value)}", path=path)
    while (item := next(ev))[0] != "end_map":
        ds = item[1]
        if not ds.strip():
            raise DataError("a dataset name is empty", path=path)
        where.clear()
        where["dataset"] = ds
        event, value = next(ev)
        if event != "start_map":
            raise DataError(f"expected an object {{split: [samples]}}, got {_event_type(event, value)}", path=path, dataset=ds)
        yield Entry(ds, None, None)
        while (item := next(ev))[0] != "end_map":
            split = item[1]
            if not split.strip():
                raise DataError("a split name is empty", path=path, dataset=ds)
            where["split"] = split
            event, value = next(ev)
            if event != "start_array":
                raise DataError(f"expected a list of samples, got {_event_type(event, value)}", path=path, dataset=ds,
                                split=split)
            yield Entry(ds, split, None)
            i = 0
            while (item := next(ev))[0] != "end_array":
                where["record"] = f"#{i}"
                rec = _build(item, ev, path, where)
                sample = _skippable(on_invalid, parse_record, rec, i, path=path, dataset=ds, split=split, numbered=True)
                if sample is not None:
                    yield Entry(ds, split, sample, i)
                i += 1
            where.pop("record", None)
    where.clear()
    for _ in ev:  # what follows the object: json.loads calls it 'Extra data'
        raise DataError("invalid JSON: extra data after the object", path=path)


def _skippable(on_invalid: OnInvalid | None, parse: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """``parse(*args, **kwargs)``; a :class:`DataError` raises, or with ``on_invalid`` goes there and gives None."""
    try:
        return parse(*args, **kwargs)
    except DataError as e:
        if on_invalid is None:
            raise
        on_invalid(e)
        return None


SAMPLE_DEPTH = 3  # a sample is nested in the file's object, its dataset's object and its split's list


def _build(first: tuple[str, Any], ev: Iterator[tuple[str, Any]], path: str, where: dict[str, Any]) -> Any:
    """The value that starts with event ``first`` (a whole sample), from the events that follow; ``where``: the
    sample's dataset, split and record, for an error.

    What ``ijson.ObjectBuilder`` builds (dicts and lists; a repeated key keeps its last value), in one loop over the
    events with the open containers on a stack: the builder's method call and closure per event were most of the
    time of a streamed read."""
    event, value = first
    if event == "start_map":
        root: Any = {}
    elif event == "start_array":
        root = []
    else:
        return value
    stack = [root]
    top, in_map, key = root, event == "start_map", None
    deepest = MAX_JSON_DEPTH - SAMPLE_DEPTH
    for event, value in ev:
        if event == "map_key":
            key = value
            continue
        if event == "end_map" or event == "end_array":
            stack.pop()
            if not stack:
                return root
            top = stack[-1]
            in_map = type(top) is dict
            continue
        if event == "start_map" or event == "start_array":
            if len(stack) >= deepest:
                raise DataError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep", path=path, **where)
            child: Any = {} if event == "start_map" else []
            if in_map:
                top[key] = child
            else:
                top.append(child)
            stack.append(child)
            top, in_map = child, event == "start_map"
        elif in_map:
            top[key] = value
        else:
            top.append(value)
    return next(ev)  # the events ended inside the value: what next() raises there (ijson raises first)


def _iter_jsonl(p: Path, on_invalid: OnInvalid | None) -> Iterator[Entry]:
    path = str(p)
    counts: dict[tuple[str, str], int] = {}
    records = 0
    with _open_input(p) as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                rec = _jsonl_record(raw, lineno, path, first=not records)
            except DataError as e:
                if on_invalid is None or e.message == CSV_FILE:
                    raise
                records += 1
                on_invalid(e)
                continue
            if rec is None:
                continue
            records += 1
            key = (ds, split) = (rec.pop("dataset"), rec.pop("split"))
            i = counts.get(key, 0)
            counts[key] = i + 1
            if not i:
                yield Entry(ds, split, None)
            sample = _skippable(on_invalid, parse_record, rec, i, path=path, dataset=ds, split=split, line=lineno)
            if sample is not None:
                yield Entry(ds, split, sample, i)
    if not records:
        raise DataError(EMPTY_FILE, path=path)


def _iter_parquet(p: Path, on_invalid: OnInvalid | None) -> Iterator[Entry]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(p.rglob("*.parquet")) if p.is_dir() else [p]
    if not files:
        raise DataError("no .parquet files found", path=str(p))
    counts: dict[tuple[str, str], int] = {}
    for f in files:
        path = str(f)
        try:
            pf = pq.ParquetFile(f)
        except FileNotFoundError:
            raise DataError("file not found", path=path) from None
        except Exception as e:  # pyarrow raises several types for broken files
            raise DataError(f"cannot read Parquet: {e}", path=path) from None
        names = pf.schema_arrow.names
        missing = [c for c in ("dataset", "split", "id") if c not in names]
        if missing:
            raise DataError(f"not a ThoughtSource Parquet file: no column {', '.join(missing)} (its columns: "
                            f"{', '.join(names[:8]) or 'none'}{', ...' if len(names) > 8 else ''})", path=path)
        row = 0
        batches = pf.iter_batches(batch_size=PARQUET_BATCH)
        while True:
            try:
                batch = next(batches, None)
            except (pa.ArrowException, OSError) as e:
                raise DataError(f"cannot read Parquet: {e}", path=path) from None
            if batch is None:
                break
            for rec in batch.to_pylist():
                row += 1
                entry = _skippable(on_invalid, _parquet_entry, rec, row, path, counts)
                if entry is None:
                    continue
                if not entry.index:
                    yield Entry(entry.dataset, entry.split, None)
                yield entry


def _parquet_entry(rec: dict[str, Any], row: int, path: str, counts: dict[tuple[str, str], int]) -> Entry:
    """Row ``row`` (from 1) of a Parquet file as an :class:`Entry`; a :class:`DataError` names the file and row."""
    try:
        ds, split, d = _row_record(rec)
    except DataError as e:  # e.g. an extra_json value nested too deeply
        raise DataError(e.message, path=path, line=row) from None
    except (ValueError, TypeError, KeyError) as e:  # e.g. feedback_json that is not JSON
        raise DataError(f"not a valid ThoughtSource Parquet row: {type(e).__name__}: {e}", path=path, line=row) from None
    if not isinstance(ds, str) or not isinstance(split, str) or not ds.strip() or not split.strip():
        raise DataError("'dataset' and 'split' must be names (strings)", path=path, line=row)
    key = (ds, split)
    i = counts.get(key, 0)
    counts[key] = i + 1
    return Entry(ds, split, parse_record(d, i, path=path, dataset=ds, split=split, line=row), i)


def checked(entries: Iterable[Entry], *, path: str | None, validate: bool = False, warn: bool = True) -> Iterator[Entry]:
    """``entries`` passed on, with each sample's semantic problems and duplicate ids gathered as :func:`parse_data`
    does: at the end they raise (``validate``: all of them listed) or are logged (``warn``: a count and the first 20).
    Memory: the sample ids of one split (to find duplicates) and the problems kept."""
    seen: dict[tuple[str, str], set[str]] = {}
    problems: list[str] = []
    count = 0
    for e in entries:
        if e.sample is not None and e.split is not None and (validate or warn):
            found = record_problems(e.sample, e.index, e.dataset, e.split, seen.setdefault((e.dataset, e.split), set()))
            count += len(found)
            problems.extend(found if validate else found[: max(0, 20 - len(problems))])
        yield e
    if count:
        if validate:
            raise DataError(f"{count} schema violation(s)", path=path, problems=problems)
        if warn:
            warn_problems(problems, count, path)


# --------------------------------------------------------------------------- streaming writes
def write_entries(entries: Iterable[Entry], out: str | os.PathLike[str], fmt: str, indent: int = 2) -> tuple[int, list[Path]]:
    """Write streamed entries as ThoughtSource JSON (``fmt`` "json"), JSONL ("jsonl") or a Parquet folder ("parquet"),
    byte for byte as :func:`dump_json` / :func:`dump_jsonl` write (and row for row as :func:`dump_parquet`) the same
    samples in memory.  Returns the number of samples and the files written (each atomically).

    Samples are grouped by dataset and split in order of first appearance, as in memory: JSON and JSONL go through
    one temp file per split next to ``out`` (a split's text is copied into place at the end), Parquet files are
    written a row group at a time.
    """
    if fmt == "parquet":
        return _write_parquet(entries, Path(out))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        spools: dict[str, dict[str, Any]] = {}  # dataset -> split -> spool file (None: no sample yet)
        counts: dict[tuple[str, str], int] = {}
        try:
            for e in entries:
                splits = spools.setdefault(e.dataset, {})
                if e.split is None:
                    continue
                if e.split not in splits:
                    splits[e.split] = open(Path(tmp) / f"{len(counts)}", "w", encoding="utf-8")  # noqa: SIM115
                    counts[(e.dataset, e.split)] = 0
                if e.sample is None:
                    continue
                fh = splits[e.split]
                key = (e.dataset, e.split)
                if fmt == "jsonl":
                    fh.write(json.dumps({"dataset": e.dataset, "split": e.split, **e.sample.to_dict()}, ensure_ascii=False))
                    fh.write("\n")
                else:
                    pad = " " * (indent * 3)
                    text = json.dumps(e.sample.to_dict(), ensure_ascii=False, indent=indent)
                    fh.write((",\n" if counts[key] else "") + pad + text.replace("\n", "\n" + pad))
                counts[key] += 1
                n += 1
        finally:
            for splits in spools.values():
                for fh in splits.values():
                    fh.close()
        with atomic_write(out) as dst:
            if fmt == "jsonl":
                for splits in spools.values():
                    for fh in splits.values():
                        with open(fh.name, encoding="utf-8") as src:
                            shutil.copyfileobj(src, dst, 1 << 20)
            else:
                _assemble_json(dst, spools, counts, indent)
    return n, [out]


def _assemble_json(dst: Any, spools: dict[str, dict[str, Any]], counts: dict[tuple[str, str], int], indent: int) -> None:
    """``{dataset: {split: [...]}}`` as json.dump(indent=indent) lays it out, the samples' text copied from spools."""
    one, two = " " * indent, " " * (2 * indent)
    dst.write("{")
    for di, (ds, splits) in enumerate(spools.items()):
        dst.write(("," if di else "") + f"\n{one}{json.dumps(ds, ensure_ascii=False)}: {{")
        for si, (split, fh) in enumerate(splits.items()):
            dst.write(("," if si else "") + f"\n{two}{json.dumps(split, ensure_ascii=False)}: [")
            if counts[(ds, split)]:
                dst.write("\n")
                with open(fh.name, encoding="utf-8") as src:
                    shutil.copyfileobj(src, dst, 1 << 20)
                dst.write(f"\n{two}")
            dst.write("]")
        dst.write(f"\n{one}}}" if splits else "}")
    dst.write("\n}\n" if spools else "}\n")


def _write_parquet(entries: Iterable[Entry], out_dir: Path) -> tuple[int, list[Path]]:
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    written: list[Path] = []
    n = 0
    with contextlib.ExitStack() as stack:
        writers: dict[tuple[str, str], tuple[Any, list[Sample]]] = {}

        def flush(key: tuple[str, str]) -> None:
            writer, batch = writers[key]
            if batch:
                writer.write_table(to_arrow(batch, *key))
                batch.clear()

        for e in entries:
            if e.split is None:
                continue
            key = (e.dataset, e.split)
            if key not in writers:
                path = out_dir / e.dataset / f"{e.split}.parquet"
                fh = stack.enter_context(atomic_write(path, "wb"))
                writers[key] = (stack.enter_context(pq.ParquetWriter(fh, schema)), [])
                written.append(path)
            if e.sample is not None:
                writers[key][1].append(e.sample)
                n += 1
                if len(writers[key][1]) >= PARQUET_BATCH:
                    flush(key)
        for key in writers:
            flush(key)
    return n, written
