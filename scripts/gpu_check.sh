#!/usr/bin/env bash
# The GPU machine's check, as one script of well under 10 minutes (docs/benchmarks.md, GPU):
# run it on a GPU machine after unpacking a CUDA build made here, e.g.
#   here:  scripts/build.sh && ../shared/gpu/pack.sh build $(scripts/gpu_check.sh --executables)
#   there: bash .gpu-pack/unpack.sh && . /tmp/loom-gpu-env && scripts/gpu_check.sh "$OUT"
# Every step has a timeout and its output in a file, so one failure costs only itself: the
# gpu-labelled tests, bench/gpu_vs_torch.py (Loom against PyTorch eager and with CUDA
# graphs), bench_allreduce_nccl on one rank (Loom against raw NCCL and the two diagnostic
# peers), Nsight Compute's time per kernel of the CNN's first steps, and a traced run of
# each example plan on GPU 0 with its figures checked (the breakdown adds up to each rank's
# window, POP efficiencies <= 100%). Steps that would pass LOOM_GPU_DEADLINE seconds are
# skipped. Then each run predicted from the others and from itself (issue 32 on a GPU).
# The device tool brings back only a few files of OUT_DIR, so the logs are packed
# into OUT_DIR/gpu-check.tgz, beside summary.txt and the runs' store, gpu-runs.db.
# LOOM_GPU_QUICK=1: the GEMM table and the NCCL two-rank test left out.
set -uo pipefail
TESTS=(test_kernels_cuda_device test_kernel_backends_cuda test_backend_training_cuda test_device_truth_cuda
  test_step_graph_cuda test_gpu_equivalence test_comm_nccl)
if [ "${1:-}" = "--executables" ]; then
  echo loom-cli loom-rank bench_train bench_gemm_cuda bench_allreduce_nccl "${TESTS[@]}"
  exit 0
fi
OUT=${1:?usage: scripts/gpu_check.sh OUT_DIR}
cd "$(dirname "$0")/.."
B=${LOOM_BUILD:-build}
LOGS=$OUT/logs
mkdir -p "$LOGS"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
DEADLINE=${LOOM_GPU_DEADLINE:-480}  # seconds: later steps are skipped, so the output comes back
step() {  # step NAME SECONDS COMMAND...: runs it, keeps its output and exit code
  local name=$1 limit=$2; shift 2
  if [ $((SECONDS + 20)) -gt "$DEADLINE" ]; then echo "$name: skipped at $SECONDS s" | tee -a "$OUT/summary.txt"; return; fi
  [ $((SECONDS + limit)) -le "$DEADLINE" ] || limit=$((DEADLINE - SECONDS))
  local started=$SECONDS
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - started)) s" | tee -a "$OUT/summary.txt"
}
pack_logs() { tar -C "$OUT" -czf "$OUT/gpu-check.tgz" logs; }
trap pack_logs EXIT
nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1
for t in "${TESTS[@]}"; do
  exe=$(find "$B/tests" -type f -name "$t" | head -1)
  [ -n "$exe" ] && step "$t" 150 "$exe"
done
# NCCL between two ranks needs two GPUs: with one it skips (exit 77).
[ -z "${LOOM_GPU_QUICK:-}" ] && step test_comm_nccl_n2 60 mpirun -n 2 --oversubscribe "$B/tests/comm/test_comm_nccl" 2
step gpu_vs_torch 300 python3 bench/gpu_vs_torch.py --build "$B" --pairs 3 --out "$LOGS/gpu_vs_torch.md" \
  ${LOOM_GPU_QUICK:+--no-gemms}
step allreduce_nccl 90 mpirun -n 1 "$B/bench/bench_allreduce_nccl" --seconds 0.3
# Where the CNN's step goes, kernel by kernel (Nsight Compute, device time per kernel): the
# first 150 kernels are the eager warm-up step and the first replays of the captured one.
step ncu_cnn 90 ncu --launch-count 150 --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
  "$B/bench/bench_train" resources/plans/cnn_fashion.json --steps 12 --warmup 2 --gpu 0 --notrace
