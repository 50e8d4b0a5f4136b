"""STaR generation engines without a model: the config's engine field (and the old backend field), the vLLM
prompt/parameter mapping, and the server engine's start, health check, model check and stop (on a stub server)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import ClassVar

import pytest

from thoughtsource.backends import Request
from thoughtsource.backends.vllm import require_vllm, vllm_completion, vllm_inputs
from thoughtsource.errors import ConfigError, EngineError
from thoughtsource.io import read_json
from thoughtsource.star.config import ServerEngine, StarConfig
from thoughtsource.star.engines import ServerProcess, model_fingerprint, server_argv, store_identity

# --------------------------------------------------------------------------- config


def test_engine_defaults_to_transformers_and_the_removed_backend_field_names_it() -> None:
    assert StarConfig().generation.engine == "transformers"
    with pytest.raises(ConfigError, match="backend was renamed to engine"):
        StarConfig.from_dict({"generation": {"backend": "transformers", "batch_size": 4}})
    # a run directory written before the removal (its config.json has the removed fields null) resumes: its result
    # fields equal the new spelling's
    old = StarConfig.from_dict({"generation": {"engine": "transformers", "backend": None, "base_url": None, "served_model": None}})
    assert old.result_fields() == StarConfig.from_dict({"generation": {"engine": "transformers"}}).result_fields()
    assert StarConfig.from_dict({"generation": {"engine": "server"}}).generation.server.command.startswith("vllm serve {checkpoint}")


@pytest.mark.parametrize("generation", [{"backend": "openai"}, {"backend": "openai", "base_url": "http://h:8000/v1", "served_model": "x"},
                                        {"base_url": "http://h:8000/v1"}])
def test_a_server_the_loop_does_not_start_is_refused_with_the_way_out(generation: dict) -> None:
    with pytest.raises(ConfigError) as e:
        StarConfig.from_dict({"generation": generation})
    assert "engine: server" in str(e.value) and "{checkpoint}" in str(e.value)


def test_backend_beside_engine_is_refused_too() -> None:
    with pytest.raises(ConfigError, match="backend was renamed to engine"):
        StarConfig.from_dict({"generation": {"backend": "transformers", "engine": "vllm"}})


def test_how_a_server_is_started_does_not_block_resume_but_what_it_runs_does() -> None:
    a = StarConfig.from_dict({"generation": {"engine": "server", "server": {"command": "a {checkpoint} {port}", "port": 9000}}})
    b = StarConfig.from_dict({"generation": {"engine": "server", "server": {"command": "b {checkpoint} {port}"}}})
    c = StarConfig.from_dict({"generation": {"engine": "server", "server": {"server_kind": "sglang"}}})
    assert a.result_fields() == b.result_fields() != c.result_fields()


def test_the_published_vllm_config_starts_a_server_per_checkpoint() -> None:
    cfg = StarConfig.from_file("commonsense_qa_vllm")  # shipped in the package
    assert cfg.generation.engine == "server"
    argv = server_argv(cfg.generation.server.command, checkpoint="/runs/cqa/iter_3/checkpoint", port=8123, model_name="m")
    assert argv[:3] == ["vllm", "serve", "/runs/cqa/iter_3/checkpoint"] and "8123" in argv


# --------------------------------------------------------------------------- vllm (no vllm needed)


def test_vllm_inputs_map_each_request_to_one_sample_with_its_own_seed() -> None:
    reqs = [Request(prompt="Q1\nA:", max_tokens=40, temperature=0.0, stop=("\n\n",), seed=7),
            Request(prompt="Q2\nA:", max_tokens=8, temperature=0.7, top_p=0.9, seed=8, sample_index=1)]
    prompts, params = vllm_inputs(reqs)
    assert prompts == ["Q1\nA:", "Q2\nA:"]
    assert params == [{"n": 1, "temperature": 0.0, "top_p": 1.0, "max_tokens": 40, "stop": ["\n\n"], "seed": 7},
                      {"n": 1, "temperature": 0.7, "top_p": 0.9, "max_tokens": 8, "stop": [], "seed": 8}]
    with pytest.raises(EngineError, match="plain prompts"):
        vllm_inputs([Request(messages=({"role": "user", "content": "hi"},))])


def test_vllm_outputs_become_completions() -> None:
    sample = SimpleNamespace(text=" 12\n", token_ids=[1, 2, 3], finish_reason="stop")
    c = vllm_completion(SimpleNamespace(prompt_token_ids=[5, 6], outputs=[sample]))
    assert (c.text, c.prompt_tokens, c.completion_tokens, c.finish_reason) == (" 12\n", 2, 3, "stop")


def test_the_vllm_engine_without_vllm_says_how_to_get_it() -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="pip install vllm"):
            require_vllm()
    else:
        pytest.skip("vllm is installed")


def test_store_identity_names_engine_and_weights() -> None:
    cfg = StarConfig.from_dict({"generation": {"engine": "server", "server": {"server_kind": "serve-model"}}})
    ident = store_identity(cfg, "sha256:abc")
    assert ident["engine"] == "server" and ident["weights"] == "sha256:abc" and ident["server_kind"] == "serve-model"
    assert store_identity(StarConfig(), "sha256:abc") != store_identity(StarConfig(), "sha256:def")


def test_decoder_graph_is_validated_keyed_and_leaves_old_runs_alone(tmp_path: Path) -> None:
    """generation.decoder: graph selects the transformers backend's static-cache decoder; it is refused for other
    engines and against another options.mode; the store key names it only when set, and a resume may change it
    (like the dtype, it regenerates instead of being refused)."""
    from pydantic import ValidationError

    graph = StarConfig.from_dict({"generation": {"decoder": "graph"}})
    assert graph.generation.decoder == "graph" and StarConfig().generation.decoder == "default"
    assert store_identity(graph, "sha256:abc")["decoder"] == "graph"
    assert "decoder" not in store_identity(StarConfig(), "sha256:abc")  # the stores of runs made before the field
    assert graph.result_fields() == StarConfig().result_fields()
    for bad in ({"decoder": "cuda"}, {"decoder": "graph", "engine": "vllm"},
                {"decoder": "graph", "options": {"mode": "prefix"}}):
        with pytest.raises((ValidationError, ConfigError)):
            StarConfig.from_dict({"generation": bad})


@pytest.mark.slow
def test_decoder_graph_opens_a_transformers_session_in_graph_mode(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from thoughtsource.star.engines import open_session

    cfg = StarConfig.from_dict({"generation": {"decoder": "graph", "batch_size": 4}})
    session = open_session(cfg, 0, "embedded", "sha256:m0", log_dir=tmp_path)
    try:
        assert session.backend.mode == "graph" and session.backend.options.batch_size == 4
    finally:
        session.close()


def test_model_fingerprint_hashes_the_checkpoint_files(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"weights-1")
    first = model_fingerprint(str(ckpt))
    assert first.startswith("sha256:") and model_fingerprint(str(ckpt)) == first
    time.sleep(0.01)
    (ckpt / "model.safetensors").write_bytes(b"weights-2")
    assert model_fingerprint(str(ckpt)) != first
    assert model_fingerprint("org/not-a-folder") == "name:org/not-a-folder"


# --------------------------------------------------------------------------- server (a stub)

STUB = '''
import json, sys, http.server
port, body = int(sys.argv[1]), open(sys.argv[2]).read().encode()
print("stub serving", sys.argv[3], flush=True)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


def _stub(tmp_path: Path, entry: dict) -> str:
    (tmp_path / "stub.py").write_text(STUB)
    (tmp_path / "body.json").write_text(json.dumps({"object": "list", "data": [entry]}))
    return f"{sys.executable} {tmp_path / 'stub.py'} {{port}} {tmp_path / 'body.json'} {{checkpoint}}"


def _server(tmp_path: Path, command: str, fingerprint: str = "sha256:good", **opts: object) -> ServerProcess:
    options = ServerEngine(**{"command": command, "model_name": "star-current", "startup_timeout_s": 20, "stop_grace_s": 2, **opts})
    return ServerProcess(options, str(tmp_path / "ckpt"), fingerprint, tmp_path / "logs" / "server.log")


def test_server_is_started_checked_and_stopped(tmp_path: Path) -> None:
    server = _server(tmp_path, _stub(tmp_path, {"id": "star-current", "fingerprint": "sha256:good"}))
    served = server.start()
    proc = server.proc
    assert served == {"id": "star-current", "fingerprint": "sha256:good", "root": None}
    assert server.argv[-1] == str(tmp_path / "ckpt") and server.base_url == f"http://127.0.0.1:{server.port}/v1"
    server.stop()
    assert proc is not None and proc.poll() is not None and server.proc is None
    assert "stub serving" in (tmp_path / "logs" / "server.log").read_text()


@pytest.mark.parametrize("entry, message", [
    ({"id": "star-current", "fingerprint": "sha256:old"}, "serves weights sha256:old, not the checkpoint"),
    ({"id": "star-current", "root": "/models/base"}, "serves /models/base, not the checkpoint"),
    ({"id": "another-name"}, "not 'star-current'"),
])
def test_a_server_holding_another_model_is_refused_and_stopped(tmp_path: Path, entry: dict, message: str) -> None:
    server = _server(tmp_path, _stub(tmp_path, entry))
    with pytest.raises(EngineError, match=message):
        server.start()
    assert server.proc is None


def test_a_server_reporting_its_root_is_checked_against_the_checkpoint(tmp_path: Path) -> None:
    server = _server(tmp_path, _stub(tmp_path, {"id": "star-current", "root": str(tmp_path / "ckpt")}))
    try:
        assert server.start()["root"] == str(tmp_path / "ckpt")
    finally:
        server.stop()


def test_a_server_that_dies_fails_with_its_last_output(tmp_path: Path) -> None:
    cmd = f"{sys.executable} -c \"import sys; print('CUDA out of memory loading', sys.argv[1]); sys.exit(3)\" {{checkpoint}}"
    with pytest.raises(EngineError) as e:
        _server(tmp_path, cmd).start()
    assert "exited with status 3" in str(e.value) and "CUDA out of memory loading" in str(e.value)


def test_a_server_that_never_answers_times_out_and_is_killed(tmp_path: Path) -> None:
    cmd = f"{sys.executable} -c \"import time; print('still loading', flush=True); time.sleep(600)\""
    server = _server(tmp_path, cmd, startup_timeout_s=2)
    t0 = time.monotonic()
    with pytest.raises(EngineError, match=r"did not answer .*/v1/models within 2 s(.|\n)*still loading"):
        server.start()
    assert time.monotonic() - t0 < 30 and server.proc is None


def test_bad_placeholders_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="checkpoint"):
        server_argv("vllm serve {model}", checkpoint="c", port=1, model_name="m")
    assert server_argv("serve '{checkpoint}' --port={port}", checkpoint="/a b/c", port=5, model_name="m") == ["serve", "/a b/c", "--port=5"]


# --------------------------------------------------------------------------- vllm engine on a stand-in vllm module


class _FakeLLM:
    instances: ClassVar[list[_FakeLLM]] = []

    def __init__(self, model: str, seed: int, dtype: str, **options: object) -> None:
        self.model, self.seed, self.dtype, self.options = model, seed, dtype, options
        self.calls: list[tuple[list[str], list[dict]]] = []
        self.shut = False
        self.llm_engine = SimpleNamespace(engine_core=SimpleNamespace(shutdown=self._shutdown))
        _FakeLLM.instances.append(self)

    def _shutdown(self) -> None:
        self.shut = True

    def generate(self, prompts: list[str], params: list[dict], use_tqdm: bool = True) -> list[SimpleNamespace]:
        self.calls.append((prompts, params))
        return [SimpleNamespace(prompt_token_ids=[0] * len(p.split()), outputs=[
            SimpleNamespace(text=f" echo {len(p)}", token_ids=[1, 2], finish_reason="stop")]) for p in prompts]


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A stand-in ``vllm`` module: LLM, SamplingParams (a dict) and the parallel-state cleanup (recorded)."""
    cleaned: list[str] = []
    vllm = ModuleType("vllm")
    vllm.LLM = _FakeLLM  # type: ignore[attr-defined]
    vllm.SamplingParams = dict  # type: ignore[attr-defined]
    distributed = ModuleType("vllm.distributed")
    parallel_state = ModuleType("vllm.distributed.parallel_state")
    parallel_state.destroy_model_parallel = lambda: cleaned.append("model_parallel")  # type: ignore[attr-defined]
    parallel_state.destroy_distributed_environment = lambda: cleaned.append("distributed")  # type: ignore[attr-defined]
    distributed.parallel_state = parallel_state  # type: ignore[attr-defined]
    vllm.distributed = distributed  # type: ignore[attr-defined]
    for name, mod in (("vllm", vllm), ("vllm.distributed", distributed), ("vllm.distributed.parallel_state", parallel_state)):
        monkeypatch.setitem(sys.modules, name, mod)
    _FakeLLM.instances.clear()
    return cleaned


