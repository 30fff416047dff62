#!/usr/bin/python3
"""Pipeline parallelism: measured bubble vs schedule theory for uniform stages, and
throughput of pipeline vs data parallel vs hybrid on one model and global batch.

What it runs: real jobs, `loom-cli run PLAN --db DB --json` (mpirun, one loom-rank per
device), on plans it generates into a temporary directory:

1. Bubble vs theory. A model of p UNIFORM stages, each D = --depth (default 4) layers of
   linear W + relu: stage 0 = flatten + linear 784->W + relu + (D-1) x (linear W->W + relu),
   stages 1..p-1 = D x (linear W->W + relu), the last stage also a linear W->10 classifier.
   W = --width defaults to 784, the image size, so every GEMM of every stage has the same
   shape (784x784 weights); only the ends differ: stage 0 loads and flattens the images,
   the last stage runs the classifier and the loss (about 2-3% of a stage's time; the
   per-stage busy_s columns and the stage-imbalance column show how equal they came out).
   Fashion-MNIST, batch --batch (default 1024), SGD, training.threads 1 (one BLAS thread per
   rank), one
   evaluation at the end on a few test samples (outside the step spans, so outside the
   bubble). For each (p, m) and both schedules it reports the measured bubble per stage
   and its mean over stages, the theory, measured/theory and whether it is within 10%.
   Every figure is loom-cli's own, from `run --json` (docs/figures.md, defined once for
   the workbench, `show` and the benchmarks): per stage, over the steady steps (step 0 is
   the warm-up step, setup is apart), busy = compute inside the training window, bubble =
   idle / the stage's step time (GPipe and 1F1B alike, never above 100%), against the
   textbook (p-1)/(m+p-1) in the same convention, the schedule replayed with equal stages,
   and the replay with these stages' own op times ("theory for these stages"). The
   verdict: |measured/textbook - 1| <= 10%. The one figure loom-cli does not give, the
   share of the bubble spent blocked in a receive (Idle spans), is read from the store
   over the same steady steps.
   The measured bubble then splits into the schedule's own share (the equal-stage
   replay), the stages' imbalance (theory for these stages - schedule) and communication
   and jitter (measured - theory for these stages), as `show` and the workbench say.
2. Throughput on the p=2 uniform model, the same global batch, one BLAS thread per rank:
   1 process (1 thread, and 2 threads = the whole machine), data parallel 2 ranks,
   pipeline 2 stages GPipe and 1F1B (m = --tp-microbatches), hybrid 2 replicas x 2 stages
   (4 ranks; m halved so the micro-batch stays the same size). samples/s is loom-cli's
   steady figure (docs/figures.md: the first-stage workers' steady Step spans) and, beside
   it, its whole-job figure (mpirun start-up, setup and the evaluation included).

More ranks than cores (p >= 3, hybrid 2x2 on a 2-core machine) are oversubscribed: ranks
time-share cores, a rank that waits spins in MPI_Wait, so their bubbles measure the
scheduler as much as the pipeline. They are reported and flagged, not judged.

Also reported per row: the share of the bubble spent blocked in a receive from the
neighbour stage (Idle spans), and `other CPU`, the cores' worth of CPU that processes other
than this benchmark used during the run (/proc/stat minus the run's own CPU time): the
machine may be shared (builds, tests), so before each run the script waits up to
--quiet-wait seconds for it to go idle, and a row with other CPU above ~0.1 is suspect.

--cma (diagnostic, a separate table, never the verdict): the same pipeline rows with Open
MPI's shared-memory transport switched to single-copy CMA by an `mpirun` wrapper put first
on PATH. loom-cli exports OMPI_MCA_btl_vader_single_copy_mechanism=none to the ranks; with
it every message above vader's 4 KiB eager limit (an activation or gradient micro-batch
here is 24-786 KB) is a copy-in/copy-out rendezvous that advances only while the SENDING
rank is inside an MPI call. The pipeline isend()s and goes on computing, so a micro-batch
reaches the next stage only when the sender next blocks (its next receive, or the wait for
its sends before the optimizer): the stages serialise and the bubble comes out near 50%
whatever m. With CMA the receiver copies the data itself and the schedule behaves as
designed. The table shows how much of the measured bubble is that transport.

usage: /usr/bin/python3 bench/pipeline_bench.py [--build build | --cli PATH] [--steps 40]
           [--stages 2 3] [--microbatches 1 2 4 8] [--repeats 3] [--cma] [--no-throughput]
           [--out bench/results/pipeline_bench.md]
e.g.   /usr/bin/python3 bench/pipeline_bench.py --repeats 3 --cma       (about 10 minutes on 2 cores)
(Open MPI's run-as-root variables are set by loom-cli when it runs as root.)
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from bench_util import (ROOT, add_run_args, children_cpu_s, cpu_busy_s, overlap, parse_run_args, union,
                        wait_for_quiet, write_report)

WORK_KINDS = (0, 1, 2, 3, 14)  # Forward, Backward, Optimizer, DataLoad, Loss (profiles/event.h)
STEP_KIND = 13
IDLE_KIND = 11  # a rank blocked in a receive from its neighbour stage
COMPUTE_STREAM = 0


# ---------------------------------------------------------------- plans

def uniform_layers(stages, width, depth, pipeline=True):
    """p stages of equal work, `depth` linear+relu layers each; `stage` tags only when pipelined."""
    def tag(layer, s):
        if pipeline:
            layer["stage"] = s
        return layer
    layers = [tag({"type": "flatten"}, 0)]
    for s in range(stages):
        for d in range(depth):
            layers += [tag({"type": "linear", "out": width, "name": f"fc{s}_{d}"}, s), tag({"type": "relu"}, s)]
    layers.append(tag({"type": "linear", "out": 10, "name": "classifier"}, stages - 1))
    return layers


def make_plan(args, name, model_stages, pipe_stages, microbatches, schedule, data_parallel, threads):
    ranks = data_parallel * pipe_stages
    return {
        "format": "loom-plan/1",
        "name": name,
        "model": {"input": [1, 28, 28], "layers": uniform_layers(model_stages, args.width, args.depth, pipe_stages > 1),
                  "loss": "softmax_cross_entropy"},
        "data": {"source": "fashion-mnist", "path": args.data, "test_limit": args.test_limit, "shuffle": True},
        "training": {"batch": args.batch, "steps": args.steps, "seed": 42, "eval_every": args.steps,
                     "threads": threads, "optimizer": {"type": "sgd", "lr": 0.01}},
        "parallel": {"stages": pipe_stages, "microbatches": microbatches, "schedule": schedule,
                     "data_parallel": data_parallel,
                     "devices": [{"kind": "cpu", "host": "localhost"} for _ in range(ranks)]},
    }


# ---------------------------------------------------------------- running

def mpi_env():
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    return env


def run_plan(args, plan, tmp, cma=False):
    path = os.path.join(tmp, plan["name"] + ".json")
    with open(path, "w") as f:
        json.dump(plan, f, indent=1)
    cmd = [args.cli, "run", path, "--db", args.db, "--json"]
    wait_for_quiet(args)
    busy0, kids0, t0 = cpu_busy_s(), children_cpu_s(), time.monotonic()
    env = mpi_env()
    if cma:
        env["PATH"] = cma_wrapper(tmp) + os.pathsep + env.get("PATH", "")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    elapsed = time.monotonic() - t0
    # CPU the rest of the machine used meanwhile, in cores: another build or test run on a
    # 2-core machine shows up here and in the bubbles (a waiting rank spins in MPI_Wait).
    foreign = max(0.0, (cpu_busy_s() - busy0) - (children_cpu_s() - kids0)) / elapsed
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited with {proc.returncode}:\n"
                 f"{proc.stdout.strip()[-1500:]}\n{proc.stderr.strip()[-1500:]}")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    if summary.get("status") != "completed":
        sys.exit(f"error: run {plan['name']} ended {summary.get('status')}: {summary.get('error')}")
    summary["foreign_cores"] = foreign
    return summary


def cma_wrapper(tmp):
    """A directory with an `mpirun` that switches Open MPI's shared-memory transport to
    single-copy CMA before running the real one. loom-cli exports
    OMPI_MCA_btl_vader_single_copy_mechanism=none to the ranks (launch_command.cpp), which
    makes every message above vader's 4 KiB eager limit a copy-in/copy-out rendezvous that
    moves only while the SENDER is inside an MPI call; with CMA the receiver copies the data
    itself. Diagnostic only (--cma): it tells how much of the bubble is that transport."""
    d = os.path.join(tmp, "cma-bin")
    path = os.path.join(d, "mpirun")
    if not os.path.exists(path):
        real = None
        for p in os.environ.get("PATH", "").split(os.pathsep):
            cand = os.path.join(p, "mpirun")
            if os.access(cand, os.X_OK):
                real = cand
                break
        if not real:
            sys.exit("error: mpirun not on PATH")
        os.makedirs(d, exist_ok=True)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\nexport OMPI_MCA_btl_vader_single_copy_mechanism=cma\nexec {shlex.quote(real)} \"$@\"\n")
        os.chmod(path, 0o755)
    return d


def idle_share(db, run_id, ranks, first_step, bubble_s):
    """Share of a stage's bubble spent in Idle spans (blocked receiving from a neighbour
    stage) over steps >= first_step, mean over the stage's ranks."""
    if bubble_s <= 0:
        return 0.0
    total = 0.0
    for rank in ranks:
        steps = db.execute("SELECT start_ns, end_ns FROM events WHERE run_id=? AND rank=? AND kind=? AND step>=?",
                           (run_id, rank, STEP_KIND, first_step)).fetchall()
        idle = db.execute("SELECT start_ns, end_ns FROM events WHERE run_id=? AND rank=? AND stream=? AND kind=? "
                          "AND step>=?", (run_id, rank, COMPUTE_STREAM, IDLE_KIND, first_step)).fetchall()
        total += overlap(idle, steps) / 1e9
    return total / len(ranks) / bubble_s


