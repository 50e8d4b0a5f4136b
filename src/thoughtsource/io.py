"""Reading and writing ThoughtSource data: JSON, JSONL, Parquet and HF ``datasets``.

The ThoughtSource JSON format is ``{dataset_name: {split: [sample, ...]}}``.  Every writer goes
through :func:`atomic_write` (temp file in the same folder, fsync, rename), so a crash never leaves
a half-written file.

Parquet / Arrow layout (one table per dataset and split): typed columns for every declared field,
nested ``generated_cot`` → ``answers`` / ``annotations`` as lists of structs, and at each level an
``extra_json`` column holding, as JSON, the keys the schema does not know and any value that does not
fit its column's type.  Reading merges ``extra_json`` back, so the round trip is lossless.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .errors import DataError
from .schema import Annotation, Answer, GeneratedCot, Sample, semantic_problems

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
                rid = rec.get("id", f"#{i}") if isinstance(rec, dict) else f"#{i}"
                if not isinstance(rec, dict):
                    raise DataError(
                        f"expected a sample object, got {type(rec).__name__}",
                        path=path,
                        dataset=ds_name,
                        split=split,
                        record=str(rid),
                    )
                try:
                    sample = Sample.model_validate(rec)
                except ValidationError as e:
                    field, msg = _validation_message(e)
                    raise DataError(msg, path=path, dataset=ds_name, split=split, record=str(rid), field=field) from None
                if validate or warn:  # (not when no one reads them, e.g. Collection.merge's copy of its data)
                    for p in semantic_problems(sample):
                        problems.append(f"{ds_name}/{split}/{sample.id}: {p}")
                    if sample.id in seen:  # sample ids address samples (merging, the annotator's URLs): one per split
                        problems.append(f"{ds_name}/{split}/{sample.id}: duplicate sample id (record #{i})")
                    seen.add(sample.id)
                samples.append(sample)
            data[ds_name][split] = samples
    if problems:
        if validate:
            raise DataError(f"{len(problems)} schema violation(s)", path=path, problems=problems)
        if warn:
            shown = "\n".join(f"  - {p}" for p in problems[:20])
            more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
            log.warning("%s: %d schema violation(s):\n%s%s", path or "data", len(problems), shown, more)
    return data


def data_problems(data: Data) -> list[str]:
    return [
        f"{d}/{s}/{x.id}: {p}" for d, splits in data.items() for s, xs in splits.items() for x in xs for p in semantic_problems(x)
    ]


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
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"not UTF-8 text ({e.reason} at byte {e.start} of the line)", path=str(path), line=lineno) from None
            if not line.strip():
                continue
            if not records and looks_like_csv(line):
                raise DataError(CSV_FILE, path=str(path))
            records += 1
            rec = _decode(line, path=str(path), line=lineno)
            if not isinstance(rec, dict) or "dataset" not in rec or "split" not in rec:
                raise DataError("expected an object with 'dataset' and 'split' keys", path=str(path), line=lineno)
            if not isinstance(rec["dataset"], str) or not isinstance(rec["split"], str):
                raise DataError("'dataset' and 'split' must be names (strings)", path=str(path), line=lineno)
            obj.setdefault(rec.pop("dataset"), {}).setdefault(rec.pop("split"), []).append(rec)
    if not records:
        raise DataError(EMPTY_FILE, path=str(path))
    return parse_data(obj, path=str(path), validate=validate)


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


def from_arrow(table: pa.Table) -> Data:
    data: Data = {}
    for row in table.to_pylist():
        d = _from_row(row)
        dataset, split = d.pop("dataset"), d.pop("split")
        d["feedback"] = json.loads(d.pop("feedback_json") or "null")
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
