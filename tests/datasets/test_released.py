"""ThoughtSource-100 / -33 by the library's id lists, and released CoT collections by name or URL + sha256."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import static_server
from typer.testing import CliRunner

from thoughtsource.cli import app
from thoughtsource.collection import Collection
from thoughtsource.datasets._text import clean_text
from thoughtsource.datasets.released import RELEASED, load_released, load_thoughtsource_subset, subset_ids
from thoughtsource.errors import ChecksumError, DataError, UnknownNameError

TS_SPLITS = {"commonsense_qa": "validation", "med_qa": "test", "medmc_qa": "validation", "open_book_qa": "test",
             "strategy_qa": "train", "worldtree": "test"}


@pytest.mark.parametrize("size", [100, 33])
def test_thoughtsource_subset_has_the_library_ids(size: int, data_dir: Path, examples_dir: Path) -> None:
    ids = (examples_dir / f"libs/cot/cot/datasets/thoughtsource/thoughtsource_{size}_ids.txt").read_text().split()
    data, report = load_thoughtsource_subset(size, data_dir)
    c = Collection(data=data)
    assert subset_ids(size, data_dir) == ids and len(ids) == 6 * size
    assert {d: {s: len(x) for s, x in sp.items()} for d, sp in c} == {d: {s: size} for d, s in TS_SPLITS.items()}
    got = [x.id for _, _, x in c.samples()]
    assert sorted(got) == sorted(ids) and len(set(got)) == len(ids)
    # converted here where the raw files are present; MedMCQA and OpenBookQA (no raw files) from the released file
    assert report.ours == {f"{d}/{s}": size for d, s in TS_SPLITS.items() if d not in ("medmc_qa", "open_book_qa")}
    assert report.released == {"medmc_qa/validation": size, "open_book_qa/test": size}


def test_thoughtsource_100_samples_agree_with_the_released_ones(data_dir: Path) -> None:
    c = Collection(data=load_thoughtsource_subset(100, data_dir)[0])
    released = Collection(data=load_released("ts167_cohere_command-xlarge-nightly", data_dir=data_dir))
    published = {s.id: s for _, _, s in released.samples()}
    for ds, _split, s in c.samples():
        p = published[s.id]
        assert s.answer == [clean_text(" ".join(a.split())) for a in p.answer], (ds, s.id)
        assert normalize(s.question) == normalize(p.question), (ds, s.id)
        if ds in ("medmc_qa", "open_book_qa"):
            assert s.generated_cot == []  # the released run's model CoTs are not part of the subset
    strategy = c["strategy_qa"]["train"]
    assert all(s.ref_id and s.ref_id != s.id for s in strategy)  # the library's qid, ours kept as ref_id


def normalize(text: str) -> str:
    return " ".join(clean_text(text).replace('""', '"').split()).casefold()  # WorldTree: their doubled TSV quotes


def test_released_collection_by_name(data_dir: Path) -> None:
    c = Collection(data=load_released("ts100_gpt-4_zhou-01", data_dir=data_dir))
    assert len(c) == 600 and sum(len(s.generated_cot) for _, _, s in c.samples()) == 600
    with pytest.raises(UnknownNameError):
        load_released("no-such-collection", data_dir=data_dir)


@pytest.fixture
def served(tmp_path: Path, data_dir: Path) -> Iterator[tuple[str, bytes]]:
    root = tmp_path / "served"
    root.mkdir()
    body = (data_dir / RELEASED["ts67_flan-t5-xxl_kojima-01_zhou-01"].name).read_bytes()
    (root / "run.json").write_bytes(body)

    with static_server(root) as base:
        yield f"{base}/run.json", body


def test_released_collection_by_url_and_checksum(served: tuple[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, body = served
    monkeypatch.delenv("THOUGHTSOURCE_OFFLINE", raising=False)
    monkeypatch.setenv("THOUGHTSOURCE_CACHE", str(tmp_path / "cache"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="needs its sha256"):
        load_released(url, data_dir=empty)
    with pytest.raises(ChecksumError):
        load_released(url, sha256="0" * 64, data_dir=empty)
    sha = hashlib.sha256(body).hexdigest()
    c = Collection(data=load_released(url, sha256=sha, data_dir=empty))
    expected = json.loads(body)
    assert len(c) == sum(len(x) for sp in expected.values() for x in sp.values()) == 402
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["datasets", "released", url, "--sha256", sha, "--data-dir", str(empty), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "402 samples" in result.output and json.loads(out.read_text()).keys() == expected.keys()


def test_cli_thoughtsource_subset(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ts33.json"
    result = CliRunner().invoke(app, ["datasets", "subset", "--thoughtsource", "33", "--out", str(out), "--data-dir", str(data_dir)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert sum(len(x) for sp in doc.values() for x in sp.values()) == 198
