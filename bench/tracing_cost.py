"""Tracing's cost and the steady-step figures, for every example plan.

For each plan in resources/plans (shortened to --steps steps, evaluated once at the end), the
same `loom-cli run` is made with tracing on and with LOOM_TRACE=off (training records no
events; setup is still recorded), interleaved on / off / on / off ..., --repeats pairs.

  step dilation      the trainer's own steady samples/s metric (rank 0, counted from the
                     end of the warm-up step, computed without the recorder) off / on - 1,
                     per pair; the median over pairs with its min-max. Positive = tracing
                     slows the step.
  implied dilation   what bench_recorder's cost per event implies: per rank and steady step,
                     (compute spans x compute-span ns + communication and waiting spans x
                     communication-span ns) / step time. Target <= 1%.
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


def events_per_step(db, run_id, summary):
    """(compute-like spans, communication/waiting spans) per rank and steady step, counted
    inside each rank's steady window."""
    counts = [0, 0]
    ranks = 0
    for r in summary["ranks"]:
        steps = db.execute("SELECT step, start_ns, end_ns FROM events WHERE run_id=? AND rank=? AND kind=? "
                           "ORDER BY step", (run_id, r["rank"], STEP_KIND)).fetchall()
        steady = [s for s in steps if s[0] >= 1]
        if not steady:
            continue
        lo, hi = min(s[1] for s in steady), max(s[2] for s in steady)
        kinds = db.execute("SELECT kind, COUNT(*) FROM events WHERE run_id=? AND rank=? AND start_ns>=? AND "
                           "start_ns<? AND kind!=? GROUP BY kind", (run_id, r["rank"], lo, hi, SETUP_KIND))
        for kind, n in kinds:
            counts[1 if kind in COMM_KINDS else 0] += n / len(steady)
        ranks += 1
    return [c / max(ranks, 1) for c in counts]


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
    compute, comm = events_per_step(db, s["id"], s)
    steps = max(s["steady_steps"], 1)
    step_ns = s["train_s"] * 1e9 / steps
    return (compute * cost["compute_span_ns"] + comm * cost["comm_span_ns"]) / step_ns, compute, comm


def pct(x):
    return f"{100 * x:+.1f}%"


def report(args, cost, cost_text, results):
    lines = [f"# Tracing cost and steady-step figures", "", f"Command: `{args.command}`", "",
             "Recorder cost (`build/bench/bench_recorder`):", "", "```", cost_text.strip(), "```", "",
             "| plan | ranks | spans/step/rank (compute, comm+wait) | implied dilation | measured dilation, median (min..max) "
             "| steady samples/s (on) | whole-job samples/s | setup s | wall s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, m in results:
        s = m["summaries"][len(m["summaries"]) // 2]
        d = m["dilation"]
        imp, compute, comm = m["implied"]
        lines.append(f"| {name} | {s['world_size']} | {compute:.0f}, {comm:.0f} | {pct(imp)} | "
                     f"{pct(statistics.median(d))} ({pct(d[0])}..{pct(d[-1])}) | {s['samples_per_s']:.0f} | "
                     f"{s['wall_samples_per_s']:.0f} | {s['setup_s']:.2f} | {s['wall_s']:.2f} |")
    lines += ["", "- measured dilation: trace-off / trace-on steady samples/s - 1, per interleaved pair; a spread "
              "that crosses zero by more than the median means this machine's noise hides the cost.",
              "- implied dilation: spans per step x bench_recorder's cost per span / step time."]
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
