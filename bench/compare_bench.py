"""Comparing and analysing large runs: `loom-cli compare` of two real runs of about 1M
events each, and `loom-cli show` (which walks the critical path over every steady step)
of one of them, timed end to end as a user runs them (SQLite reads included).

The runs are real: resources/plans/gpipe_mlp.json and onefoneb_mlp.json (2 ranks, 8
micro-batches: about 204 events per step over both ranks) lengthened to --steps steps, so
each stores about 1M events. Each command runs --repeats times, alternating compare and
show; reported: median and min-max wall seconds, against the targets (compare <= 1 s,
critical path <= 1 s), and the events in each run.

bench_critical_path times the critical path in process as well: reading the run's events
from SQLite, then aligning them, walking every steady step and attributing waits.

Usage: /usr/bin/python3 bench/compare_bench.py [--steps 5000] [--repeats 5]
       [--db RUNS.db --ids A B]   (reuse two runs recorded earlier)
"""
import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

import bench_util
from bench_util import ROOT

PLANS = ("gpipe_mlp.json", "onefoneb_mlp.json")


def lengthened(name, steps, out_dir):
    plan = json.load(open(os.path.join(ROOT, "resources", "plans", name)))
    plan["training"]["steps"] = steps
    plan["training"]["eval_every"] = steps
    path = os.path.join(out_dir, name)
    json.dump(plan, open(path, "w"))
    return path


def env():
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_btl_vader_single_copy_mechanism="none")


def record_run(args, plan):
    p = subprocess.run([args.cli, "run", plan, "--db", args.db, "--json"], capture_output=True, text=True, env=env())
    if p.returncode != 0:
        sys.exit(f"error: {plan} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])["id"]


def timed(cmd):
    start = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env())
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return time.perf_counter() - start


def summary(values):
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_util.add_run_args(ap, "compare_bench.md")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ids", type=int, nargs=2, help="two runs already in --db")
    args = bench_util.parse_run_args(ap)
    tmp = tempfile.mkdtemp(prefix="loom-compare-")
    args.db = args.db or os.path.join(tmp, "runs.db")
    ids = list(args.ids or [])
    for name in PLANS if not ids else ():
        print(f"recording {name} ({args.steps} steps) ...", file=sys.stderr, flush=True)
        bench_util.wait_for_quiet(args)
        ids.append(record_run(args, lengthened(name, args.steps, tmp)))
    db = sqlite3.connect(args.db)
    events = [db.execute("SELECT COUNT(*) FROM events WHERE run_id=?", (i,)).fetchone()[0] for i in ids]
    db.close()
    compare, show = [], []
    for _ in range(args.repeats):
        bench_util.wait_for_quiet(args)
        compare.append(timed([args.cli, "compare", str(ids[0]), str(ids[1]), "--db", args.db, "--json"]))
        show.append(timed([args.cli, "show", str(ids[0]), "--db", args.db, "--json"]))
    cp = subprocess.run([os.path.join(args.build, "bench", "bench_critical_path"), args.db, str(ids[0]), "--repeats",
                         str(args.repeats)], capture_output=True, text=True, check=True)
    in_process = json.loads(cp.stdout.strip().splitlines()[-1])
    lines = ["# Comparing and analysing 1M-event runs", "", f"Command: `{args.command}`", "",
             f"Runs: {PLANS[0]} ({events[0]:,} events) and {PLANS[1]} ({events[1]:,} events), "
             f"{args.steps} steps each, recorded by real 2-rank jobs.", "",
             "| command | what it does | wall time, median (min-max) | target |", "|---|---|---|---|",
             f"| `loom-cli compare A B --json` | both summaries, step times, phase diff | {summary(compare)} | 1 s |",
             f"| `loom-cli show A --json` | summary + critical path over every steady step + waits | "
             f"{summary(show)} | 1 s (critical path) |",
             f"| `bench_critical_path` (in process) | read A's events: {in_process['read_s']:.2f} s; align, walk "
             f"{in_process['steps']} steps, attribute waits: {in_process['walk_s']:.2f} s | "
             f"{in_process['read_s'] + in_process['walk_s']:.2f} s | 1 s |", "",
             "Each loom-cli wall time includes starting loom-cli, reading the events from SQLite and the "
             "whole summary (`show`: breakdown, pipeline replay, staleness), not only the comparison or the path."]
    bench_util.write_report("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
