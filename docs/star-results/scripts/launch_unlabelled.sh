#!/bin/bash
# Appendix H variant next to its gold-answer twin (same settings), run one after the other.
cd /work/wt/star
COMMON="--task arithmetic --model embedded --digits 1-2 --n-train 24 --n-test 8 --iterations 1 --fewshot-k 2 --steps-first 16 --warmup-steps 4 --batch-size 8 --lr 1e-4 --gen-batch-size 16 --seed 0"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=src
/work/venv/bin/python -m thoughtsource star run $COMMON --out star_runs/gold12 --resume > star_runs/gold12.log 2>&1
/work/venv/bin/python -m thoughtsource star run $COMMON --pseudo-labels majority --pseudo-k 3 --out star_runs/majority12 --resume > star_runs/majority12.log 2>&1
