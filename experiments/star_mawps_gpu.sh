#!/bin/bash
# Issue 30's MAWPS experiment on the lent GPU machine (one H100), all arms side by side as separate processes
# (a 135M model leaves the GPU mostly idle), inside one device call; what finished comes back in $OUT.
# Prepared by the caller: wheels installed into /tmp/site, the embedded model converted to /tmp/smol (as
# benchmarks/gpu_run.sh's callers do), the raw MAWPS files in .gpu/data/mawps. Then:  bash experiments/star_mawps_gpu.sh
# Every arm resumes (`star run --resume`), so the same call on a warm machine continues it.
set -u
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=2
export THOUGHTSOURCE_DATA=$PWD/.gpu/data
MODEL=${MODEL:-/tmp/smol}; ROOT=${ROOT:-/tmp/mawps}; BUDGET=${BUDGET:-480}; ARMS=${ARMS:-star verified norat direct gold star_k4}
OUT=${OUT:-/tmp/out}; mkdir -p "$ROOT/logs" "$OUT"
t0=$(date +%s)
for arm in $ARMS; do
  python3 experiments/star_mawps.py --root "$ROOT" --arms "$arm" -- --model "$MODEL" > "$ROOT/logs/driver_$arm.log" 2>&1 &
done
while [ $(( $(date +%s) - t0 )) -lt "$BUDGET" ] && [ -n "$(jobs -r)" ]; do
  sleep 15
  echo "[$(( $(date +%s) - t0 ))s] $(for a in $ARMS; do printf '%s:%s ' $a "$(ls -d $ROOT/$a/iter_*/test.json 2>/dev/null | wc -l)"; done) $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
done
kill $(jobs -p) 2>/dev/null; sleep 3
for arm in $ARMS; do echo "== $arm"; grep -v "━\|it/s\]" "$ROOT/logs/$arm.log" 2>/dev/null | grep -i "error\|Traceback\|failed" | head -5; tail -3 "$ROOT/logs/driver_$arm.log"; done
# the runs without model weights and the completion stores: metrics, every step's JSON, training data, logs
tar -czf "$OUT/mawps_runs.tar.gz" -C "$ROOT" --exclude='checkpoint' --exclude='trainer' --exclude='*.safetensors' \
  --exclude='completions.sqlite*' . && ls -la "$OUT"
