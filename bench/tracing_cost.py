"""Tracing's cost and the steady-step figures, for every example plan.

For each plan in resources/plans (shortened to --steps steps, evaluated once at the end), the
same `loom-cli run` is made with tracing on and with LOOM_TRACE=off (training records no
events; setup is still recorded), interleaved on / off / on / off ..., --repeats pairs.

  step dilation      the trainer's own steady samples/s metric (rank 0, counted from the
                     end of the warm-up step, computed without the recorder) off / on - 1,
                     per pair; the median over pairs with its min-max. Positive = tracing
                     slows the step.
  implied dilation   what bench_recorder's costs imply: per rank and steady step, (events x
                     record ns + clock reads x clock ns + schedstat reads x schedstat ns) /
                     step time, the reads counted from the trace. Target <= 1%.
  steady vs whole    from the traced runs: samples/s over steady steps (docs/figures.md)
                     against the whole job's (launch, setup and evaluation included), and
                     the setup time.

Usage: /usr/bin/python3 bench/tracing_cost.py [--repeats 3] [--steps 200] [--plans a.json b.json]
"""
import argparse
import glob
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

import bench_util
from bench_util import ROOT

COMM_KINDS = (5, 6, 7, 8, 9, 10, 11, 15, 16)  # event.h measures_descheduling
SEND_KIND = 6
STEP_KIND = 13
SETUP_KIND = 17


def shortened(plan_path, steps, out_dir):
    plan = json.load(open(plan_path))
    training = plan.setdefault("training", {})
    training["steps"] = steps
    training["eval_every"] = steps
    path = os.path.join(out_dir, os.path.basename(plan_path))
    json.dump(plan, open(path, "w"))
    return path


def run(args, plan, trace_on):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none")
    env.pop("LOOM_TRACE", None)
    if not trace_on:
        env["LOOM_TRACE"] = "off"
    bench_util.wait_for_quiet(args)
    p = subprocess.run([args.cli, "run", plan, "--db", args.db, "--json"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"error: {plan} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def metric_rate(db, run_id):
    row = db.execute("SELECT value FROM metrics WHERE run_id=? AND rank=0 AND name='samples_per_s' "
                     "ORDER BY step DESC, t_ns DESC LIMIT 1", (run_id,)).fetchone()
    return row[0] if row else float("nan")


def reads_per_step(db, run_id, summary):
    """What tracing did per rank and steady step, counted from the trace itself inside each
    rank's steady window: events recorded, clock reads (distinct span boundaries: chained
    layer spans share one, a receive and its idle twin share theirs) and schedstat reads
    (two per distinct communication or waiting span that measures descheduling)."""
    totals = {"events": 0.0, "clock_reads": 0.0, "schedstat_reads": 0.0}
    ranks = 0
    for r in summary["ranks"]:
        steps = db.execute("SELECT step, start_ns, end_ns FROM events WHERE run_id=? AND rank=? AND kind=? "
                           "ORDER BY step", (run_id, r["rank"], STEP_KIND)).fetchall()
        steady = [s for s in steps if s[0] >= 1]
        if not steady:
            continue
        lo, hi = min(s[1] for s in steady), max(s[2] for s in steady)
        spans = db.execute("SELECT kind, start_ns, end_ns, microbatch FROM events WHERE run_id=? AND rank=? AND "
                           "start_ns>=? AND start_ns<? AND kind!=?", (run_id, r["rank"], lo, hi, SETUP_KIND)).fetchall()
        boundaries = {t for _, start, end, _ in spans for t in (start, end)}
        # A pipeline send (a Send of a micro-batch) only posts an isend and reads no schedstat.
        comm = {(start, end) for kind, start, end, mb in spans
                if kind in COMM_KINDS and not (kind == SEND_KIND and mb >= 0)}
        totals["events"] += len(spans) / len(steady)
        totals["clock_reads"] += len(boundaries) / len(steady)
        totals["schedstat_reads"] += 2 * len(comm) / len(steady)
        ranks += 1
    return {k: v / max(ranks, 1) for k, v in totals.items()}


def recorder_cost(args):
    exe = os.path.join(args.build, "bench", "bench_recorder")
    p = subprocess.run([exe], capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stdout


def measure_plan(args, plan):
    summaries, off_ids = [], []
    for _ in range(args.repeats):
        summaries.append(run(args, plan, True))
        off_ids.append(run(args, plan, False)["id"])
    db = sqlite3.connect(args.db)
    on = [metric_rate(db, s["id"]) for s in summaries]
    off = [metric_rate(db, i) for i in off_ids]
    dilation = sorted(o / n - 1 for o, n in zip(off, on))
    return {"dilation": dilation, "on": on, "off": off, "summaries": summaries}, db


def implied(cost, db, m):
    s = m["summaries"][len(m["summaries"]) // 2]
    reads = reads_per_step(db, s["id"], s)
    steps = max(s["steady_steps"], 1)
    step_ns = s["train_s"] * 1e9 / steps
    ns = (reads["events"] * cost["record_ns"] + reads["clock_reads"] * cost["clock_ns"] +
          reads["schedstat_reads"] * cost["schedstat_ns"])
    return ns / step_ns, reads


def pct(x):
    return f"{100 * x:+.1f}%"


def report(args, cost, cost_text, results):
    lines = [f"# Tracing cost and steady-step figures", "", f"Command: `{args.command}`", "",
             "Recorder cost (`build/bench/bench_recorder`):", "", "```", cost_text.strip(), "```", "",
             "| plan | ranks | per step and rank: events, clock reads, schedstat reads | implied dilation | measured dilation, median (min..max) "
             "| steady samples/s (on) | whole-job samples/s | setup s | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, m in results:
        s = m["summaries"][len(m["summaries"]) // 2]
        d = m["dilation"]
        imp, reads = m["implied"]
        lines.append(f"| {name} | {s['world_size']} | {reads['events']:.0f}, {reads['clock_reads']:.0f}, "
                     f"{reads['schedstat_reads']:.0f} | {pct(imp)} | "
                     f"{pct(statistics.median(d))} ({pct(d[0])}..{pct(d[-1])}) | {s['samples_per_s']:.0f} | "
                     f"{s['wall_samples_per_s']:.0f} | {s['setup_s']:.2f} | {s['wall_s']:.2f} |")
    lines += ["", "- measured dilation: trace-off / trace-on steady samples/s - 1, per interleaved pair; a spread "
              "that crosses zero by more than the median means this machine's noise hides the cost.",
              "- implied dilation: (events x record + clock reads x clock read + schedstat reads x schedstat read) "
              "per step / step time, with bench_recorder's costs; reads counted from the trace (distinct span "
              "boundaries; two schedstat reads per distinct communication or waiting span). The drain runs on the "
              "streaming thread, not the training thread, and is not counted."]
    bench_util.write_report("\n".join(lines) + "\n", args.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_util.add_run_args(ap, "tracing_cost.md")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--plans", nargs="*", default=sorted(glob.glob(os.path.join(ROOT, "resources", "plans", "*.json"))))
    args = bench_util.parse_run_args(ap)
    tmp = tempfile.mkdtemp(prefix="loom-tracing-")
    args.db = args.db or os.path.join(tmp, "runs.db")
    cost, cost_text = recorder_cost(args)
    results = []
    for plan_path in args.plans:
        name = os.path.basename(plan_path)
        print(f"{name} ...", file=sys.stderr, flush=True)
        m, db = measure_plan(args, shortened(plan_path, args.steps, tmp))
        m["implied"] = implied(cost, db, m)
        results.append((name, m))
    report(args, cost, cost_text, results)


if __name__ == "__main__":
    main()
