#!/usr/bin/env bash
# Pictures of every window state issue 31 names (loom-state-shots), from real runs: a
# 60-step 1F1B pipeline run (1f1b-60), the 3-rank parameter-server example cut to 60 steps
# (ps-3; 3 ranks on a 2-core machine record oversubscription), and 2 data-parallel
# replicas evaluating every 20 steps (dp2-eval), stored in a new store in a temporary
# folder; then the harness under Xvfb at 1280x720 and 1920x1080, light and dark, into
# OUT (default /tmp/states). Builds nothing: needs loom-cli, loom-rank and
# loom-state-shots built in build/ (scripts/build.sh, or those targets).
# Usage: scripts/state_screenshots.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/states}"
work="$(mktemp -d)"
db="$work/states.db"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

# derive NAME SOURCE PYTHON: $work/NAME.json is SOURCE renamed NAME and changed by PYTHON (on `plan`)
derive() {
  python3 - "$work/$1.json" "$2" "$3" <<'EOF'
import json, sys
path, source, change = sys.argv[1], sys.argv[2], sys.argv[3]
plan = json.load(open(source))
plan["name"] = path.rsplit("/", 1)[-1][:-5]
exec(change)
json.dump(plan, open(path, "w"), indent=1)
EOF
}
derive 1f1b-60 resources/plans/onefoneb_mlp.json 'plan["training"].update({"steps": 60, "eval_every": 0})'
derive ps-3 resources/plans/parameter_server_mlp.json 'plan["training"].update({"steps": 60, "eval_every": 0})'
derive dp2-eval resources/plans/dp4_mlp_fashion.json '
plan["training"].update({"steps": 60, "eval_every": 20})
plan["parallel"]["data_parallel"] = 2
plan["parallel"]["devices"] = plan["parallel"]["devices"][:2]'

for plan in 1f1b-60 ps-3 dp2-eval; do
  SECONDS=0
  build/app/loom-cli run "$work/$plan.json" --db "$db" --json |
    python3 -c 'import json,sys; r = json.loads(sys.stdin.read().strip().splitlines()[-1]); print(r["name"], "run", r["id"], r["status"], end="")'
  echo ", ${SECONDS} s"
done
mkdir -p "$out"
xvfb-run -a -s "-screen 0 2560x1440x24" build/app/loom-state-shots "$out" "$db" --size 1280x720 --size 1920x1080
echo "pictures in $out (runs stored in $db)"
