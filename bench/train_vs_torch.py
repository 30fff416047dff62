#!/usr/bin/python3
"""Single-process training throughput: Loom vs PyTorch, side by side, in one run.

For each plan and thread count it runs Loom's bench_train and PyTorch's torch_train.py on
the same model, data (Fashion-MNIST), batch, optimizer and thread count, and prints:
  - samples/s of each and the ratio Loom / PyTorch (target >= 1.0, aim 1.5),
  - Loom's achieved GFLOP/s (3 x forward flops per sample) as a fraction of this
    machine's measured SGEMM peak for the same thread count (bench_sgemm),
  - Loom's step time with the recorder on vs off (tracing cost, target <= 1%).
Each figure is the best of --repeats runs (noise on a shared machine only slows runs).

usage: /usr/bin/python3 bench/train_vs_torch.py [--build build] [--threads 1 2] [--repeats 3]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANS = [("resources/plans/mlp_fashion.json", 400), ("resources/plans/cnn_fashion.json", 40)]


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def best(cmd, repeats, key="samples_per_s"):
    return max((run_json(cmd) for _ in range(repeats)), key=lambda r: r[key])


def sgemm_peak(build, threads):
    return run_json([os.path.join(build, "bench", "bench_sgemm"), "--threads", str(threads)])["peak_gflops"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    loom = os.path.join(args.build, "bench", "bench_train")
    rows = []
    for threads in args.threads:
        peak = sgemm_peak(args.build, threads)
        for plan, steps in PLANS:
            common = [plan, "--steps", str(steps), "--warmup", str(max(5, steps // 10)), "--threads", str(threads)]
            ours = best([loom] + common, args.repeats)
            untraced = best([loom] + common + ["--notrace"], args.repeats)
            peer = best([sys.executable, "bench/torch_train.py"] + common, args.repeats)
            rows.append((os.path.basename(plan), threads, ours, untraced, peer, peak))
    print("| plan | threads | Loom samples/s | PyTorch samples/s | Loom/PyTorch | Loom GFLOP/s | SGEMM peak | % of peak | trace on vs off |")
    print("|---|---|---|---|---|---|---|---|---|")
    for plan, threads, ours, untraced, peer, peak in rows:
        dilation = ours["step_ms"] / untraced["step_ms"] - 1.0
        print(f"| {plan} | {threads} | {ours['samples_per_s']:.0f} | {peer['samples_per_s']:.0f} | "
              f"{ours['samples_per_s'] / peer['samples_per_s']:.2f}x | {ours['gflops']:.1f} | {peak:.1f} | "
              f"{100 * ours['gflops'] / peak:.0f}% | {100 * dilation:+.1f}% |")
    print(f"\nbatch 64 (plan), Adam; PyTorch {peer.get('torch', '?')} with OMP_WAIT_POLICY={peer.get('omp_wait', '?')}; "
          "GFLOP/s = 3 x forward FLOPs x samples / s; peak = best cblas_sgemm rate over square and model shapes.")


if __name__ == "__main__":
    main()
