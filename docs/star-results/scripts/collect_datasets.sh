#!/usr/bin/env bash
# Copy the metrics of experiment 3 (CommonsenseQA, GSM8K) into docs/star-results/datasets/ and write its tables.
# Safe to run while the arms are still running (every metrics.json is written atomically).
set -euo pipefail
OUT=${OUT:-star_runs/v3gpu}  # the GPU runs; OUT=star_runs/v3 for the CPU chains
DOC=docs/star-results/datasets
export OMP_NUM_THREADS=1 PYTHONPATH=src
PY=${PY:-.venv/bin/python}
mkdir -p "$DOC"
for ds in cqa gsm8k; do
  arms=()
  for arm in star direct; do
    name=${ds}_${arm}
    [ -f "$OUT/$name/metrics.json" ] || continue  # the summary exists once iteration 0 is done
    "$PY" -c 'import sys; from thoughtsource.star.analysis.compare_runs import load_run; from thoughtsource.io import write_json
write_json(sys.argv[2], load_run(sys.argv[1]))' "$OUT/$name" "$DOC/${name}_metrics.json"
    for d in "$OUT/$name"/iter_*/; do
      n=$(basename "$d")
      [ -f "$d/filter.json" ] && cp "$d/filter.json" "$DOC/${name}_${n}_filter.json"
    done
    arms+=("$arm=$DOC/${name}_metrics.json")
  done
  [ ${#arms[@]} -gt 0 ] || continue
  "$PY" -m thoughtsource star report "${arms[@]}" --out "$DOC/${ds}_tables.md" --title "Experiment 3: $ds"
  "$PY" -m thoughtsource star compare "${arms[@]}" --out "$DOC/${ds}_compare.png" > /dev/null
done
echo "wrote $DOC"
