"""A rank that fails takes the others down: two real processes (gloo, CPU), started the way SLURM or a hand-written
launcher starts them (environment only, no torchrun agent that would kill the survivors), with a server engine
whose command dies at start.

Rank 0 alone starts the server and rank 1 waits for its completions in the store; rank 1 must stop as soon as
rank 0 has failed, not wait for ever.  The server's own environment carries none of the launcher's rank variables,
and an explicit ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

SRC = str(Path(__file__).resolve().parents[2] / "src")
DIES_AT_START = """
import json, os, sys
with open(sys.argv[1], "w") as fh:
    json.dump(dict(os.environ), fh)
sys.exit(3)
"""
LIMIT_S = 600  # far beyond what the run needs; the rank waiting for a dead rank 0 used to wait for ever


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_when_rank_0s_server_dies_every_rank_exits_nonzero(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(DIES_AT_START)
    env_dump = tmp_path / "server_env.json"
    cfg = {
        "task": "arithmetic",
        "task_options": {"min_digits": 1, "max_digits": 1, "n_train": 4, "n_test_per_digit": 2, "n_dev_per_digit": 2},
        "iterations": 1,
        "fewshot_k": 1,
        "generation": {"engine": "server", "wait_timeout_s": 3000,  # longer than LIMIT_S: only the failure can stop rank 1
                       "server": {"command": f"{sys.executable} {script} {env_dump}", "server_kind": "serve-model",
                                  "startup_timeout_s": 60}},
    }
    (tmp_path / "cfg.yaml").write_text(json.dumps(cfg))
    out = tmp_path / "run"
    port = str(_free_port())
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": port, "ACCELERATE_USE_CPU": "true", "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, "-m", "thoughtsource", "star", "run", "--config", str(tmp_path / "cfg.yaml"),
                                       "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + LIMIT_S
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"a rank was still running {LIMIT_S} s after the server died: it waits for a dead rank 0")
    codes = [p.returncode for p in procs]
    assert all(c != 0 for c in codes), (codes, logs)
    assert "exited with status 3 before serving" in logs[0], logs[0][-3000:]
    assert "stops waiting for completions: rank 0 failed" in logs[1], logs[1][-3000:]  # told, not timed out

    served = json.loads(env_dump.read_text())  # what the server process saw
    leaked = sorted(k for k in served if k in {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                               "MASTER_PORT"} or k.startswith(("ACCELERATE_", "TORCHELASTIC_")))
    assert not leaked, f"the server inherited the launcher's rank variables {leaked}"
    assert served.get("CUDA_VISIBLE_DEVICES") == ""  # explicit: the job's GPUs (none here)
