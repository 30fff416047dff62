#!/usr/bin/env bash
# The prediction pictures (docs/prediction.md), from real runs, into OUT (default
# /tmp/loom-predict-shots; docs/screenshots holds the ones the docs show):
#   predicted-*  a 1F1B run beside its prediction (loom-cli predict --store), through the
#                comparison window (loom-compare-shots);
#   whatif-*     the What-if dock on the one-process MLP, calibrated by these runs: on
#                hosts like this one (scaling chart, searched layouts) and on the
#                1,024-GPU roofline cluster (loom-predict-shots);
#   calibrate-*  Run > Predict on an empty store, Calibrate now, a calibration run live
#                and the prediction it gave (loom-predict-shots --calibrate; about 40 s).
# Four short calibration runs (one process, 4 replicas, 1F1B, hybrid 2x2; about 30 s).
# Needs a build (scripts/build.sh), python3 and xvfb-run.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/loom-predict-shots}"  # docs/screenshots keeps the ones docs/prediction.md shows
work="$(mktemp -d)"
db="$work/predict.db"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

for p in mlp_fashion dp4_mlp_fashion onefoneb_mlp hybrid_mlp; do
  python3 - "resources/plans/$p.json" "$work/$p.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["training"]["steps"] = 150
plan["training"].pop("epochs", None)
json.dump(plan, open(sys.argv[2], "w"))
PY
  build/app/loom-cli run "$work/$p.json" --db "$db" > /dev/null
done
measured=$(build/app/loom-cli runs --db "$db" --json | python3 -c 'import json,sys; print([r["id"] for r in json.load(sys.stdin) if r["name"] == "1f1b-mlp"][0])')
predicted=$(build/app/loom-cli predict "$work/onefoneb_mlp.json" --db "$db" --store --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["id"])')
xvfb-run -a -s "-screen 0 2560x1440x24" build/app/loom-compare-shots "$out" "$db" "$predicted" "$measured" --prefix predicted
xvfb-run -a -s "-screen 0 2560x1440x24" build/app/loom-predict-shots "$out" "$db" resources/plans/mlp_fashion.json \
  resources/clusters/h100_128_nodes.json
xvfb-run -a -s "-screen 0 2560x1440x24" build/app/loom-predict-shots --calibrate "$out" "$work/calibrate" \
  resources/plans/mlp_fashion.json
rm -rf "$work"
