#!/usr/bin/env bash
# The README's comparison pictures, from real runs, each set opened in the real workbench
# under Xvfb (Runs dock, Compare, each tab of the comparison window, at 1280x720 and
# 1920x1080) by loom-compare-shots, into docs/screenshots/:
#   compare-*     the 4-device example's model on one process and on 2 replicas (same
#                 global batch, 300 steps), and the GPipe and 1F1B pipeline examples;
#   straggler-*   the ssp_straggler_mlp example (rank 1 twice as slow) trained
#                 synchronously (all-reduce) and through a parameter server;
#   pytorch-*     a real PyTorch DDP trace (tests/data/kineto, 2 ranks, 784-64-10 MLP,
#                 imported with loom-cli import --kineto) beside Loom's 2-replica run of the
#                 same MLP and batch.
# Needs a build (scripts/build.sh) and python3 (to derive the plans).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/screenshots}"
work="$(mktemp -d)"
db="$work/compare.db"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

# derive NAME SOURCE PYTHON: $work/NAME.json is SOURCE changed by PYTHON (on `plan`)
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
dp4=resources/plans/dp4_mlp_fashion.json
derive mlp-1-process $dp4 'plan["parallel"]["data_parallel"] = 1; plan["parallel"]["devices"] = plan["parallel"]["devices"][:1]'
derive mlp-2-replicas $dp4 'plan["parallel"]["data_parallel"] = 2; plan["parallel"]["devices"] = plan["parallel"]["devices"][:2]'
derive gpipe resources/plans/gpipe_mlp.json ''
derive 1f1b resources/plans/onefoneb_mlp.json ''
straggler=resources/plans/ssp_straggler_mlp.json
derive sync-straggler $straggler 'plan["parallel"]["sync"] = {"mode": "allreduce"}; plan["parallel"]["devices"] = plan["parallel"]["devices"][:2]'
derive ps-straggler $straggler 'plan["parallel"]["sync"]["mode"] = "parameter_server"'
# The traced PyTorch model: 784-64-10, global batch 64 over 2 ranks, SGD.
derive loom-784-64-10 resources/plans/mlp_fashion.json '
plan["model"]["layers"] = [{"type": "flatten"}, {"type": "linear", "out": 64}, {"type": "relu"}, {"type": "linear", "out": 10}]
plan["training"].update({"batch": 64, "steps": 40, "epochs": 1, "eval_every": 0, "threads": 1})
plan["parallel"]["data_parallel"] = 2
plan["parallel"]["devices"] = [{"kind": "cpu", "host": "localhost"}] * 2'

run() { build/app/loom-cli run "$work/$1.json" --db "$db" --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["id"])'; }
shots() {  # shots PREFIX ID...
  local prefix="$1"; shift
  xvfb-run -a -s "-screen 0 2560x1440x24" build/app/loom-compare-shots "$out" "$db" "$@" --prefix "$prefix"
}

shots compare "$(run mlp-1-process)" "$(run mlp-2-replicas)" "$(run gpipe)" "$(run 1f1b)"
shots straggler "$(run sync-straggler)" "$(run ps-straggler)"
imported="$(build/app/loom-cli import --kineto tests/data/kineto/rank0.json tests/data/kineto/rank1.json.gz \
             --name pytorch-ddp-784-64-10 --db "$db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
shots pytorch "$(run loom-784-64-10)" "$imported"
echo "screenshots in $out (runs stored in $db)"
