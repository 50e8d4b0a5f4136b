#!/bin/bash
# The GPU check of docs/benchmarks.md ("STaR on one GPU"), run on the lent device machine in two calls:
#   here: wheels of what the device lacks in .gpu/whl (pydantic, pydantic_core, annotated-types, typing-inspection,
#         platformdirs, pysbd, sniffio, gguf; cp312 manylinux), the embedded GGUF split with `split -b 50M` into
#         .gpu/p1/part_aa and .gpu/p2/part_ab (.gpu/ is git-ignored);
#   call 1 (carry .gpu/p1): mkdir -p /tmp/g && cp .gpu/p1/part_aa /tmp/g/
#   call 2 (carry .gpu/p2 .gpu/whl benchmarks/star_gpu_tiny.sh): bash benchmarks/star_gpu_tiny.sh
set -u
t0=$(date +%s.%N); ts() { echo "[$(python3 -c "print(round($(date +%s.%N)-$t0,1))")s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD/src OMP_NUM_THREADS=4 TOKENIZERS_PARALLELISM=false
cat /tmp/g/part_aa .gpu/p2/part_ab > /tmp/g/SmolLM2-135M-Instruct.Q4_1.gguf
sha256sum /tmp/g/SmolLM2-135M-Instruct.Q4_1.gguf
python3 -c "import torch, transformers, accelerate; print(torch.__version__, transformers.__version__, accelerate.__version__, torch.cuda.get_device_name(0))"
ts convert
python3 -c "from pathlib import Path; from thoughtsource.embedded import _convert; _convert(Path('/tmp/g/SmolLM2-135M-Instruct.Q4_1.gguf'), Path('/tmp/smol'))" || exit 4
ts star
python3 -m thoughtsource star run --config arithmetic_gpu_tiny --model /tmp/smol --out /tmp/star 2>&1 | grep -v "━" | tail -60
ts done
mkdir -p $OUT/star
cd /tmp/star && find . -name "*.json" -size -5M | grep -v rationales | xargs -I{} cp --parents {} $OUT/star/ ; cp -r plots $OUT/star/ 2>/dev/null
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv
