#!/usr/bin/python3
"""Asynchronous training: throughput, staleness and accuracy of synchronous all-reduce,
parameter server, stale-synchronous parallel (SSP) and local SGD, each with and without a
straggler, on one model, one global batch and one number of steps.

What the table says, one row per configuration (plus two single-process rows first):
  mode / bound-period: the plan's parallel.sync (ssp: `bound`, local_sgd: `period`).
  straggler: none, or rank 1 slowed --slowdown x (default 3). Injection (engine/straggler.cpp):
    after each step's compute (forward, loss, backward) the rank sleeps (slowdown - 1) x the
    time that compute took, recorded as an InjectedDelay span; then it synchronises/pushes.
    (That compute time is wall time: a rank descheduled by oversubscription sleeps longer.)
  steady samples/s: loom-cli's own steady throughput (`run --json` samples_per_s, defined
    once in docs/figures.md for the workbench, `show` and every benchmark: the workers'
    steady Step spans, step 0 being the warm-up step, over the steady window). The machine-limit row is one process with
    training.threads 2 (both cores), measured in the same invocation of this script. It is
    the machine's limit only by definition: for this small MLP a 2-thread process need not
    beat two 1-thread ranks, and in development runs allreduce and local_sgd rows reached
    or passed 100% of it (and the 2-thread row varied far more than the others).
  vs sync: that rate / the allreduce row without straggler; of machine: / the machine limit.
    A "1 process, 1 thread" row is given for context (one rank's worth of the machine).
  samples/s all active: the same count restricted to the window in which every worker is
    still stepping (a worker that has finished its steps no longer counts; see below).
  effective slowdown: rank 1's (compute + injected delay) / rank 0's compute, per step,
    steady steps; compute = union of its Forward/Backward/DataLoad/Loss spans. Near 1
    without straggler, near --slowdown with. It comes out above --slowdown (3.3-3.7 for 3x in
    development runs) because the sleep is (slowdown - 1) x the straggler's WALL-CLOCK compute
    window, which is longer than rank 0's compute: its own backward runs slower after each
    sleep (~1.2x measured in local_sgd: cold caches), and in allreduce the window also holds
    gaps where the rank's communication thread waits for a core (~5 ms seen on 2 cores with
    the other rank spinning) before the last gradient bucket is issued.
  staleness mean / p95 / max: `loom-cli show ID --json` staleness.overall (parameter_server,
    ssp only). Staleness of an applied gradient = the server's version when it is applied
    minus the version the worker's pull had read; version = gradients applied so far
    (parameter_server) or the slowest unfinished worker's clock (ssp, so in clocks).
  wait s per worker: seconds in Wait spans, per worker in rank order, whole run. For
    parameter_server/ssp this is show's staleness.workers[].wait_s (the whole pull: request,
    server reply, and the time an ssp bound holds the worker back). For allreduce and
    local_sgd show reports no wait, so the script sums the same thing itself (union of the
    rank's Wait spans): the part of the gradient all-reduce still running after backward,
    plus the 3-float all-reduce of loss/accuracy/stop votes before the optimizer
    (Trainer::meet_replicas), where the fast worker waits for the straggler: the straggler
    sleeps AFTER its gradient buckets went out (every step for allreduce, every period for
    local_sgd).
  untraced s per worker: time inside the worker's Step spans covered by no other span of
    that rank (any kind, any stream), whole run: what the trace does not explain.
  divergence: local_sgd's divergence.mean from show: at each averaging,
    sqrt(mean over replicas of ||theta_r - mean theta||^2), averaged over the averagings.
  test accuracy: the run's test_accuracy, one evaluation after the last step.
  other CPU: cores' worth of CPU used by processes other than this benchmark during the run
    (/proc/stat minus the run's own CPU time); above ~0.1 the machine was shared.

What it runs: real jobs, `loom-cli run PLAN --db DB --json` (mpirun, one loom-rank per
device), on plans generated into a temporary directory from the example plan
resources/plans/parameter_server_mlp.json: MLP 784-256-128-10 (relu), softmax cross
entropy, Fashion-MNIST (full 10000-image test set unless --test-limit), SGD lr --lr (0.1,
loom's default momentum 0.9), global batch --batch (256) split evenly over the W = --workers
(2) workers, --steps (3000) steps, eval_every = steps (one evaluation, at the end),
training.threads 1 per rank. Every configuration processes the same samples: each worker
runs `steps` steps of batch/W samples. parameter_server and ssp add --servers (1) server
rank, so 3 ranks run on this 2-core machine: that OVERSUBSCRIBES it (the server polls with
20 us sleeps and mostly waits, but Open MPI's blocking waits on the workers spin), and those
rows say so. Modes: allreduce (synchronous baseline), parameter_server (fully asynchronous),
ssp with each of --bounds (0 1 4; bound 0 is synchronous SGD through a server), local_sgd
with each of --periods (4 16); each without and with the straggler (plan field
parallel.stragglers: [{"rank": 1, "slowdown": S}]).

STEADY: the headline rate is loom-cli's (above). The figures loom-cli does not give are
read from the SQLite run store's `events` table (schema in profiles/store/src/run_store.cpp) over
the same steady steps (step >= the run's warmup_steps, 1): the Step spans (kind 13) of the
worker ranks 0..W-1. Server ranks have no Step spans. All ranks run on this host and share
its monotonic clock, so spans of different ranks compare directly. Every worker runs its
own training.steps steps (there is no shared budget of updates), so with a straggler in
parameter_server (or ssp with a large bound) the fast worker finishes first and the
straggler then trains alone until the end of the window: the job still ends when the
straggler's steps are done, and its late gradients have staleness 0, which dilutes the
staleness mean. (Measured, 300 steps, 3x: fast worker done after 1.4 s, straggler after
3.0 s; the straggler's staleness about 2 while both ran, 0 afterwards.) `samples/s all
active` takes window = [latest first start, earliest last end] over the workers and counts
each Step span by the fraction of it inside that window: the rate while nobody has finished.

--repeats N runs every row N times and reports, per number, the median over the repeats
(other CPU: the largest).

usage: /usr/bin/python3 bench/async_bench.py [--build build | --cli PATH] [--steps 3000] [--batch 256]
           [--workers 2] [--servers 1] [--bounds 0 1 4] [--periods 4 16] [--slowdown 3]
           [--repeats 1] [--quiet-wait 60] [--out bench/results/async_bench.md]
e.g.   /usr/bin/python3 bench/async_bench.py          (about 6 minutes on 2 cores, quiet machine)
(Open MPI's run-as-root variables are set by loom-cli when it runs as root.)
"""
import argparse
import datetime
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from bench_util import (ROOT, add_run_args, children_cpu_s, cpu_busy_s, overlap, parse_run_args, union,
                        wait_for_quiet, write_report)

STEP_KIND = 13  # profiles/event.h
WAIT_KIND = 10
DELAY_KIND = 12  # InjectedDelay
COMPUTE_KINDS = (0, 1, 3, 14)  # Forward, Backward, DataLoad, Loss: a step's compute before the injection
ASYNC = ("parameter_server", "ssp")


# ---------------------------------------------------------------- plans

def make_plan(args, name, mode, param, straggler, threads=1, workers=None):
    """The example MLP plan in `mode` (None: one process, no sync), W workers (+ servers)."""
    with open(os.path.join(ROOT, "resources", "plans", "parameter_server_mlp.json")) as f:
        plan = json.load(f)
    w = args.workers if workers is None else workers
    plan["name"] = name
    plan["data"] = {"source": "fashion-mnist", "path": args.data}
    if args.test_limit:
        plan["data"]["test_limit"] = args.test_limit
    plan["training"].update(batch=args.batch, steps=args.steps, eval_every=args.steps, threads=threads)
    plan["training"]["optimizer"] = {"type": "sgd", "lr": args.lr}
    parallel = {"data_parallel": w}
    ranks = w
    if mode:
        sync = {"mode": mode}
        if mode in ASYNC:
            sync["servers"] = args.servers
            ranks += args.servers
        if mode == "ssp":
            sync["bound"] = param
        if mode == "local_sgd":
            sync["period"] = param
        parallel["sync"] = sync
    if straggler:
        parallel["stragglers"] = [{"rank": 1, "slowdown": args.slowdown}]
    parallel["devices"] = [{"kind": "cpu", "host": "localhost"} for _ in range(ranks)]
    plan["parallel"] = parallel
    return plan


# ---------------------------------------------------------------- running (as pipeline_bench.py)

