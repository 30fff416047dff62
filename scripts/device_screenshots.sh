#!/usr/bin/env bash
# Pictures of what a run ran on, from real runs on this machine, in the real workbench
# under Xvfb (loom-compare-shots --open ID --runs-only), into docs/screenshots/:
#   device-WxH-runs.png          the one-process run open (its caption over the timeline says
#                                "on cpu (MODEL)") and the Runs list's Mode column naming each
#                                run's device ("one process on cpu", "all-reduce, 4 replicas
#                                on cpu"; the imported PyTorch trace has none recorded);
#   device-WxH-runs-tooltip.png  the same with the one-process run's tooltip: its devices in full.
# At 1280x720 and 1920x1080. Needs a build (scripts/build.sh) and python3. A GPU run would
# say "on NVIDIA H200" the same way; the machines these pictures are made on have none.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/screenshots}"
work="$(mktemp -d)"
db="$work/device.db"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
derive() {  # derive NAME PYTHON: $work/NAME.json is the 4-device example changed by PYTHON
  python3 - "$work/$1.json" resources/plans/dp4_mlp_fashion.json "$2" <<'PY'
import json, sys
path, source, change = sys.argv[1], sys.argv[2], sys.argv[3]
plan = json.load(open(source))
plan["name"] = path.rsplit("/", 1)[-1][:-5]
plan["training"].update({"steps": 60, "epochs": 1, "eval_every": 0})
exec(change)
json.dump(plan, open(path, "w"), indent=1)
PY
}
derive mlp-1-process 'plan["parallel"]["data_parallel"] = 1; plan["parallel"]["devices"] = plan["parallel"]["devices"][:1]'
derive mlp-4-replicas ''
run() { build/app/loom-cli run "$work/$1.json" --db "$db" --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["id"])'; }
imported="$(build/app/loom-cli import --kineto tests/data/kineto/rank0.json tests/data/kineto/rank1.json.gz \
             --name pytorch-ddp-1.13 --db "$db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
four="$(run mlp-4-replicas)"
one="$(run mlp-1-process)"
xvfb-run -a -s "-screen 0 2560x1440x24" build/app/loom-compare-shots "$out" "$db" "$one" "$four" \
  --open "$one" --runs-only --prefix device
echo "screenshots in $out (runs stored in $db)"
