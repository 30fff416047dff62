#!/usr/bin/env bash
# The README's comparison pictures, from real runs: trains the 4-device example's model on
# one process and on 2 replicas (same global batch, 300 steps), and the GPipe and 1F1B
# pipeline examples, stores the four runs, then opens the real workbench under Xvfb,
# selects them in the Runs dock, chooses Compare and saves each tab of the comparison
# window at 1280x720 and 1920x1080 into docs/screenshots/ (compare-WxH-*.png).
# Needs a build (scripts/build.sh) and python3 (to derive the plans).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/screenshots}"
work="$(mktemp -d)"
db="$work/compare.db"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

# replicas NAME N: the 4-device example with N replicas, written to $work/NAME.json
replicas() {
  python3 - "$work/$1.json" "$2" <<'EOF'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
plan = json.load(open("resources/plans/dp4_mlp_fashion.json"))
plan["name"] = path.rsplit("/", 1)[-1][:-5]
plan["parallel"]["data_parallel"] = n
plan["parallel"]["devices"] = plan["parallel"]["devices"][:n]
json.dump(plan, open(path, "w"), indent=1)
EOF
}
replicas mlp-1-process 1
replicas mlp-2-replicas 2
cp resources/plans/gpipe_mlp.json resources/plans/onefoneb_mlp.json "$work/"

ids=()
for plan in mlp-1-process mlp-2-replicas gpipe_mlp onefoneb_mlp; do
  id="$(build/app/loom-cli run "$work/$plan.json" --db "$db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
  echo "$plan: run $id"
  ids+=("$id")
done
xvfb-run -a -s "-screen 0 2560x1440x24" build/app/loom-compare-shots "$out" "$db" "${ids[@]}"
echo "screenshots in $out (runs stored in $db)"