# A traced run of every example that trains, its devices made gpu devices on GPU 0, over MPI.
DB=$OUT/gpu-runs.db
for plan in resources/plans/*.json; do
  name=$(basename "$plan" .json)
  python3 - "$plan" "$LOGS/$name.gpu.json" <<'EOF'
import json, sys
plan = json.load(open(sys.argv[1]))
for d in plan.get("parallel", {}).get("devices", []) or [{}]:
    d["kind"], d["gpu"] = "gpu", 0
plan.setdefault("parallel", {}).setdefault("devices", [{"kind": "gpu", "gpu": 0}])
plan["parallel"]["backend"] = "mpi"
plan.setdefault("training", {})["steps"] = 60
plan["training"]["eval_every"] = 60
json.dump(plan, open(sys.argv[2], "w"))
EOF
  step "run-$name" 60 "$B/app/loom-cli" run "$LOGS/$name.gpu.json" --db "$DB" --json
done
python3 - "$LOGS" <<'EOF' | tee -a "$OUT/summary.txt"
import glob, json, os, sys
out = sys.argv[1]
for log in sorted(glob.glob(os.path.join(out, "run-*.log"))):
    lines = [l for l in open(log) if l.startswith("{")]
    if not lines:
        print(f"{os.path.basename(log)}: no summary"); continue
    s = json.loads(lines[-1])
    worst, pop = 0.0, 0.0
    for r in s.get("ranks", []):
        parts = sum(r.get(k) or 0 for k in ("compute_s", "exposed_comm_s", "optimizer_s", "data_s", "idle_s", "descheduled_s"))
        if r.get("window_s"):
            worst = max(worst, abs(parts - r["window_s"]) / r["window_s"])
            pop = max(pop, (r["compute_s"] + r["optimizer_s"] + r["data_s"]) / r["window_s"])
    eff = {k: round(v, 4) for k, v in (s.get("efficiency") or {}).items() if isinstance(v, (int, float))}
    print(f"{os.path.basename(log)}: {s.get('status')}, {s.get('samples_per_s')} samples/s, "
          f"categories off the window by {worst:.2e}, largest useful share {pop:.3f}, efficiency {eff}")
EOF
# Issue 32 on a GPU: each run above predicted from the store ("seen": its own run
# calibrates it) and from a copy without that run ("unseen"), against its measured step.
python3 - "$B/app/loom-cli" "$DB" "$LOGS" <<'EOF' | tee -a "$OUT/summary.txt"
import json, os, shutil, subprocess, sys
cli, db, logs = sys.argv[1:4]
def run(*argv):
    r = subprocess.run([cli, *argv], capture_output=True, text=True, timeout=60)
    if r.returncode == 0 and r.stdout.strip():
        return json.loads(r.stdout.strip().splitlines()[-1])
    return r.stderr.strip()[:160]
plans = {json.load(open(os.path.join(logs, f))).get("name"): os.path.join(logs, f)
         for f in os.listdir(logs) if f.endswith(".gpu.json")}
listed = subprocess.run([cli, "runs", "--db", db, "--json"], capture_output=True, text=True).stdout or "[]"
for stored in sorted(json.loads(listed), key=lambda x: x["id"]):
    plan = plans.get(stored["name"])
    if not plan:
        continue
    seen = run("predict", plan, "--db", db, "--against", str(stored["id"]), "--json")
    unseen_db = db + ".unseen"
    shutil.copy(db, unseen_db)
    subprocess.run([cli, "delete", str(stored["id"]), "--db", unseen_db, "--yes"], capture_output=True)
    unseen = run("predict", plan, "--db", unseen_db, "--json")
    measured = seen["against"]["measured_step_ms"] if isinstance(seen, dict) else None
    def err(p):
        if isinstance(p, dict) and measured:
            return f"{p['step_ms']:.3f} ms ({100 * (p['step_ms'] / measured - 1):+.1f}%)"
        return str(p)
    print(f"predict {os.path.basename(plan)}: measured {measured} ms; seen {err(seen)}; unseen {err(unseen)}")
EOF
echo "done; see $OUT/summary.txt and $OUT/gpu-check.tgz"
