"""Generation never fails silently: each failure mode against the fault server's modes, mostly through the CLI.

Empty and null completions, a missing split, an oversize --n-samples, CoT vs answer failures,
temp files of killed writes, servers that refuse connections, two processes on one store, and the
fault server's own command line with every injected outcome.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from cli_in_process import run_cli
from thoughtsource.backends import Request, get_backend
from thoughtsource.collection import Collection
from thoughtsource.generation import generate
from thoughtsource.store import CompletionStore
from thoughtsource.testing.fault_server import run_fault_server

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
FAST = '{"backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_attempts": 3}'
CONFIG = {"cot_trigger_keys": ["kojima-01"], "answer_extraction_keys": ["kojima-A-D"], "backend": "openai", "model": "fault-echo",
          "backend_options": {"backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_attempts": 3}}


@pytest.fixture
def src(examples_dir: Path) -> Path:
    return examples_dir / "tests_unit_data" / "worldtree_100_dataset.json"


def ts(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=ENV)


def gen_args(src: Path, url: str, tmp: Path, *extra: str, n: int = 4, name: str = "out") -> list[str]:
    config = tmp / "fast.yaml"
    config.write_text(f"backend_options: {FAST}\n")
    return ["generate", "--file", str(src), "--split", "train", "--n-samples", str(n), "--triggers", "kojima-01",
            "--extractions", "kojima-A-D", "--backend", "openai", "--base-url", url, "--model", "fault-echo",
            "--config", str(config), "--db", str(tmp / f"{name}.sqlite"), "--out", str(tmp / f"{name}.json"), *extra]


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_empty_and_null_completions_are_retried_not_stored(src: Path, tmp_path: Path) -> None:
    c = Collection.from_json(src).select(split="train", number_samples=3, seed=0)
    with run_fault_server(faults=["empty", "null"]) as server:
        report = generate(c, CONFIG, base_urls=[server.base_url], store=tmp_path / "s.sqlite", progress=False)
        outcomes = Counter(r.outcome for r in server.requests)
    assert report.errors == 0 and report.called == 6
    assert outcomes == {"empty": 6, "null": 6, "ok": 6}  # every request: empty, null, then the real answer
    with CompletionStore(tmp_path / "s.sqlite") as store:
        assert len(store) == 6 and all(store.get(k).text.strip() for k in store.keys())  # noqa: SIM118


def test_a_server_that_only_answers_empty_fails_the_run_unless_allowed(src: Path, tmp_path: Path) -> None:
    with run_fault_server(then="empty") as server:
        p = ts(*gen_args(src, server.base_url, tmp_path, n=2))
        assert p.returncode == 1
        assert error_lines(p.stderr) == ["error: 2 CoT request(s) failed (their answers were not asked for); the output lacks "
                                         "them. Run the same command again to fill them in"]
        assert "empty completion" in p.stderr
        with CompletionStore(tmp_path / "out.sqlite") as store:
            assert len(store) == 0  # nothing empty was stored as a success
        allowed = ts(*gen_args(src, server.base_url, tmp_path, "--allow-empty", n=2, name="allowed"))
    assert allowed.returncode == 0, allowed.stderr
    data = json.loads((tmp_path / "allowed.json").read_text())
    cots = [g for x in data["worldtree"]["train"] for g in x["generated_cot"]]
    assert len(cots) == 2 and all(g["cot"] == "" for g in cots)


def test_a_split_the_file_lacks_is_an_error(src: Path, tmp_path: Path) -> None:
    p = ts("generate", "--file", str(src), "--split", "test", "--backend", "openai", "--model", "m", "--out", str(tmp_path / "o.json"))
    assert p.returncode == 1
    assert error_lines(p.stderr) == ["error: no dataset has a split 'test' (available: train)"]
    assert not (tmp_path / "o.json").exists()


def test_oversize_n_samples_warns_with_the_real_count(src: Path, tmp_path: Path) -> None:
    p = ts("generate", "--file", str(src), "--split", "train", "--n-samples", "500", "--backend", "openai", "--model", "m",
           "--db", str(tmp_path / "s.sqlite"), "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "--n-samples 500: worldtree/train has only 100 samples; generating for all 100" in " ".join(p.stderr.split())
    assert "dry run: 200 backend calls to make (100 CoT + 100 answer requests" in " ".join(p.stdout.split())


def test_summary_separates_cot_and_answer_failures(src: Path, tmp_path: Path) -> None:
    with run_fault_server(then="500", match="Therefore, among A through D") as server:  # stage 2 only
        answers = ts(*gen_args(src, server.base_url, tmp_path, n=3, name="answers"))
    assert answers.returncode == 1
    assert error_lines(answers.stderr) == ["error: 3 CoT(s) lack an extracted answer (the answer request failed); the output "
                                           "lacks them. Run the same command again to fill them in"]
    assert "0 CoT and 3 answer failures" in " ".join(answers.stderr.split())
    data = json.loads((tmp_path / "answers.json").read_text())
    assert [len(g["answers"]) for x in data["worldtree"]["train"] for g in x["generated_cot"]] == [0, 0, 0]
    with run_fault_server(then="500", match="Let's think step by step") as server:  # stage 1 (and so no stage 2)
        cots = ts(*gen_args(src, server.base_url, tmp_path, n=3, name="cots"))
        assert {r.outcome for r in server.requests} == {"500"}
    assert cots.returncode == 1
    assert error_lines(cots.stderr) == ["error: 3 CoT request(s) failed (their answers were not asked for); the output lacks "
                                        "them. Run the same command again to fill them in"]


def test_temp_files_of_killed_writes_are_removed(src: Path, tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".out.json.{dead.pid}.k1ll3d.tmp"
    stale.write_text('{"half": ')
    live = tmp_path / f".out.json.{os.getppid()}.writing.tmp"  # a writer that still runs: kept
    live.write_text("{")
    with run_fault_server() as server:
        p = ts(*gen_args(src, server.base_url, tmp_path, n=1))
    assert p.returncode == 0, p.stderr
    assert not stale.exists() and live.exists()
    assert sorted(f.name for f in tmp_path.iterdir() if f.name.startswith(".out.json")) == [live.name]


def test_refused_connections_stop_the_run_at_once_with_one_message(src: Path, tmp_path: Path) -> None:
    ports = []
    for _ in range(2):  # two ports nothing listens on
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    urls = [f"http://127.0.0.1:{port}/v1" for port in ports]
    config = tmp_path / "slow.yaml"
    config.write_text("backend_options: {backoff_base_s: 5, max_attempts: 6}\n")  # all retries would take a minute
    t0 = time.monotonic()
    p = ts("generate", "--file", str(src), "--split", "train", "--n-samples", "20", "--backend", "openai", "--base-url", urls[0],
           "--base-url", urls[1], "--model", "m", "--config", str(config), "--db", str(tmp_path / "s.sqlite"),
           "--out", str(tmp_path / "o.json"))
    elapsed = time.monotonic() - t0
    assert p.returncode == 1
    (line,) = error_lines(p.stderr)
    assert line.startswith(f"error: m: no server accepts connections ({urls[0]}, {urls[1]}) and no request has succeeded")
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert elapsed < 30, f"took {elapsed:.1f}s: the retries ran"
    assert not (tmp_path / "o.json").exists()


def test_two_processes_on_one_store_never_ask_for_the_same_key_twice(src: Path, tmp_path: Path) -> None:
    with run_fault_server(latency_s=0.05, latency_jitter_s=0.05) as server:
        args = [gen_args(src, server.base_url, tmp_path, "--concurrency", "4", n=12, name=name) for name in ("a", "b")]
        args[1] = [a.replace(str(tmp_path / "b.sqlite"), str(tmp_path / "a.sqlite")) for a in args[1]]  # the same store
        procs = [subprocess.Popen([sys.executable, "-m", "thoughtsource", *a], env=ENV, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for a in args]
        results = [(p.wait(timeout=180), p.communicate()[1]) for p in procs]
        answered = server.answered_keys()
    assert [rc for rc, _ in results] == [0, 0], results
    assert len(answered) == 24 and set(answered.values()) == {1}  # 12 CoTs + 12 answers, each asked once in all
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("a", "b"))
    assert [g["cot"] for x in a["worldtree"]["train"] for g in x["generated_cot"]] == \
        [g["cot"] for x in b["worldtree"]["train"] for g in x["generated_cot"]]
    with CompletionStore(tmp_path / "a.sqlite") as store:
        assert store.db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0  # every claim resolved


def test_a_killed_owners_claims_are_taken_over(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with CompletionStore(tmp_path / "s.sqlite") as store:
        store.db.execute("INSERT INTO claims VALUES ('k1', 'gone', ?, ?, ?)", (store.host, dead.pid, time.time()))
        store.db.execute("INSERT INTO claims VALUES ('k2', 'alive', ?, ?, ?)", (store.host, os.getppid(), time.time()))
        store.db.execute("INSERT INTO claims VALUES ('k3', 'old', 'elsewhere', 1, ?)", (time.time() - 3600,))
        mine, done = store.claim(["k1", "k2", "k3", "k4"])
    assert mine == {"k1", "k3", "k4"} and done == set()


def test_fault_server_command_line_and_every_outcome(tmp_path: Path) -> None:
    """The server run as `python -m ...`: each scripted outcome once, and the client recovers from all of them."""
    faults = "429,503,malformed,truncated,reset,drop,empty,null,nochoices,hang"
    proc = subprocess.Popen([sys.executable, "-m", "thoughtsource.testing.fault_server", "--faults", faults, "--retry-after", "0.3",
                             "--slow", "3", "--until-stdin-closes"], env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        backend = get_backend("openai", model="fault-echo", base_url=url, timeout_s=1.0, max_attempts=12, backoff_base_s=0.01,
                              backoff_max_s=0.02)
        t0 = time.monotonic()
        (completion,) = asyncio.run(backend.complete([Request(prompt="Q: 2 + 2?\nA: Let's think step by step.", max_tokens=64)]))
        elapsed = time.monotonic() - t0
    finally:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        stderr = proc.stderr.read()
    assert proc.returncode == 0
    assert completion.attempts == 11 and completion.text.startswith(" First, restate the question")
    served = stderr.strip().splitlines()[-1]
    expected = {o: 1 for o in faults.split(",")} | {"ok": 1}
    assert served == f"served 11 requests: {expected}"
    assert elapsed >= 0.6  # Retry-After 0.3 s honoured after the 429 and after the 503
    bad = subprocess.run([sys.executable, "-m", "thoughtsource.testing.fault_server", "--faults", "explode"], env=ENV,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown outcome 'explode'" in bad.stderr


def test_collection_generate_raises_on_failures_and_keeps_the_report(src: Path, tmp_path: Path) -> None:
    """Collection.generate() used to log 'generate failed' and return, so evaluate() reported the file's old numbers."""
    from thoughtsource.errors import GenerationFailed

    c = Collection.from_json(src).select(split="train", number_samples=3, seed=0)
    with run_fault_server(then="500", match="Therefore, among A through D") as server:  # stage 2 fails
        with pytest.raises(GenerationFailed, match="3 CoT\\(s\\) lack an extracted answer") as info:
            c.generate(CONFIG, base_urls=[server.base_url], store=tmp_path / "s.sqlite", progress=False)
        report = info.value.report
        assert report is c.generate_report and (report.cot_errors, report.answer_errors) == (0, 3)
        assert report.attached_cots == 3  # what succeeded is attached
        assert [len(g.answers) for _, _, x in c.samples() for g in x.generated_cot] == [0, 0, 0]
        again = Collection.from_json(src).select(split="train", number_samples=3, seed=0)
        assert again.generate(CONFIG, base_urls=[server.base_url], store=tmp_path / "s.sqlite", progress=False,
                              strict=False) is again  # the opt-out: no exception, the report kept
        assert again.generate_report is not None and again.generate_report.answer_errors == 3
    with run_fault_server() as server:  # a healthy server: the same call fills in the answers only
        assert c.generate(CONFIG, base_urls=[server.base_url], store=tmp_path / "s.sqlite", progress=False) is c
        assert c.generate_report is not None and c.generate_report.errors == 0
        assert c.generate_report.attached_answers == 3


