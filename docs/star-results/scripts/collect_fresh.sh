#!/usr/bin/env bash
# Copy the metrics of experiment 2 into docs/star-results/fresh/ and regenerate its tables and plots.
# Safe to run while the arms are still running (every metrics.json is written atomically).
set -euo pipefail
OUT=${OUT:-star_runs/v2}
DOC=docs/star-results/fresh
export OMP_NUM_THREADS=1 PYTHONPATH=src
PY=${PY:-.venv/bin/python}
mkdir -p "$DOC"
arms=()
for name in star verified norat direct; do
  [ -f "$OUT/$name/config.json" ] || continue
  # the run's summary (or, for a run still in its first iteration, its per-iteration metrics)
  "$PY" -c 'import sys; from thoughtsource.star.analysis.compare_runs import load_run; from thoughtsource.io import write_json
write_json(sys.argv[2], load_run(sys.argv[1]))' "$OUT/$name" "$DOC/${name}_metrics.json"
  for d in "$OUT/$name"/iter_*/; do  # the filter's counts and rejected examples per iteration
    n=$(basename "$d")
    [ -f "$d/filter.json" ] && cp "$d/filter.json" "$DOC/${name}_${n}_filter.json"
  done
  [ -f "$OUT/$name/plots/per_group.png" ] && cp "$OUT/$name/plots/per_group.png" "$DOC/${name}_per_group.png"
  arms+=("$name=$DOC/${name}_metrics.json")
done
"$PY" -m thoughtsource star report "${arms[@]}" --out "$DOC/tables.md" --title "Experiment 2: fresh samples, 1-3 digits"
"$PY" -m thoughtsource star compare "${arms[@]}" --out "$DOC/compare.png" --markdown /dev/null > /dev/null
for g in 1-digit 2-digit 3-digit; do
  "$PY" -m thoughtsource star compare "${arms[@]}" --group "$g" --out "$DOC/compare_$g.png" > /dev/null
done
echo "wrote $DOC"
