#!/usr/bin/python3
"""Data-parallel training throughput: Loom (bench_dp under mpirun) vs PyTorch DDP (gloo),
side by side in one run, for the MLP and CNN plans at world sizes 1 and 2.

Both sides train the same model, data and optimizer with the plan's batch as the GLOBAL
batch (each of N ranks trains on batch/N samples per step) and cores/N threads per rank.
It prints, per plan and world size:
  - global samples/s of each and Loom / DDP (target >= 1.2x),
  - scaling 1 -> N ranks (samples/s at N over samples/s at 1) for each,
  - the fraction of Loom's gradient all-reduce hidden behind compute, two ways (see
    bench_dp.cpp): from span overlap in the trace (1 - exposed/comm) and from the wait
    after backward vs the same all-reduce run alone (1 - wait/alone); target >= 50% when
    the model allows,
  - Loom's step time traced vs --notrace (tracing cost, target <= 1%).
Traced, untraced and DDP runs alternate within each repeat; each figure is the best of
--repeats (noise on a shared machine only slows runs down).

usage: /usr/bin/python3 bench/dp_vs_ddp.py [--build build] [--ranks 1 2] [--repeats 3]
                                           [--mlp-steps 400] [--cnn-steps 80] [--bucket-mb B]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MLP, CNN = "resources/plans/mlp_fashion.json", "resources/plans/cnn_fashion.json"


def mpi_env():
    """Open MPI refuses root without these; the vader setting avoids CMA errors in containers."""
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    return env


def run_json(cmd, env=None):
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited with {proc.returncode}:\n{proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def loom_cmd(args, plan, ranks, steps, threads, trace):
    cmd = ["mpirun", "-n", str(ranks), "--oversubscribe", "--bind-to", "none",
           os.path.join(args.build, "bench", "bench_dp"), plan, "--steps", str(steps),
           "--warmup", str(max(3, steps // 10)), "--threads", str(threads)]
    if args.bucket_mb > 0:
        cmd += ["--bucket-mb", str(args.bucket_mb)]
    return cmd + ([] if trace else ["--notrace"])


def ddp_cmd(args, plan, ranks, steps, threads):
    cmd = [sys.executable, "bench/torch_ddp.py", plan, "--ranks", str(ranks), "--steps", str(steps),
           "--warmup", str(max(3, steps // 10)), "--threads", str(threads)]
    return cmd + (["--bucket-mb", str(args.bucket_mb)] if args.bucket_mb > 0 else [])


def measure(args, plan, steps, ranks):
    """Best of --repeats for Loom traced, Loom untraced and DDP, run alternately."""
    threads = max(1, (os.cpu_count() or 1) // ranks)
    runs = {"traced": [], "untraced": [], "ddp": []}
    for _ in range(args.repeats):
        runs["traced"].append(run_json(loom_cmd(args, plan, ranks, steps, threads, True), mpi_env()))
        runs["untraced"].append(run_json(loom_cmd(args, plan, ranks, steps, threads, False), mpi_env()))
        runs["ddp"].append(run_json(ddp_cmd(args, plan, ranks, steps, threads)))
    best = {k: max(v, key=lambda r: r["samples_per_s"]) for k, v in runs.items()}
    best["threads"] = threads
    return best


def scaling(results, plan, ranks, key):
    base = results.get((plan, 1))
    if ranks == 1 or base is None:
        return "-"
    return f"{results[(plan, ranks)][key]['samples_per_s'] / base[key]['samples_per_s']:.2f}x"


def hidden(traced):
    """Two estimates (bench_dp.cpp): from span overlap, which flatters when completion is
    seen late, and from the wait after backward vs the same all-reduce with nothing to hide."""
    if "hidden_fraction" not in traced:
        return "-"
    return (f"{100 * traced['hidden_fraction']:.0f}% / {100 * traced['hidden_vs_alone']:.0f}% "
            f"(alone {traced['comm_alone_ms']:.2f} ms)")


def print_table(results, args):
    print("| plan | ranks | threads/rank | Loom samples/s | DDP samples/s | Loom/DDP | Loom scaling 1->N | "
          "DDP scaling 1->N | all-reduce hidden: spans / wait-based | trace on vs off |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (plan, ranks), r in results.items():
        loom, ddp = r["traced"], r["ddp"]
        dilation = loom["step_ms"] / r["untraced"]["step_ms"] - 1.0
        print(f"| {os.path.basename(plan)} | {ranks} | {r['threads']} | {loom['samples_per_s']:.0f} | "
              f"{ddp['samples_per_s']:.0f} | {loom['samples_per_s'] / ddp['samples_per_s']:.2f}x | "
              f"{scaling(results, plan, ranks, 'traced')} | {scaling(results, plan, ranks, 'ddp')} | "
              f"{hidden(loom)} | {100 * dilation:+.1f}% |")
    any_ddp = next(iter(results.values()))["ddp"]
    print(f"\nglobal batch = plan batch ({any_ddp['batch']}), split over the ranks; best of {args.repeats}; "
          f"Loom figures are traced runs; PyTorch {any_ddp['torch']} DDP over gloo, "
          f"OMP_WAIT_POLICY={any_ddp['omp_wait']}; bucket {args.bucket_mb or 'plan / DDP default (25 MB)'}.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--mlp-steps", type=int, default=400, help="timed steps for the MLP plan")
    ap.add_argument("--cnn-steps", type=int, default=80, help="timed steps for the CNN plan")
    ap.add_argument("--bucket-mb", type=float, default=0, help="all-reduce bucket for both (default: plan's / DDP's)")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    results = {}
    for plan, steps in ((MLP, args.mlp_steps), (CNN, args.cnn_steps)):
        for ranks in sorted(args.ranks):
            results[(plan, ranks)] = measure(args, plan, steps, ranks)
            print(f"done: {os.path.basename(plan)} x {ranks}", file=sys.stderr, flush=True)
    print_table(results, args)


if __name__ == "__main__":
    main()
