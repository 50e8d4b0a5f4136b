#!/bin/bash
# Issue 35, item 2, on the lent GPU machine: the transformers engine's old path against the static-cache graph decoder
# (and compiled static generate as a ceiling), SmolLM2-135M in bf16, batch 256 (benchmarks/bench_gpu_generation.py).
#
# Prepared here (the device has torch, transformers, accelerate, peft; no pydantic/ijson/gguf, no network):
#   .gpu/whl/*.whl   wheels of what the device lacks (cp312 manylinux), as for benchmarks/star_gpu_tiny.sh
#   .gpu/smollm2/    the embedded model converted to a transformers folder (config, safetensors, tokenizer):
#                    PYTHONPATH=src python -c "from thoughtsource.embedded import embedded_model_dir; print(embedded_model_dir())"
#                    and copy that folder to .gpu/smollm2  (.gpu/ is git-ignored: pass it in carry)
# Run (repository root as cwd; results in $OUT, at most 4 files):
#   run(command="bash benchmarks/gpu_run.sh", carry=[".gpu"], timeout_s=600)
# Budget: each arm runs each workload twice (warm-up + timed); at the old engine's ~1,300 tok/s the old arm needs
# ~25 s per pass of arith_long; everything should end in 3-5 minutes on an H100. Each step is under `timeout`.
set -x
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=4
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ls .gpu/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl \
    || echo "STEP FAILED: wheel install (rc $?)"
fi
export PYTHONPATH=/tmp/site:$PWD/src
MODEL=${MODEL:-.gpu/smollm2}
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv || echo "STEP FAILED: nvidia-smi"
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name(0))" \
  || echo "STEP FAILED: torch/transformers import"
python3 -c "import thoughtsource.backends.graph_decode, pydantic; print('thoughtsource imports')" \
  || echo "STEP FAILED: thoughtsource import (wheels in .gpu/whl?)"
ls -la "$MODEL" || echo "STEP FAILED: no model folder $MODEL"

# 1. smoke: 16 prompts, arith only, no ceiling (fast; shows a graph-capture failure early)
timeout 100 python3 benchmarks/bench_gpu_generation.py --model "$MODEL" --n 16 --batch 16 --arms old,graph --workloads arith \
  --out "$OUT/smoke.json" > "$OUT/smoke.log" 2>&1
echo "smoke rc=$?"; tail -40 "$OUT/smoke.log"

# 2. the measurement: 256 prompts per workload, batch 256, old / graph / ceiling in one process
timeout 420 python3 benchmarks/bench_gpu_generation.py --model "$MODEL" --n 256 --batch 256 --max-new 128 \
  --out "$OUT/gpu_generation.json" > "$OUT/gpu_generation.log" 2>&1
echo "bench rc=$?"; grep "^\[" "$OUT/gpu_generation.log"; grep -B2 -A30 "Traceback" "$OUT/gpu_generation.log" | head -80
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
ls -la "$OUT"
