#!/usr/bin/env bash
# The README's asynchronous-training pictures, from real runs shown in the real workbench:
# trains the parameter_server_mlp example on all of Fashion-MNIST for 3 epochs (batch 192,
# the same samples and learning rate) synchronously with 2 workers and through a parameter
# server with 2 and 3 workers, plus the ssp_straggler_mlp example (bound 2, rank 1 slowed)
# and the same straggler without the bound; then opens each stored run in the workbench
# under Xvfb and saves its training charts and staleness chart into docs/screenshots/.
# Needs a build (scripts/build.sh) and python3 (to derive the plans).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/screenshots}"
work="$(mktemp -d)"
db="$work/async.db"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

# derive NAME MODE WORKERS [SOURCE_PLAN]: writes $work/NAME.json
derive() {
  python3 - "$work/$1.json" "$2" "$3" "${4:-resources/plans/parameter_server_mlp.json}" <<'EOF'
import json, sys
path, mode, workers, source = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
plan = json.load(open(source))
plan["name"] = path.rsplit("/", 1)[-1][:-5]
parallel = plan["parallel"]
parallel["sync"]["mode"] = mode
parallel["data_parallel"] = workers
servers = 0 if mode in ("allreduce", "local_sgd") else parallel["sync"].get("servers", 1)
parallel["devices"] = [{"kind": "cpu", "host": "localhost"}] * (workers + servers)
if "stragglers" not in parallel:  # the convergence runs: all the data, 3 epochs
    plan["data"] = {"source": "fashion-mnist"}
    plan["training"].pop("steps", None)
    plan["training"].update({"epochs": 3, "batch": 192, "eval_every": 78, "threads": 1})
else:  # the straggler runs: more updates than the example, for the staleness chart
    plan["training"].update({"steps": 600, "eval_every": 200, "threads": 1})
json.dump(plan, open(path, "w"), indent=1)
EOF
}

derive sync-2-workers allreduce 2
derive ps-2-workers parameter_server 2
derive ps-3-workers parameter_server 3
derive ssp-straggler ssp 2 resources/plans/ssp_straggler_mlp.json
derive ps-straggler parameter_server 2 resources/plans/ssp_straggler_mlp.json

named_runs=()
for name in sync-2-workers ps-2-workers ps-3-workers ssp-straggler ps-straggler; do
  id="$(build/app/loom-cli run "$work/$name.json" --db "$db" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')"
  echo "$name: run $id"
  named_runs+=("async-$name=$id")
done
xvfb-run -a -s "-screen 0 1600x1000x24" build/app/loom-screenshots --runs "$out" "$db" "${named_runs[@]}"
echo "screenshots in $out (runs stored in $db)"