@pytest.mark.parametrize("status, key, says", [
    ("401", None, "HTTP 401: no API key was sent: $TS_TEST_KEY is not set"),
    ("401", "sk-wrong", "HTTP 401: the API key from $TS_TEST_KEY was refused"),
    ("403", "sk-wrong", "HTTP 403: the API key from $TS_TEST_KEY was not allowed this model"),
    ("404", None, "HTTP 404: model 'fault-echo' not found"),
])
def test_a_refused_key_or_unknown_model_stops_at_the_first_response(src: Path, tmp_path: Path, status: str,
                                                                    key: str | None, says: str) -> None:
    """Every request would get the same 401/403/404: one request is sent, one line names the server, the status and
    the key's environment variable (it sent all of them, each failing, and advised to run again)."""
    env = {k: v for k, v in ENV.items() if k != "TS_TEST_KEY"} | ({"TS_TEST_KEY": key} if key else {})
    with run_fault_server(then=status) as server:
        config = tmp_path / "one.yaml"
        config.write_text('backend_options: {"api_key_env": "TS_TEST_KEY", "concurrency": 1, "max_attempts": 3}\n')
        args = gen_args(src, server.base_url, tmp_path, n=20)
        args[args.index("--config") + 1] = str(config)
        p = run_cli(*args, env=env)
        sent = len(server.requests)
    assert p.returncode == 1
    (line,) = error_lines(p.stderr)
    assert line.startswith(f"error: {server.base_url} answered {says}"), line
    assert "Traceback" not in p.stderr and "run it again" not in p.stderr
    assert sent == 1
    if key:
        assert key not in p.stderr
