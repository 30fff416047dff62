#!/usr/bin/python3
"""GPU benchmark: Loom's CUDA backend beside PyTorch on the same GPU, in one run.

Ready to run on a GPU machine; this project's machines have none, so no figures from it
are recorded yet. It needs a Loom build made there with the CUDA toolkit (nvcc), which
builds bench_train (with --gpu) and bench_gemm_cuda, and PyTorch with CUDA:

  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build-gpu bench_train bench_gemm_cuda
  python3 bench/gpu_vs_torch.py --build build-gpu

It prints (and writes to bench/results/gpu_vs_torch.md):
  1. Step time and samples/s of the default MLP and CNN plans (batch 64, Adam, Fashion-
     MNIST) on GPU --gpu: Loom (bench_train --gpu N, recorder off and on) and two PyTorch
     peers (bench/torch_train.py --device cuda:N: the same model, optimizer, batch, and the
     same per-step host gather and copy to the device): eager, and the whole step captured
     as one CUDA graph (--cuda-graph, capturable Adam). Runs are interleaved A B C A B C
     ...; each ratio PyTorch step / Loom step is the median over rounds with its min-max
     (targets: >= 1 against both, Loom no slower than PyTorch). The tracing cost is Loom
     traced over untraced (target <= 1.02).
  2. GEMM TFLOP/s for every GEMM shape the example models run, Loom's cuBLAS call against
     cuBLAS's fastest algorithm for that shape (bench_gemm_cuda; target >= 70%), in fp32 and
     TF32.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANS = [("resources/plans/mlp_fashion.json", 500), ("resources/plans/cnn_fashion.json", 200)]


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return [json.loads(line) for line in out.strip().splitlines() if line.startswith("{")]


def compare_training(args, out):
    loom = os.path.join(args.build, "bench", "bench_train")
    out.append("| plan | Loom ms | Loom traced ms (traced / untraced) | PyTorch eager ms | eager / Loom | "
               "PyTorch CUDA graph ms | graph / Loom | Loom device memory |")
    out.append("|---|---|---|---|---|---|---|---|")
    torch_cmd = [sys.executable, "bench/torch_train.py"]
    for plan, steps in PLANS:
        common = [plan, "--steps", str(steps), "--warmup", str(steps // 10)]
        ours, traced, eager, graph = [], [], [], []
        for _ in range(args.pairs):  # interleaved: A B C D A B C D ...
            a = run_json([loom] + common + ["--gpu", str(args.gpu), "--notrace"])[-1]
            ours.append(a["step_ms"])
            eager.append(run_json(torch_cmd + common + ["--device", f"cuda:{args.gpu}"])[-1]["step_ms"])
            graph.append(run_json(torch_cmd + common + ["--device", f"cuda:{args.gpu}", "--cuda-graph"])[-1]["step_ms"])
            traced.append(run_json([loom] + common + ["--gpu", str(args.gpu)])[-1]["step_ms"])
        memory = a.get("device_memory_bytes", 0) / 2**20
        cells = [ratio_cell([t / o for t, o in zip(traced, ours)]), ratio_cell([e / o for e, o in zip(eager, ours)]),
                 ratio_cell([g / o for g, o in zip(graph, ours)])]
        out.append(f"| {os.path.basename(plan)} | {statistics.median(ours):.3f} | {statistics.median(traced):.3f} "
                   f"({cells[0]}) | {statistics.median(eager):.3f} | {cells[1]} | {statistics.median(graph):.3f} | "
                   f"{cells[2]} | {memory:.1f} MiB |")


def ratio_cell(ratios):
    """Median ratio with its min-max, and a warning when the spread is too wide to conclude."""
    cell = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
    return cell + (" spread too wide" if max(ratios) > 1.5 * min(ratios) else "")


def compare_gemms(args, out):
    gemm = os.path.join(args.build, "bench", "bench_gemm_cuda")
    out.append("")
    out.append("| GEMM | M x N x K | math | Loom TFLOP/s | cuBLAS best TFLOP/s | Loom / best |")
    out.append("|---|---|---|---|---|---|")
    for flag in ([], ["--tf32"]):
        for r in run_json([gemm] + flag):
            out.append(f"| {r['gemm']} | {r['M']} x {r['N']} x {r['K']} | {'TF32' if r['tf32'] else 'fp32'} | "
                       f"{r['loom_tflops']:.2f} | {r['cublas_best_tflops']:.2f} | {100 * r['loom_over_best']:.0f}% |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--pairs", type=int, default=5, help="interleaved Loom/PyTorch pairs per plan")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "gpu_vs_torch.md"))
    ap.add_argument("--no-gemms", action="store_true", help="leave out the GEMM table (training steps only)")
    args = ap.parse_args()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader", "-i", str(args.gpu)],
                         capture_output=True, text=True).stdout.strip()
    flags = " --no-gemms" if args.no_gemms else ""
    out = [f"# GPU: Loom vs PyTorch on {gpu or 'an unnamed GPU'}", "",
           f"`python3 bench/gpu_vs_torch.py --build {args.build} --gpu {args.gpu} --pairs {args.pairs}{flags}`", ""]
    compare_training(args, out)
    if not args.no_gemms:
        compare_gemms(args, out)
    text = "\n".join(out) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
