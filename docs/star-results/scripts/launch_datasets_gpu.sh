#!/usr/bin/env bash
# Experiment 3 of docs/star-results.md as it ran: the four arms (CQA and GSM8K, STaR and direct) side by side on
# one GPU, then a tiny arithmetic iteration with the transformers engine's default GPU mode (continuous batching,
# alone: it reserves most of the GPU's memory).  Re-running resumes every arm from its last finished step.
set -u
OUT=${OUT:-star_runs/v3gpu}
PY=${PY:-python3}
mkdir -p "$OUT"
run() { local name=$1; shift; "$PY" -m thoughtsource star run "$@" --out "$OUT/$name" --resume > "$OUT/$name.log" 2>&1 & }
run cqa_star --config configs/star/commonsense_qa_small_gpu.yaml
run cqa_direct --config configs/star/commonsense_qa_small_gpu.yaml --baseline direct --iterations 1
run gsm8k_star --config configs/star/gsm8k_small_gpu.yaml
run gsm8k_direct --config configs/star/gsm8k_small_gpu.yaml --baseline direct --iterations 1
wait
"$PY" -m thoughtsource star run --task arithmetic --model embedded --digits 1-2 --per-iteration 256 --n-test 32 --n-dev 0 \
  --iterations 1 --fewshot-k 2 --steps-first 8 --gen-batch-size 64 --out "$OUT/tiny" --resume > "$OUT/tiny.log" 2>&1
