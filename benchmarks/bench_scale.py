"""Files larger than memory: peak RSS and wall time of ``info``, ``validate``, ``convert``, ``evaluate`` and
``training-data sft`` (streaming, issue 33) against the in-memory path they replaced (``Collection.load`` then the same
work), in the same run.

Inputs are built from the released GPT-3.5 run of ``thoughtsource_examples`` (its samples with new ids, real texts):
``--kind cots`` as released (~3 generated CoTs of ~1 KB per sample), ``--kind traces`` with each CoT repeated to
~20 KB like a reasoning model's thinking. The JSON file is written here; its JSONL and Parquet forms by the streaming
``convert``. Every measurement is a fresh process under ``/usr/bin/time -f %M`` (the whole process's peak RSS).

    python benchmarks/bench_scale.py --mb 200 --kind traces          # ~10,000 samples of 20 KB traces
    python benchmarks/bench_scale.py --mb 200 --kind cots --skip-memory-path-over 2000
    python benchmarks/bench_scale.py --mb 200 --kind cots --commands evaluate

``evaluate`` is measured as the code of the command (score every answer, results.json, the CSV and Markdown tables;
no plots, nothing printed): streaming, over ``io.FileSamples`` with ``answers_csv`` (answers.csv written as it goes, the
other tables from compact per-answer codes); in memory, over ``Collection.load`` with the per-answer DataFrame.

    python benchmarks/bench_scale.py --mb 1500 --kind cots --commands evaluate --formats json --skip-memory-path-over 0
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from thoughtsource.testing.scale import Replicated, write_replicated

REPO = Path(__file__).resolve().parents[1]
RUN = "thoughtsource_examples/model_runs/thoughtsource_67_openai_chat_gpt-3.5-turbo_None_None-kojima-01-zhou-01.json"

IN_MEMORY = {  # the code each command ran before it streamed
    "info": "from thoughtsource.collection import Collection; Collection.load({f!r}).info()",
    "validate": "from thoughtsource.collection import Collection; Collection.load({f!r}, validate=True)",
    "convert": "from thoughtsource.collection import Collection; Collection.load({f!r}).to_jsonl({out!r})",
    "evaluate": "from thoughtsource.collection import Collection; c = Collection.load({f!r})\n{evaluate}",
    # every record built from the loaded file, then one Parquet table
    "training-data": ("from collections import Counter\nimport pyarrow as pa, pyarrow.parquet as pq\n"
                      "from thoughtsource import training_data as td\n"
                      "r = list(td.sft_records(td.load_sources([{f!r}]), left_out=Counter(), all_cots=True, "
                      "include_eval_splits=True))\npq.write_table(pa.Table.from_pylist(r), {td!r})"),
}
EVALUATE = """from thoughtsource.evaluate import evaluate_frame, write_tables
from thoughtsource.reporting.results import results_document, write_results
r = evaluate_frame(c{kw})
write_results({ev!r} + '/results.json', results_document(r, c, file={f!r}, mode='strict', ks=None, out_dir={ev!r}))
write_tables(r, {ev!r})"""
STREAMING = {  # commands measured as code, not through the CLI
    "evaluate": "from thoughtsource.io import FileSamples; c = FileSamples({f!r})\n{evaluate}",
}
COMMANDS = ("info", "validate", "convert", "evaluate", "training-data")


def build(src: Path, out: Path, mb: int, kind: str) -> Replicated:
    """A ThoughtSource JSON file of about ``mb`` MB from the samples of ``src``, one split per released split."""
    collection = json.loads(src.read_text())
    return write_replicated(collection, out, mb << 20, trace_chars=20_000 if kind == "traces" else None)


def measure(code: list[str]) -> tuple[float, float, bool]:
    """(peak RSS in MB, wall seconds, finished) of one process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *code], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    rss = int(p.stderr.strip().splitlines()[-1]) / 1024
    return rss, wall, p.returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="size of the JSON input in MB")
    ap.add_argument("--kind", choices=("cots", "traces"), default="traces")
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--skip-memory-path-over", type=int, default=4000,
                    help="do not run the in-memory path on inputs over this many MB (it needs ~6x the file)")
    ap.add_argument("--commands", default=",".join(COMMANDS), help=f"comma-separated, of {', '.join(COMMANDS)}")
    ap.add_argument("--formats", default="json,jsonl,parquet", help="comma-separated, of json, jsonl, parquet")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench_scale.", dir=REPO.parent) as tmp:
        work = Path(tmp)
        js = work / "big.json"
        t = time.perf_counter()
        n = build(args.data / RUN, js, args.mb, args.kind)
        print(f"built {js.stat().st_size / 1e6:.0f} MB: {n.samples:,} samples, {n.cots:,} CoTs, {n.answers:,} answers "
              f"({args.kind}) in {time.perf_counter() - t:.1f} s", flush=True)
        formats = args.formats.split(",")
        inputs = {f: p for f, p in (("json", js), ("jsonl", work / "big.jsonl"), ("parquet", work / "pq")) if f in formats}
        for fmt, path in ((f, p) for f, p in inputs.items() if f != "json"):
            subprocess.run([py, "-m", "thoughtsource", "-q", "convert", str(js), str(path), "--to", fmt], check=True)
        print("| input | command | streaming: peak RSS, wall | in memory: peak RSS, wall | time ratio |")
        print("|---|---|---|---|---|")
        for fmt, path in inputs.items():
            size = sum(p.stat().st_size for p in path.rglob("*")) if path.is_dir() else path.stat().st_size
            for command in args.commands.split(","):
                out = work / "out.jsonl"
                ev = work / "ev"
                ev.mkdir(exist_ok=True)
                fill = {"f": str(path), "out": str(out), "ev": str(ev), "td": str(work / "td.parquet")}
                code = EVALUATE.format(kw="", **fill)
                if command in STREAMING:
                    streamed = EVALUATE.format(kw=f", answers_csv={str(ev / 'answers.csv')!r}", **fill)
                    argv = [py, "-c", STREAMING[command].format(evaluate=streamed, **fill)]
                else:
                    argv = [py, "-m", "thoughtsource", "-q", command, str(path)]
                    argv += [str(out), "--to", "jsonl"] if command == "convert" else []
                    if command == "training-data":  # sft of every CoT (the released runs' splits are test splits)
                        argv[-2:] = ["training-data", "sft", str(path), "--out", str(work / "td"), "--force", "--all-cots",
                                     "--include-eval-splits"]
                rss, wall, ok = measure(argv)
                assert ok, argv
                mem = "not run (input too large)"
                ratio = ""
                if size / 1e6 <= args.skip_memory_path_over:
                    m_rss, m_wall, m_ok = measure([py, "-c", IN_MEMORY[command].format(evaluate=code, **fill)])
                    mem = f"{m_rss:.0f} MB, {m_wall:.1f} s" if m_ok else f"failed ({m_rss:.0f} MB)"
                    ratio = f"{wall / m_wall:.2f}" if m_ok else ""
                print(f"| {fmt} ({size / 1e6:.0f} MB) | {command} | {rss:.0f} MB, {wall:.1f} s | {mem} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