def cli_json(args, *cli_args):
    cmd = [args.cli, *cli_args, "--db", args.db, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} exited with {proc.returncode}:\n"
                 f"{proc.stdout.strip()[-1500:]}\n{proc.stderr.strip()[-1500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_plan(args, plan, tmp):
    path = os.path.join(tmp, plan["name"] + ".json")
    with open(path, "w") as f:
        json.dump(plan, f, indent=1)
    wait_for_quiet(args)
    busy0, kids0, t0 = cpu_busy_s(), children_cpu_s(), time.monotonic()
    summary = cli_json(args, "run", path)
    elapsed = time.monotonic() - t0
    foreign = max(0.0, (cpu_busy_s() - busy0) - (children_cpu_s() - kids0)) / elapsed
    if summary.get("status") != "completed":
        sys.exit(f"error: run {plan['name']} ended {summary.get('status')}: {summary.get('error')}")
    summary["foreign_cores"] = foreign
    summary["elapsed_s"] = elapsed
    print(f"    {elapsed:.1f} s, other CPU {foreign:.2f}", file=sys.stderr, flush=True)
    return summary


def store_figures(db, run_id, workers, batch, first_step):
    """Steady rates over steps >= first_step, and per worker (whole run) the Wait-span and
    untraced seconds and the number of Step spans. See the module docstring."""
    per = batch / workers
    steps = {r: db.execute("SELECT start_ns, end_ns, step FROM events WHERE run_id=? AND rank=? AND kind=?",
                           (run_id, r, STEP_KIND)).fetchall() for r in range(workers)}
    steady = {r: [(s, e) for s, e, st in v if st >= first_step] for r, v in steps.items()}
    spans = [x for v in steady.values() for x in v]
    out = {"rate": None, "rate_active": None}
    if spans:
        lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
        out["rate"] = len(spans) * per / ((hi - lo) / 1e9)
        if all(steady.values()):
            lo = max(min(s for s, _ in v) for v in steady.values())
            hi = min(max(e for _, e in v) for v in steady.values())
            if hi > lo:
                n = sum(max(0, min(e, hi) - max(s, lo)) / (e - s) for s, e in spans if e > s)
                out["rate_active"] = n * per / ((hi - lo) / 1e9)
    out["wait"], out["untraced"], out["steps"] = [], [], []
    for r in range(workers):
        waits = db.execute("SELECT start_ns, end_ns FROM events WHERE run_id=? AND rank=? AND kind=?",
                           (run_id, r, WAIT_KIND)).fetchall()
        others = db.execute("SELECT start_ns, end_ns FROM events WHERE run_id=? AND rank=? AND kind!=?",
                            (run_id, r, STEP_KIND)).fetchall()
        whole = [(s, e) for s, e, st in steps[r] if st >= 0]
        out["wait"].append(sum(e - s for s, e in union(waits)) / 1e9)
        out["untraced"].append((sum(e - s for s, e in union(whole)) - overlap(others, whole)) / 1e9)
        out["steps"].append(len(whole))
    # Effective slowdown of rank 1: (its compute + injected delay) / rank 0's compute, per step.
    out["slowdown"] = None
    if workers < 2:
        return out
    per_step = []
    for r in (0, 1):
        spans = db.execute(f"SELECT start_ns, end_ns, kind FROM events WHERE run_id=? AND rank=? AND step>=? AND "
                           f"kind IN ({','.join('?' * (len(COMPUTE_KINDS) + 1))})",
                           (run_id, r, first_step, *COMPUTE_KINDS, DELAY_KIND)).fetchall()
        work = sum(e - s for s, e in union([(s, e) for s, e, k in spans if k != DELAY_KIND]))
        delay = sum(e - s for s, e in union([(s, e) for s, e, k in spans if k == DELAY_KIND]))
        per_step.append((work + (delay if r == 1 else 0)) / max(1, len(steady[r])))
    out["slowdown"] = per_step[1] / per_step[0] if per_step[0] > 0 else None
    return out


# ---------------------------------------------------------------- measurements

def configurations(args):
    """(mode, bound/period, straggler) per row; mode None = one process with `param` threads
    (2: the machine limit; 1: context, one rank's worth of the machine)."""
    modes = [("allreduce", None), ("parameter_server", None)]
    modes += [("ssp", b) for b in args.bounds] + [("local_sgd", p) for p in args.periods]
    return [(None, 2, False), (None, 1, False)] + [(m, p, s) for s in (False, True) for m, p in modes]


