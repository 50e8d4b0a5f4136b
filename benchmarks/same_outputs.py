"""Do two checkouts give the same outputs?  Issue 44's check for moves and renames: run this on each and diff.

    PYTHONPATH=OLD/src python benchmarks/same_outputs.py --repo OLD --out before.json
    PYTHONPATH=NEW/src python benchmarks/same_outputs.py --repo NEW --out after.json
    python benchmarks/same_outputs.py --compare before.json after.json

It records, through the public CLI and HTTP API only (so that module moves do not change the harness):

- ``evaluate --json`` on the ThoughtSource example files (the results; paths and timings removed), and every Kojima
  log in ``shared/data/kojima_logs`` rescored in both modes (the one part through the Python API: evaluate reads
  ThoughtSource files);
- every shipped STaR run config and every config under ``configs/star`` resolved (``StarConfig.from_file``, then
  ``model_dump``), and ``star configs``' listing;
- ``serve-model`` on the embedded model: ``/v1/models``, greedy completions and chat completions, log-probabilities
  with ``echo``, and the errors of a bad body and an unknown model (status and JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("THOUGHTSOURCE_DATA") or REPO.parent / "shared" / "data")
VOLATILE = {"elapsed_s", "seconds", "created", "id", "path", "file", "out", "version", "written_at", "system_fingerprint",
            "date", "git_hash", "commit"}


def _ts(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    return subprocess.run([sys.executable, "-m", "thoughtsource", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"/tmp/\S+", "<tmp>", value)
    return value


def evaluations(tmp: Path) -> dict[str, Any]:
    files = sorted((DATA / "thoughtsource_examples").rglob("*.json"))[:12]
    out: dict[str, Any] = {}
    for k, path in enumerate(files):
        p = _ts("evaluate", str(path), "--json", "--out", str(tmp / f"ev{k}"))
        key = str(path.relative_to(DATA))
        try:
            out[key] = {"exit": p.returncode, "results": _scrub(json.loads(p.stdout))}
        except json.JSONDecodeError:
            out[key] = {"exit": p.returncode, "stderr_last": p.stderr.strip().splitlines()[-1:] if p.stderr else []}
    return out


def kojima_rescores() -> dict[str, Any]:
    """Every Kojima log rescored, strict and flexible: each record's extracted answer and verdict (``evaluate`` reads
    ThoughtSource files; the logs go through the datasets' reader)."""
    from dataclasses import asdict, is_dataclass

    from thoughtsource.datasets.cot_logs import read_kojima_log_file, rescore_log

    out: dict[str, Any] = {}
    for path in sorted((DATA / "kojima_logs").glob("*.log")):
        log = read_kojima_log_file(path)
        for mode in ("strict", "flexible"):
            r = rescore_log(log, mode)
            out[f"{path.name}:{mode}"] = _scrub(asdict(r) if is_dataclass(r) else vars(r))
    return out


def star_configs(repo: Path) -> dict[str, Any]:
    from thoughtsource.star.config import StarConfig, config_names, config_path

    paths = [config_path(n) for n in config_names()] + sorted((repo / "configs" / "star").rglob("*.yaml"))
    out: dict[str, Any] = {"listing": _ts("star", "configs").stdout}
    for path in paths:
        try:
            cfg = StarConfig.from_file(path)
            out[path.name if path.parent.name == "configs" else str(path.relative_to(repo))] = _scrub(
                {"dump": cfg.model_dump(mode="json"), "engine": cfg.engine_name, "result": cfg.result_fields()})
        except Exception as e:  # a config that is not a run config (a base recipe) is recorded as what it raised
            out[path.name if path.parent.name == "configs" else str(path.relative_to(repo))] = type(e).__name__
    return out


def serve_model() -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "thoughtsource", "serve-model", "--model", "embedded", "--port", "0",
                             "--device", "cpu", "--threads", "1"], stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    url = None
    deadline = time.monotonic() + 600
    lines = []
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"(http://\S+?)/v1", line)
        if m:
            url = m.group(1)
    if url is None:
        proc.kill()
        raise SystemExit("serve-model did not start:\n" + "".join(lines[-20:]))
    out: dict[str, Any] = {}
    try:
        with httpx.Client(base_url=url, timeout=600) as c:
            out["models"] = _scrub(c.get("/v1/models").json())
            calls = {
                "completion": ("/v1/completions", {"model": "embedded", "prompt": "Q: What is 12 + 30?\nA:", "max_tokens": 24,
                                                    "temperature": 0}),
                "completion_stop": ("/v1/completions", {"model": "embedded", "prompt": ["2, 4, 6,", "The sky is"],
                                                         "max_tokens": 16, "temperature": 0, "stop": ["\n"]}),
                "chat": ("/v1/chat/completions", {"model": "embedded", "messages": [{"role": "user", "content": "Name a prime."}],
                                                  "max_tokens": 24, "temperature": 0}),
                "echo_logprobs": ("/v1/completions", {"model": "embedded", "prompt": "The capital of France is Paris",
                                                      "max_tokens": 0, "echo": True, "logprobs": 1, "temperature": 0}),
                "top_logprobs": ("/v1/completions", {"model": "embedded", "prompt": "1 + 1 =", "max_tokens": 3, "logprobs": 3,
                                                     "temperature": 0}),
                "unknown_model": ("/v1/completions", {"model": "nope", "prompt": "x", "max_tokens": 2}),
                "bad_body": ("/v1/completions", {"model": "embedded", "prompt": "x", "max_tokens": "many"}),
            }
            for name, (path, body) in calls.items():
                r = c.post(path, json=body)
                out[name] = {"status": r.status_code, "json": _scrub(r.json())}
            r = c.post("/v1/completions", content=b"{not json", headers={"content-type": "application/json"})
            out["not_json"] = {"status": r.status_code, "json": _scrub(r.json())}
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return out


def _round(value: Any) -> Any:
    """Log-probabilities to 5 decimals: the check is about code moves, not float summation order."""
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def compare(a: Path, b: Path) -> int:
    old, new = json.loads(a.read_text()), json.loads(b.read_text())
    differences = 0
    for part in sorted(set(old) | set(new)):
        for key in sorted(set(old.get(part, {})) | set(new.get(part, {}))):
            x, y = (_round(_scrub(side.get(part, {}).get(key))) for side in (old, new))
            if x != y:
                differences += 1
                print(f"DIFFERENT {part}/{key}:\n  before {json.dumps(x)[:400]}\n  after  {json.dumps(y)[:400]}")
    n = sum(len(v) for v in new.values())
    print(f"{n} outputs compared, {differences} different")
    return 1 if differences else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path)
    ap.add_argument("--parts", default="evaluate,kojima,star_configs,serve_model")
    ap.add_argument("--repo", type=Path, default=REPO, help="the checkout whose configs/star is read (its src/ on PYTHONPATH)")
    args = ap.parse_args()
    if args.compare:
        raise SystemExit(compare(*args.compare))
    import tempfile

    parts = args.parts.split(",")
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "evaluate" in parts:
            result["evaluate"] = evaluations(Path(tmp))
        if "kojima" in parts:
            result["kojima"] = kojima_rescores()
        if "star_configs" in parts:
            result["star_configs"] = star_configs(args.repo)
        if "serve_model" in parts:
            result["serve_model"] = serve_model()
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True))
    print(f"wrote {args.out}: " + ", ".join(f"{k} {len(v)}" for k, v in result.items()))


if __name__ == "__main__":
    main()
