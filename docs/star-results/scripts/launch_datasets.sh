#!/usr/bin/env bash
# Experiment 3 of docs/star-results.md: CommonsenseQA and GSM8K end to end on the embedded model.
# Two chains side by side, one torch thread each: the direct baseline (cheap), then the STaR arm.
# Re-running resumes every arm from its last complete step.
set -euo pipefail
OUT=${OUT:-star_runs/v3}
mkdir -p "$OUT"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=src
export THOUGHTSOURCE_DATA=${THOUGHTSOURCE_DATA:-../shared/data}
PY=${PY:-.venv/bin/python}
chain() {  # dataset config
  local name=$1 cfg=$2
  nohup bash -c "
    '$PY' -m thoughtsource star run --config '$cfg' --out '$OUT/${name}_direct' --resume --baseline direct --iterations 1 > '$OUT/${name}_direct.log' 2>&1
    '$PY' -m thoughtsource star run --config '$cfg' --out '$OUT/${name}_star' --resume > '$OUT/${name}_star.log' 2>&1
  " > /dev/null 2>&1 &
  echo "$name: pid $!"
}
chain cqa configs/star/commonsense_qa_cpu.yaml
chain gsm8k configs/star/gsm8k_cpu.yaml
