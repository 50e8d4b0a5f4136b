"""Finding, downloading and verifying raw dataset files.

Root folder: an explicit ``data_dir``, else ``$THOUGHTSOURCE_DATA``, else ``paths.cache_dir("raw")``.
Files live under the root at their ``SourceFile.name`` (``gsm8k/train.jsonl``, the layout of
``shared/data``), and, once downloaded, under ``cache_dir("raw")`` too.

A missing file is downloaded from its canonical URL (httpx streaming, a rich progress bar, resume of a
``.part`` file with an HTTP Range request, sha256 check, atomic rename).  A checksum mismatch raises
:class:`ChecksumError` and is never accepted.  When files cannot be had (offline, ``download=False``,
``$THOUGHTSOURCE_OFFLINE=1``, or an HTTP error) one :class:`DataError` names every missing file, its
URL and where to put it.

Local files are verified too; the result is cached by (path, size, mtime, ctime, inode) in
``cache_dir("raw")/verified.json`` so warm loads do not re-hash.  The ctime changes whenever the file's
content or times are written, also when an editor or script restores the old mtime (``os.utime``), and the
inode changes when a file is replaced; an entry recorded within :data:`RACY_NS` of the file's last change is
not trusted (as git does for its index: a second change in the same clock tick would leave every time alone).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import paths
from ..console import progress
from ..errors import ChecksumError, DataError
from ..io import write_json
from ._base import DatasetSpec, SourceFile

log = logging.getLogger(__name__)

CHUNK = 1 << 16
RACY_NS = 100_000_000  # an entry verified less than this after the file's last change is re-hashed next time
# (file times come from a coarse clock that ticks every few milliseconds on Linux)
_verify_lock = threading.Lock()


def data_root(data_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where raw files are looked up: ``data_dir`` → ``$THOUGHTSOURCE_DATA`` → ``cache_dir("raw")``."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = paths.data_env()  # $THOUGHTSOURCE_DATA (or its old name $THOUGHTSOURCE_SHARED_DATA)
    if env is not None:
        return env
    return paths.cache_dir("raw")


def download_dir() -> Path:
    """Where downloads go: the user cache (never a data folder that may be read-only or shared)."""
    return paths.cache_dir("raw")


def offline() -> bool:
    return os.environ.get("THOUGHTSOURCE_OFFLINE", "").strip().lower() in {"1", "true", "yes"}


def candidates(source: SourceFile, data_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Places where ``source`` may already be, in lookup order."""
    root = data_root(data_dir)
    out = [root / source.name]
    dl = download_dir() / source.name
    if dl != out[0]:
        out.append(dl)
    return out