def measure(args, tmp, mode, param, straggler):
    """One row: every figure, median over --repeats (other CPU: max)."""
    workers = args.workers if mode else 1
    reps = []
    for rep in range(args.repeats):
        name = f"{mode or 'single'}{'' if param is None else '-' + str(param)}" \
               f"{'-straggler' if straggler else ''}-r{rep}"
        print(f"  running {name} ...", file=sys.stderr, flush=True)
        plan = make_plan(args, name, mode, param, straggler, threads=1 if mode else param, workers=workers)
        summary = run_plan(args, plan, tmp)
        shown = cli_json(args, "show", str(summary["id"]))
        with sqlite3.connect(args.db) as db:
            fig = store_figures(db, summary["id"], workers, args.batch, summary["warmup_steps"])
        fig["rate"] = summary["samples_per_s"]  # loom-cli's steady figure, the one definition
        if any(n != args.steps for n in fig["steps"]):
            print(f"warning: {name}: Step spans per worker {fig['steps']}, expected {args.steps}", file=sys.stderr)
        st = shown.get("staleness")
        if st:
            wait = [w["wait_s"] for w in sorted(st["workers"], key=lambda w: w["rank"])]
            if any(abs(a - b) > 1e-6 for a, b in zip(wait, fig["wait"])):
                print(f"warning: {name}: Wait spans from the store {fig['wait']} != show's wait_s {wait}",
                      file=sys.stderr)
            fig["wait"] = wait
            fig["staleness"] = [st["overall"]["mean"], st["overall"]["p95"], st["overall"]["max"]]
        elif mode in ASYNC:
            print(f"warning: {name}: show --json has no staleness", file=sys.stderr)
        if mode == "local_sgd":
            if shown.get("divergence"):
                fig["divergence"] = shown["divergence"]["mean"]
            else:
                print(f"warning: {name}: show --json has no divergence", file=sys.stderr)
        fig["accuracy"] = shown.get("test_accuracy", summary.get("test_accuracy"))
        fig["foreign"] = summary["foreign_cores"]
        fig["elapsed"] = summary["elapsed_s"]
        fig["ranks"] = len(plan["parallel"]["devices"])
        reps.append(fig)

    def med(key):
        vals = [r.get(key) for r in reps]
        if any(v is None for v in vals):
            return None
        if isinstance(vals[0], list):
            return [statistics.median(x) for x in zip(*vals)]
        return statistics.median(vals)
    row = {k: med(k) for k in ("rate", "rate_active", "wait", "untraced", "staleness", "divergence", "accuracy",
                               "slowdown")}
    row.update(mode=mode, param=param, straggler=straggler, ranks=reps[0]["ranks"],
               foreign=max(r["foreign"] for r in reps), rates=[r["rate"] for r in reps])
    return row


# ---------------------------------------------------------------- report

def fmt(x, spec, empty=""):
    return empty if x is None else format(x, spec)


def per_worker(values, empty="n/a"):
    return empty if values is None else " / ".join(f"{v:.2f}" for v in values)