def test_vllm_engine_generates_with_sampling_params_and_frees_itself(fake_vllm: list[str], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from thoughtsource.star.engines import open_session

    cfg = StarConfig.from_dict({"seed": 3, "generation": {"engine": "vllm", "dtype": "bfloat16", "options": {"gpu_memory_utilization": 0.5}}})
    session = open_session(cfg, 2, "/runs/x/iter_2/checkpoint", "sha256:m2", log_dir=tmp_path)
    llm = _FakeLLM.instances[-1]
    assert (llm.model, llm.seed, llm.dtype, llm.options) == ("/runs/x/iter_2/checkpoint", 3, "bfloat16", {"gpu_memory_utilization": 0.5})
    out = asyncio.run(session.backend.complete([Request(prompt="a b c", max_tokens=9, stop=("\n",), seed=11)]))
    assert out[0].text == " echo 5" and (out[0].prompt_tokens, out[0].completion_tokens) == (3, 2)
    assert llm.calls[0][1] == [{"n": 1, "temperature": 0.0, "top_p": 1.0, "max_tokens": 9, "stop": ["\n"], "seed": 11}]
    assert session.describe() == {"engine": "vllm", "path": "/runs/x/iter_2/checkpoint", "fingerprint": "sha256:m2"}
    session.close()
    assert llm.shut and session.backend.llm is None and fake_vllm == ["model_parallel", "distributed"]
    # under a multi-process launch vLLM would fight accelerate's process group: refused
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="engine: server"):
        open_session(cfg, 2, "/runs/x/iter_2/checkpoint", "sha256:m2", log_dir=tmp_path)