def stage_bubbles(db, summary):
    """Per stage, loom-cli's steady figures (run --json "stages"), plus the Idle share; the
    textbook bubble in the same convention; the steady step time (ms)."""
    out = []
    for st in summary["stages"]:
        row = {k: st.get(k) for k in ("stage", "busy_s", "bubble_s", "bubble_fraction", "bubble_textbook",
                                      "bubble_schedule", "bubble_theory")}
        row["recv_share"] = idle_share(db, summary["id"], st["ranks"], summary["warmup_steps"], st["bubble_s"])
        out.append(row)
    step_ms = 1e3 * summary["train_s"] / max(1, summary["steady_steps"])
    return out, summary["stages"][0]["bubble_textbook"], step_ms


# ---------------------------------------------------------------- measurements

def bubble_runs(args, tmp, stages, cma=False):
    rows = []
    for p in stages:
        for m in args.microbatches:
            if args.batch % m:
                print(f"skip p={p} m={m}: batch {args.batch} not divisible", file=sys.stderr)
                continue
            for schedule in ("gpipe", "1f1b"):
                reps = []
                for rep in range(args.repeats):
                    name = f"uniform-p{p}-m{m}-{schedule}{'-cma' if cma else ''}-r{rep}"
                    print(f"  running {name} ...", file=sys.stderr, flush=True)
                    summary = run_plan(args, make_plan(args, name, p, p, m, schedule, 1, args.threads), tmp, cma)
                    with sqlite3.connect(args.db) as db:
                        steady, theory, step_ms = stage_bubbles(db, summary)
                    reps.append({"summary": summary, "steady": steady, "theory": theory, "step_ms": step_ms})
                # The repeat whose steady mean bubble is the median (noise only adds bubble
                # here, but a median keeps one lucky run from deciding the verdict).
                reps.sort(key=lambda r: statistics.mean(s["bubble_fraction"] for s in r["steady"]))
                chosen = reps[(len(reps) - 1) // 2]
                chosen.update(p=p, m=m, schedule=schedule, repeats=[
                    statistics.mean(s["bubble_fraction"] for s in r["steady"]) for r in reps])
                rows.append(chosen)
    return rows


def throughput_runs(args, tmp):
    m = args.tp_microbatches
    configs = [
        ("1 process, 1 thread", 2, 1, 1, "gpipe", 1, 1, False),
        ("1 process, 2 threads", 2, 1, 1, "gpipe", 1, 2, False),
        ("data parallel 2", 2, 1, 1, "gpipe", 2, 1, False),
        (f"pipeline 2 stages GPipe m={m}", 2, 2, m, "gpipe", 1, 1, False),
        (f"pipeline 2 stages 1F1B m={m}", 2, 2, m, "1f1b", 1, 1, False),
        (f"hybrid 2x2 1F1B m={max(1, m // 2)}", 2, 2, max(1, m // 2), "1f1b", 2, 1, False),
    ]
    if args.cma:
        configs += [(label + " [CMA, diagnostic]", *rest[:-1], True) for label, *rest in configs[2:]]
    rows = []
    for label, model_stages, stages, mb, schedule, dp, threads, cma in configs:
        best = None
        for rep in range(args.repeats):
            name = "tp-" + "".join(c if c.isalnum() else "-" for c in label) + f"-r{rep}"
            print(f"  running {name} ...", file=sys.stderr, flush=True)
            summary = run_plan(args, make_plan(args, name, model_stages, stages, mb, schedule, dp, threads), tmp, cma)
            rate = summary["samples_per_s"]
            step_ms = 1e3 * summary["train_s"] / max(1, summary["steady_steps"])
            if best is None or rate > best["rate"]:
                best = {"label": label, "ranks": dp * stages, "threads": threads, "microbatch": args.batch // dp // mb,
                        "rate": rate, "step_ms": step_ms, "summary": summary}
        rows.append(best)
    return rows


# ---------------------------------------------------------------- report

def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return os.cpu_count() or 1, model, load


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def bubble_table(args, rows, cores, title):
    out = [f"### {title}", ""]
    out.append("| p | m | schedule | textbook | schedule replay | theory for these stages | measured mean "
               "| measured per stage | measured/textbook | within 10% | busy_s per stage | bubble waiting in recv "
               "| step ms | other CPU | note |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        steady = r["steady"]
        mean = statistics.mean(s["bubble_fraction"] for s in steady)
        ratio = mean / r["theory"] if r["theory"] else float("nan")
        ok = abs(ratio - 1) <= 0.10
        replay = statistics.mean(s["bubble_schedule"] for s in steady)
        own = [s["bubble_theory"] for s in steady if s["bubble_theory"] is not None]
        over = r["p"] > cores
        note = f"oversubscribed ({r['p']} ranks on {cores} cores)" if over else ""
        if args.repeats > 1:
            note = (note + "; " if note else "") + "repeats " + ", ".join(pct(x) for x in r["repeats"])
        out.append(f"| {r['p']} | {r['m']} | {r['schedule']} | {pct(r['theory'])} | {pct(replay)} | "
                   f"{pct(statistics.mean(own)) if own else '-'} | {pct(mean)} | "
                   f"{' / '.join(pct(s['bubble_fraction']) for s in steady)} | {ratio:.2f} | "
                   f"{('yes' if ok else 'NO') + (' (flagged)' if over else '')} | "
                   f"{' / '.join('%.3f' % s['busy_s'] for s in steady)} | "
                   f"{pct(statistics.mean(s['recv_share'] for s in steady))} | "
                   f"{r['step_ms']:.1f} | {r['summary']['foreign_cores']:.2f} | {note} |")
    out.append("")
    out.append("All bubbles are loom-cli's (docs/figures.md): idle / the stage's steady step time, per stage in "
               "stage order; textbook (p-1)/(m+p-1), the schedule replayed with equal stages, and the replay with "
               "these stages' own mean op times, all in that convention. busy_s = compute in the training window "
               "(equal busy_s = uniform stages). bubble waiting in recv = share of the bubble spent in "
               "Idle spans (blocked receiving from the neighbour stage); the rest is untraced time between spans "
               "(isend calls, waiting for the last sends before the optimizer, bookkeeping). step ms = steady window "
               "per step, mean over ranks. other CPU = cores' worth of CPU used by other processes during the run "
               "(/proc/stat minus the run's own CPU time): above ~0.1 the machine was shared and the bubble grows.")
    out.append("")
    return out


def report(args, bubble_rows, cma_rows, tp_rows, load_before, started):
    cores, model, _ = machine()
    load_after = os.getloadavg()
    out = ["## Pipeline bubble and throughput (bench/pipeline_bench.py)", ""]
    out.append(f"- machine: {cores} cores (nproc), {model}, {platform.system()} {platform.release()}; "
               f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    out.append(f"- command: `{args.command}`")
    out.append(f"- date: {started:%Y-%m-%d %H:%M}; loom-cli: `{args.cli}`")
    out.append(f"- model: {args.depth} x (linear {args.width} + relu) per stage (stage 0 starts with flatten and "
               f"784->{args.width}), last stage + linear {args.width}->10; Fashion-MNIST, batch "
               f"{args.batch}, SGD lr 0.01, {args.steps} steps, training.threads {args.threads}, one evaluation "
               f"at the end on {args.test_limit} test samples")
    out.append("- figures: loom-cli's own (`run --json`, docs/figures.md): steady steps only (step 0 is the "
               "warm-up step, setup apart). Verdict: |measured/textbook - 1| <= 10%.")
    if args.repeats > 1:
        out.append(f"- {args.repeats} repeats per row; the bubble rows show the repeat with the median steady "
                   f"mean (all repeats' means in the last column), throughput rows the best repeat")
    out.append("")
    out += bubble_table(args, bubble_rows, cores, "Bubble vs theory, uniform stages (loom-cli as it is)")
    if cma_rows:
        out += bubble_table(args, cma_rows, cores, "Diagnostic: the same with Open MPI's CMA single-copy transport "
                            "(mpirun wrapper, --cma); NOT the verdict")
    if tp_rows:
        out.append("")
        out.append(f"### Throughput, same model (p=2 uniform) and global batch {args.batch}")
        out.append("")
        base = tp_rows[0]["rate"]
        out.append("| configuration | ranks | BLAS threads/rank | cores used / available | micro-batch | steady samples/s "
                   "| vs 1 process (1 thread) | step ms | whole-job samples/s | other CPU | note |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in tp_rows:
            used = r["ranks"] * r["threads"]
            note = f"oversubscribed ({used} threads on {cores} cores)" if used > cores else ""
            out.append(f"| {r['label']} | {r['ranks']} | {r['threads']} | {used}/{cores} ({100 * used / cores:.0f}%) | "
                       f"{r['microbatch']} | {r['rate']:.0f} | {r['rate'] / base:.2f}x | {r['step_ms']:.1f} | "
                       f"{r['summary']['wall_samples_per_s']:.0f} | {r['summary']['foreign_cores']:.2f} | {note} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description="Pipeline bubble vs theory (uniform stages) and pipeline / data "
                                             "parallel / hybrid throughput, with real loom-cli runs.")
    add_run_args(ap, "pipeline_bench.md")
    ap.add_argument("--width", type=int, default=784)
    ap.add_argument("--depth", type=int, default=4, help="linear+relu layers per stage")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1, help="training.threads (BLAS threads per rank)")
    ap.add_argument("--test-limit", type=int, default=200)
    ap.add_argument("--stages", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--microbatches", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--tp-microbatches", type=int, default=8)
    ap.add_argument("--no-throughput", action="store_true")
    ap.add_argument("--no-bubble", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cma", action="store_true",
                    help="also run the pipeline rows with Open MPI's CMA single-copy transport (diagnostic)")
    ap.add_argument("--cma-stages", type=int, nargs="+", default=[2])
    args = parse_run_args(ap)
    started = datetime.datetime.now()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="loom-pipeline-bench-") as tmp:
        if not args.db:
            args.db = os.path.join(tmp, "runs.db")
        bubble_rows, cma_rows, tp_rows = [], [], []
        if not args.no_bubble:
            bubble_rows = bubble_runs(args, tmp, args.stages)
            if args.cma:
                cma_rows = bubble_runs(args, tmp, args.cma_stages, cma=True)
        if not args.no_throughput:
            tp_rows = throughput_runs(args, tmp)
        text = report(args, bubble_rows, cma_rows, tp_rows, load_before, started)
    write_report(text, args.out)


if __name__ == "__main__":
    main()