def report(args, rows, load_before, started):
    cores = os.cpu_count() or 1
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), model)
    except OSError:
        pass
    limit = rows[0]["rate"]
    base = next((r["rate"] for r in rows if r["mode"] == "allreduce" and not r["straggler"]), None)
    out = ["## Asynchronous training: throughput, staleness, accuracy (bench/async_bench.py)", ""]
    out.append(f"- machine: {cores} cores (nproc), {model}, {platform.system()} {platform.release()}; "
               f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    out.append(f"- command: `{args.command}`")
    out.append(f"- date: {started:%Y-%m-%d %H:%M}; loom-cli: `{args.cli}`; whole script {abs(args.total_s):.0f} s"
               + ("; WARNING: loom-cli was rebuilt during the run, rows may mix builds" if args.total_s < 0 else ""))
    out.append(f"- model: MLP 784-256-128-10 (resources/plans/parameter_server_mlp.json), Fashion-MNIST, global "
               f"batch {args.batch} = {args.workers} workers x {args.batch // args.workers}, SGD lr {args.lr}, "
               f"{args.steps} steps, training.threads 1 per rank (machine limit: 1 process, 2 threads), "
               f"one evaluation at the end on {args.test_limit or 'all 10000'} test images; parameter_server/ssp "
               f"with {args.servers} server rank(s); straggler = rank 1 slowed {args.slowdown:g}x")
    out.append("- steady samples/s = loom-cli's steady throughput (docs/figures.md; step 0 is the warm-up step, "
               "setup apart); `all active` and the per-worker figures from the run store over the same steps"
               + (f"; median of {args.repeats} repeats per figure, other CPU "
                                                        f"the largest" if args.repeats > 1 else ""))
    out.append("")
    out.append("| mode | bound/period | straggler | ranks | steady samples/s | vs sync (no straggler) | of machine "
               "limit | samples/s all active | effective slowdown | staleness mean / p95 / max | wait s per worker "
               "| untraced s per worker | divergence | test accuracy | other CPU | note |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        notes = []
        if r["ranks"] > cores:
            notes.append(f"oversubscribed ({r['ranks']} ranks on {cores} cores)")
        if args.repeats > 1:
            notes.append("repeats " + ", ".join(fmt(x, ".0f", "-") for x in r["rates"]))
        mode = r["mode"] or ("1 process, 2 threads (machine limit)" if r["param"] == 2 else "1 process, 1 thread")
        st = r["staleness"]
        stale = "" if st is None else f"{st[0]:.2f} / {st[1]:g} / {st[2]:g}"
        out.append(f"| {mode} | {'' if r['param'] is None or not r['mode'] else r['param']} | "
                   f"{f'rank 1 x{args.slowdown:g}' if r['straggler'] else 'none'} | {r['ranks']} | "
                   f"{fmt(r['rate'], '.0f', '-')} | "
                   f"{fmt(r['rate'] / base if base and r['rate'] else None, '.2f', '-')} | "
                   f"{fmt(r['rate'] / limit if limit and r['rate'] else None, '.0%', '-')} | "
                   f"{fmt(r['rate_active'], '.0f') if r['mode'] else ''} | "
                   f"{fmt(r['slowdown'], '.2f') if r['mode'] else ''} | {stale} | "
                   f"{per_worker(r['wait']) if r['mode'] else ''} | "
                   f"{per_worker(r['untraced']) if r['mode'] else ''} | {fmt(r['divergence'], '.4f')} | "
                   f"{fmt(r['accuracy'], '.1%')} | {r['foreign']:.2f} | {'; '.join(notes)} |")
    out.append("")
    out.append("Per worker = rank 0 / rank 1 / ... (rank 1 is the straggler); wait and untraced are whole-run "
               "seconds. wait = Wait spans (parameter_server/ssp: show's wait_s, the pulls; allreduce/local_sgd: the "
               "same sum from the store: the exposed gradient all-reduce and the replicas' meeting before the "
               "optimizer, where the fast worker waits for the straggler). untraced = time inside Step spans covered "
               "by no other span. Staleness in updates (parameter_server) "
               "or clocks (ssp). samples/s all active: only while every worker is still stepping (an asynchronous "
               "fast worker finishes first). effective slowdown: rank 1's (compute + injected delay) / rank 0's "
               "compute per step. other CPU above ~0.1: the machine was shared during the run.")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description="Synchronous vs parameter server vs SSP vs local SGD, with and "
                                             "without a straggler, with real loom-cli runs.")
    add_run_args(ap, "async_bench.md")
    ap.add_argument("--batch", type=int, default=256, help="global batch (divisible by --workers)")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--test-limit", type=int, default=0, help="test images evaluated (0: all 10000)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--servers", type=int, default=1, help="server ranks for parameter_server and ssp")
    ap.add_argument("--bounds", type=int, nargs="+", default=[0, 1, 4], help="ssp staleness bounds")
    ap.add_argument("--periods", type=int, nargs="+", default=[4, 16], help="local_sgd averaging periods")
    ap.add_argument("--slowdown", type=float, default=3, help="straggler: rank 1's compute time x this")
    ap.add_argument("--repeats", type=int, default=1)
    args = parse_run_args(ap)
    if args.batch % args.workers:
        sys.exit("error: --batch must be divisible by --workers")
    if args.workers < 2:
        sys.exit("error: --workers must be at least 2 (rank 1 is the straggler)")
    started, t0 = datetime.datetime.now(), time.monotonic()
    built = os.stat(args.cli).st_mtime
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="loom-async-bench-") as tmp:
        if not args.db:
            args.db = os.path.join(tmp, "runs.db")
        rows = [measure(args, tmp, *c) for c in configurations(args)]
        args.total_s = time.monotonic() - t0
        if os.stat(args.cli).st_mtime != built:  # the build tree may be shared with someone building
            print(f"warning: {args.cli} was rebuilt during the benchmark: rows may mix builds", file=sys.stderr)
            args.total_s = -args.total_s
        text = report(args, rows, load_before, started)
    write_report(text, args.out)


if __name__ == "__main__":
    main()