def test_the_loop_runs_a_fewshot_evaluation_on_the_vllm_engine(fake_vllm: list[str], tmp_path: Path) -> None:
    from thoughtsource.star.loop import StarRun

    cfg = StarConfig.from_dict({"task": "arithmetic", "task_options": {"min_digits": 1, "max_digits": 1, "n_train": 2, "n_test_per_digit": 2},
                                "baseline": "fewshot", "fewshot_k": 1, "generation": {"engine": "vllm", "max_new_tokens": 20}})
    run = StarRun(cfg, tmp_path / "run", show_progress=False)
    run.run()
    test = read_json(tmp_path / "run" / "iter_0" / "test.json")
    assert test["model"]["engine"] == "vllm" and test["model"]["fingerprint"] == model_fingerprint(run.base_path)
    prompts = [p for prompts, _ in _FakeLLM.instances[0].calls for p in prompts]
    dev = read_json(tmp_path / "run" / "iter_0" / "dev.json")
    assert len(prompts) == len(test["rows"]) + len(dev["rows"]) and test["stats"]["requested"] == 2  # each problem once
    assert sorted(r["text"].strip() for r in test["rows"]) <= sorted(f"echo {len(p)}" for p in prompts)
    assert len(_FakeLLM.instances) == 1 and _FakeLLM.instances[0].shut  # one engine for M_0, shut when the run ended
    assert "model_parallel" in fake_vllm


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_server_does_not_outlive_a_killed_loop(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess

    command = _stub(tmp_path, {"id": "star-current", "fingerprint": "sha256:good"})
    script = (f"from thoughtsource.star.config import ServerEngine\nfrom thoughtsource.star.engines import ServerProcess\n"
              f"s = ServerProcess(ServerEngine(command={command!r}), {str(tmp_path / 'ckpt')!r}, 'sha256:good', "
              f"__import__('pathlib').Path({str(tmp_path / 'log')!r}))\ns.start()\nprint(s.proc.pid, flush=True)\n"
              "__import__('time').sleep(600)\n")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    loop = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert loop.stdout is not None
        server_pid = int(loop.stdout.readline())
        os.kill(loop.pid, signal.SIGKILL)  # no finally, no atexit in the loop
        loop.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(server_pid, 0)
            except ProcessLookupError:
                break
            with open(f"/proc/{server_pid}/stat") as fh:  # a zombie (exited, not yet reaped by init) is gone too
                if fh.read().split(") ")[1].startswith("Z"):
                    break
            time.sleep(0.1)
        else:
            os.kill(server_pid, signal.SIGKILL)
            pytest.fail("the server outlived the killed loop")
    finally:
        loop.kill()
