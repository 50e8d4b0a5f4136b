"""thoughtsource store path|ls|stats|clear on a store a real generate run filled (mock backend, the real entry point run in process)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from cli_in_process import run_cli


def ts(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={**os.environ, "THOUGHTSOURCE_HOME": str(home)})  # stdin: empty, no terminal


def test_store_path_ls_stats_clear(examples_dir: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    default = home / "completions.sqlite"
    p = ts("store", "path", home=home)
    assert p.returncode == 0 and p.stdout == f"{default}\n"
    missing = ts("store", "stats", home=home)
    assert missing.returncode == 1 and missing.stderr == f"error: {default}: no completion store there (nothing generated yet, or a wrong --db)\n"
    assert not default.exists()  # looking creates nothing
    src = examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"
    g = ts("generate", "--file", str(src), "--split", "train", "--n-samples", "3", "--backend", "mock", "--out", str(tmp_path / "o.json"),
           home=home)
    assert g.returncode == 0, g.stderr
    stats = json.loads(ts("store", "stats", "--json", home=home).stdout)
    assert stats["path"] == str(default) and stats["completions"] == 6  # 3 CoTs + 3 answers
    assert [(m["backend"], m["completions"]) for m in stats["models"]] == [("mock", 6)]
    listed = json.loads(ts("store", "ls", "-n", "4", "--json", home=home).stdout)
    assert len(listed) == 4 and all(r["backend"] == "mock" and r["text"] and r["prompt"] for r in listed)
    table = ts("store", "ls", home=home)
    assert table.returncode == 0 and "mock" in table.stdout
    refused = ts("store", "clear", home=home)  # no terminal to ask on
    assert refused.returncode == 2 and "--yes" in refused.stderr
    cleared = ts("store", "clear", "--yes", home=home)
    assert cleared.returncode == 0 and "deleted 6 completions" in cleared.stderr
    assert json.loads(ts("store", "stats", "--json", home=home).stdout)["completions"] == 0
    other = tmp_path / "other.sqlite"
    assert ts("store", "path", "--db", str(other), home=home).stdout == f"{other}\n"


def test_the_readme_lists_the_store_commands_and_they_run(examples_dir: Path, tmp_path: Path) -> None:
    """README's store commands, as written, on a store that a generate run filled."""
    from test_readme import README, readme_commands  # tests/ is on sys.path (rootdir-relative, no package)

    commands = [c for c in readme_commands(README.read_text()) if c.startswith("thoughtsource store ")]
    assert {c.split()[2] for c in commands} == {"path", "ls", "stats", "clear"}
    home = tmp_path / "home"
    src = examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"
    g = ts("generate", "--file", str(src), "--split", "train", "--limit", "2", "--backend", "mock", "--out", str(tmp_path / "o.json"),
           home=home)
    assert g.returncode == 0, g.stderr
    for command in commands:
        p = ts(*command.split()[1:], home=home)
        assert p.returncode == 0, (command, p.stderr)
    assert json.loads(ts("store", "stats", "--json", home=home).stdout)["completions"] == 0  # the last one cleared it