def locate(source: SourceFile, data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The first existing local copy of ``source`` (not verified), or None."""
    for p in candidates(source, data_dir):
        if p.is_file():
            return p
    return None


# --------------------------------------------------------------------------- verification


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verified_path() -> Path:
    return paths.cache_dir("raw") / "verified.json"


def _load_verified() -> dict[str, dict[str, Any]]:
    p = _verified_path()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (FileNotFoundError, json.JSONDecodeError, OSError):
        return {}


def pinned(source: SourceFile) -> bool:
    """Whether the spec pins the file's sha256 (a file that could not be obtained when the spec was written has none)."""
    return bool(source.sha256)


def verify(path: Path, source: SourceFile) -> str:
    """Check size and sha256 of a local file and return its sha256; a mismatch raises ChecksumError.

    The result is cached by (path, size, mtime, ctime, inode), see the module docstring.  For an unpinned
    source the hash is computed, recorded and returned, with a warning that the file could not be verified.
    """
    st = path.stat()
    key = str(path.resolve())
    with _verify_lock:
        entry = _load_verified().get(key)
    if (
        isinstance(entry, dict)
        and entry.get("size") == st.st_size
        and entry.get("mtime_ns") == st.st_mtime_ns
        and entry.get("ctime_ns") == st.st_ctime_ns
        and entry.get("ino") == st.st_ino
        and int(entry.get("verified_ns", 0)) - max(st.st_mtime_ns, st.st_ctime_ns) >= RACY_NS
        and (not pinned(source) or entry.get("sha256") == source.sha256)
    ):
        return str(entry["sha256"])
    if not pinned(source):
        got = sha256_file(path)
        log.warning("%s: no checksum is pinned for this file; using it unverified (sha256 %s)", path, got)
        _record(key, st, got)
        return got
    if source.size and st.st_size != source.size:  # size 0: not known (a user's URL + sha256), the hash decides
        raise ChecksumError(
            f"size mismatch: expected {source.size} bytes, got {st.st_size} (truncated or different file?); "
            f"delete it and download {source.url}",
            path=str(path),
        )
    got = sha256_file(path)
    if got != source.sha256:
        raise ChecksumError(
            f"sha256 mismatch: expected {source.sha256}, got {got}; delete it and download {source.url}", path=str(path)
        )
    _record(key, st, got)
    return got


def _record(key: str, st: os.stat_result, sha256: str) -> None:
    with _verify_lock:
        known = _load_verified()
        known[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "ino": st.st_ino,
                      "verified_ns": time.time_ns(), "sha256": sha256}
        with contextlib.suppress(OSError):
            write_json(_verified_path(), known, indent=None)


# --------------------------------------------------------------------------- download


def download(source: SourceFile, target: Path, *, timeout: float = 60.0, show_progress: bool = True) -> Path:
    """Stream ``source.url`` to ``target`` (resuming ``target.part``), check sha256, rename atomically."""
    import httpx

    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    if source.size and have > source.size:  # a stale part of some other file
        part.unlink()
        have = 0
    digest = hashlib.sha256()
    if have:
        with open(part, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    headers = {"Range": f"bytes={have}-"} if have else {}
    with httpx.Client(follow_redirects=True, timeout=timeout) as client, client.stream("GET", source.url, headers=headers) as r:
        if r.status_code == 416 and have and have != source.size:
            stale = True  # the part file does not belong to this file: start again below
        elif r.status_code == 416 and have:
            stale = False  # the part file is already complete
        elif r.status_code == 206 and have:
            stale = False
            log.info("resuming %s at byte %d", source.name, have)
        elif r.status_code == 200:
            stale = False
            if have:
                log.info("server ignored the Range request for %s; downloading from the start", source.name)
            have = 0
            digest = hashlib.sha256()
        else:
            r.raise_for_status()
            raise httpx.HTTPStatusError(f"unexpected status {r.status_code}", request=r.request, response=r)
        if r.status_code in (200, 206):
            with open(part, "ab" if have else "wb") as fh, progress(enabled=show_progress, transient=True) as bar:
                task = bar.add_task(f"download {source.name}", total=source.size or None, completed=have)
                for chunk in r.iter_bytes(CHUNK):
                    fh.write(chunk)
                    digest.update(chunk)
                    bar.advance(task, len(chunk))
                fh.flush()
                os.fsync(fh.fileno())
    if stale:
        log.info("discarding %s: the server has no bytes after its end", part)
        part.unlink()
        return download(source, target, timeout=timeout, show_progress=show_progress)
    got = digest.hexdigest()
    if pinned(source) and got != source.sha256:
        size = part.stat().st_size
        part.unlink()
        raise ChecksumError(
            f"downloaded file does not match: expected sha256 {source.sha256}, got {got} "
            f"({size} bytes, expected {source.size}); not kept",
            path=str(target),
        )
    os.replace(part, target)
    log.info("downloaded %s (%d bytes)", target, source.size)
    return target


def resolve(
    spec: DatasetSpec,
    splits: Iterable[str],
    data_dir: str | os.PathLike[str] | None = None,
    *,
    download_missing: bool = True,
) -> dict[str, tuple[Path, str]]:
    """``{source name: (verified local path, sha256)}`` for the files the given splits need.

    Optional files are included when present locally and never downloaded here.  Missing required files
    are downloaded (unless offline); failures are collected and reported together in one DataError.
    """
    wanted: dict[str, SourceFile] = {}
    for split in splits:
        for s in spec.sources_for(split):
            wanted.setdefault(s.name, s)
    found: dict[str, tuple[Path, str]] = {}
    missing: list[tuple[SourceFile, str]] = []
    for name, source in wanted.items():
        path = locate(source, data_dir)
        if path is not None:
            found[name] = (path, verify(path, source))
        elif source.optional:
            continue
        elif not download_missing or offline():
            missing.append((source, "downloads disabled" if not download_missing else "offline ($THOUGHTSOURCE_OFFLINE)"))
        else:
            import httpx  # only when something has to be downloaded

            try:
                path = download(source, download_dir() / source.name)
                found[name] = (path, verify(path, source))
            except ChecksumError:
                raise
            except (httpx.HTTPError, OSError) as e:
                missing.append((source, f"download failed: {type(e).__name__}: {e}"[:300]))
    if missing:
        root = data_root(data_dir)
        problems = [f"{s.name}: get {s.url} and put it at {root / s.name} ({why})" for s, why in missing]
        raise DataError(
            f"{len(missing)} raw file(s) missing for splits {sorted(set(splits))}", dataset=spec.name, problems=problems
        )
    return found
