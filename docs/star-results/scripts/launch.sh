#!/bin/bash
# The docs/star-results.md experiment: three variants side by side (CPU, 1 thread each).
cd /work/wt/star
COMMON="--task arithmetic --model embedded --digits 1-3 --n-train 60 --n-test 8 --iterations 2 --fewshot-k 2 --steps-first 16 --warmup-steps 4 --batch-size 8 --lr 1e-4 --gen-batch-size 16 --seed 0"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=src:/tmp/star_dev
nohup /work/venv/bin/python -m thoughtsource star run $COMMON --out star_runs/star --resume > star_runs/star.log 2>&1 &
echo $! > star_runs/star.pid
nohup /work/venv/bin/python -m thoughtsource star run $COMMON --no-rationalization --out star_runs/norat --resume > star_runs/norat.log 2>&1 &
echo $! > star_runs/norat.pid
nohup /work/venv/bin/python -m thoughtsource star run $COMMON --baseline direct --out star_runs/direct --resume > star_runs/direct.log 2>&1 &
echo $! > star_runs/direct.pid
