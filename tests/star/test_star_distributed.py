"""A tiny STaR iteration under ``accelerate launch`` with 2 CPU processes (gloo) and the repository's FSDP config:
generation is sharded over the ranks, rank 0 alone writes every file, the trained model is saved whole and loaded
back on every rank, which generates with exactly the saved weights, and the greedy generations equal a one-process
run's.

``accelerate launch --cpu`` starts one process unless mpirun is set up, so the two CPU processes are started the way
torchrun starts them (``ACCELERATE_USE_CPU=true`` and no visible GPU): accelerate then joins a gloo process group.
With ``configs/accelerate/fsdp.yaml`` the launcher sets FSDP's environment (``ACCELERATE_USE_FSDP``,
``FSDP_CPU_RAM_EFFICIENT_LOADING``), under which transformers may load a model for FSDP to fill in, ranks other than
0 without initialised weights of their own (with transformers 5.23 on CPU processes rank 1 does get the whole weights,
the same digest as rank 0's, so removing ``outside_sharded_init`` alone does not fail this test; the two failures it
guards against were simulated on a copy of the code and each fails the launch: weights left on ``meta`` on rank 1,
"loaded without data for 32 tensors", and uninitialised weights on rank 1, "the ranks generate with different
weights").  accelerate 1.15 wraps the model with FSDP only on accelerators, so on CPU
processes the Trainer runs DDP: this test covers FSDP's loading path and the save/reload, not sharded training
(``docs/star-gpu.md`` says what ran where).

The run starts from the committed 0.37M bootstrap base (``tests/star/fixtures/bootstrap_base``, a real HF folder
``thoughtsource star base`` built, on the compact scratchpad it was trained on), not the 135M embedded model: what is
tested is the launch's mechanism (sharding, who writes, which weights each rank loads and generates with), which
transformers' FSDP loading path treats the same for any folder.  3-digit sums, which the base gets partly right,
make iteration 1 keep some rationales and rationalize the rest, and training moves M_1 off the base, so a rank that
generated with the base instead of the checkpoint would show.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bootstrap_base import BOOTSTRAP_BASE, from_the_base
from thoughtsource.io import read_json
from thoughtsource.star.config import StarConfig
from thoughtsource.star.loop import StarRun

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")
FSDP_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "fsdp.yaml"
BASE = BOOTSTRAP_BASE
CFG = from_the_base({
    "task_options": {"min_digits": 3, "max_digits": 3, "n_train": 8, "n_test_per_digit": 3, "n_dev_per_digit": 2},
    "iterations": 1,
    "steps": {"first": 2, "warmup_steps": 0},
    "batch_size": 2,
    "lr": 1e-4,
    "generation": {"batch_size": 2, "max_new_tokens": 64},  # a compact 3-digit answer is about 58 characters (tokens)
})
# made by M_0 (the base model), so identical whatever the number of processes; M_1 differs with the global batch size
FROM_BASE = ["iter_0/test", "iter_0/dev", "iter_1/generate", "iter_1/rationalize"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _launch(cfg: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]), "ACCELERATE_USE_CPU": "true",
           "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "COLUMNS": "1000"}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(FSDP_CONFIG), "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
           "-m", "thoughtsource", "star", "run", "--config", str(cfg), "--out", str(out), *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.timeout(3600)  # ~60 s on a quiet 2-core machine, 4x that at load 8
def test_two_processes_shard_generation_and_one_writes(tmp_path: Path) -> None:
    (tmp_path / "cfg.yaml").write_text(json.dumps(CFG))
    out = tmp_path / "ddp"
    proc = _launch(tmp_path / "cfg.yaml", out)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[:6000] + "\n...\n" + log[-3000:]

    # each rank generated its share: prompts r, r+2, ...; the step records both ranks' counts
    for step, n in (("iter_0/test", 3), ("iter_0/dev", 2), ("iter_1/generate", 8), ("iter_1/test", 3)):
        data = read_json(out / f"{step}.json")
        assert data["world_size"] == 2
        ranks = data["stats"]["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1], step
        assert [r["prompts"] for r in ranks] == [(n + 1) // 2, n // 2] and [r["requested"] for r in ranks] == [(n + 1) // 2, n // 2]
    # one process wrote every file: each artifact written once, by rank 0
    writes = re.findall(r"wrote (\S+) \(rank (\d) of (\d)\)", log)
    assert writes and {(r, w) for _, r, w in writes} == {("0", "2")}
    counts = Counter(p for p, _, _ in writes if not p.endswith(f"{out.name}/metrics.json"))  # the summary is rewritten
    assert counts and max(counts.values()) == 1, counts
    assert {str(out / f"{s}.json") for s in FROM_BASE} <= set(counts)
    assert log.count("wrote " + str(out / "metrics.json") + " and plots") == 1  # the final report: rank 0 only
    # a real iteration: rationales kept, two optimizer steps under DDP, a checkpoint evaluated
    m1 = read_json(out / "iter_1" / "metrics.json")
    assert 0 < m1["kept"] < 8 and m1["steps"] == 2 and (out / "iter_1" / "checkpoint" / "config.json").exists()
    assert read_json(out / "iter_1" / "rationalize.json")["rows"]  # some wrong: rationalization is compared below too
    assert not list(out.rglob("*.tmp"))

    # resumed under 2 processes: the lost test step is made again from the store, every finished step is kept
    test = read_json(out / "iter_1" / "test.json")
    kept = {p: p.stat().st_mtime_ns for p in (out / "iter_1" / "generate.json", out / "iter_0" / "test.json")}
    for name in ("test.json", "metrics.json"):
        (out / "iter_1" / name).unlink()
    proc = _launch(tmp_path / "cfg.yaml", out, "--resume")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    again = read_json(out / "iter_1" / "test.json")
    assert again["rows"] == test["rows"] and [r["from_store"] for r in again["stats"]["ranks"]] == [2, 1]
    assert all(p.stat().st_mtime_ns == t for p, t in kept.items())

    # every rank generated with exactly the saved weights: M_0 (the base) at iteration 0, the checkpoint M_1 after
    # training, loaded whole on each rank (not inside FSDP's RAM-efficient init, which leaves ranks > 0 unfilled)
    import shutil

    from thoughtsource.star.loading import load_for_generation, weights_digest

    first_launch = {"iter_0/test": read_json(out / "iter_0" / "test.json"), "iter_1/test": test}  # before the resume
    digests = []
    for step, folder in (("iter_0/test", str(BASE)), ("iter_1/test", str(out / "iter_1" / "checkpoint"))):
        saved = weights_digest(load_for_generation(folder, "float32")[0])
        assert [r["weights"] for r in first_launch[step]["stats"]["ranks"]] == [saved, saved], step
        digests.append(saved)
    assert digests[0] != digests[1]  # training moved M_1 off the base: generating with the wrong one would show
    assert read_json(out / "iter_1" / "train_stats.json")["world_size"] == 2

    # the greedy results equal one process's, of the base model (M_0's steps) and of the trained model on the saved
    # checkpoint (iteration 1's test step): a copy of the run, resumed in one process with nothing in its store, makes
    # those steps again (iteration 1's training set, train step and checkpoint are kept, so M_1 is the same weights)
    alone = tmp_path / "alone"
    shutil.copytree(out, alone)
    for name in ("iter_0/metrics.json", "iter_1/test.json", "iter_1/metrics.json", "completions.sqlite", "completions.sqlite-wal",
                 "completions.sqlite-shm", *(f"{step}.json" for step in FROM_BASE)):
        (alone / name).unlink(missing_ok=True)
    single = StarRun(StarConfig.from_dict(CFG), alone, resume=True, show_progress=False)
    single.run()
    assert sorted(single.done_steps) == [(0, "dev"), (0, "test"), (1, "generate"), (1, "rationalize"), (1, "test")]
    assert read_json(alone / "iter_1" / "train_stats.json") == read_json(out / "iter_1" / "train_stats.json")  # not retrained
    again = read_json(alone / "iter_1" / "test.json")
    assert again["world_size"] == 1 and again["model"]["fingerprint"] == test["model"]["fingerprint"]
    assert again["stats"]["ranks"][0]["requested"] == len(test["rows"]) and again["rows"] == test["rows"]
    for step in FROM_BASE:
        a, b = read_json(out / f"{step}.json"), read_json(alone / f"{step}.json")
        assert b["world_size"] == 1 and a["rows"] == b["rows"], step
        assert a["model"]["fingerprint"] == b["model"]["fingerprint"]
        assert b["stats"]["ranks"] == [
            {"rank": 0, "prompts": len(b["rows"]), "from_store": 0, "requested": len(b["rows"]),
             "generated_tokens": b["stats"]["completion_tokens"], "weights": a["stats"]["ranks"][0]["weights"]}]
