"""Every lesson compiled into Loom, run as a student runs it (`loom-cli lesson NAME --json`,
real mpirun jobs), with its measured answer beside its theory: the table in
bench/results/lessons.md. Each lesson gets a fresh run store; the wall time is the whole
lesson (all its runs, setup included), against the issue's target of under a minute on a
2-core machine.

Usage: /usr/bin/python3 bench/lessons.py [--only NAME,NAME] [--repeats 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import bench_util


def env():
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_btl_vader_single_copy_mechanism="none")


def lesson_names(cli):
    p = subprocess.run([cli, "lesson", "--json"], capture_output=True, text=True, check=True)
    listed = json.loads(p.stdout.strip().splitlines()[-1])
    return [(l["name"], l.get("order", 0)) for l in listed]


def run_lesson(args, tmp, name, repeat):
    db = os.path.join(tmp, f"{name}-{repeat}.db")
    bench_util.wait_for_quiet(args)
    start = time.monotonic()
    p = subprocess.run([args.cli, "lesson", name, "--json", "--db", db], capture_output=True, text=True, env=env())
    wall = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"error: lesson {name} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1]), wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_util.add_run_args(ap, "lessons.md")
    ap.add_argument("--only", default="", help="comma-separated lesson names (default: all)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.set_defaults(steps=1)
    args = bench_util.parse_run_args(ap)
    tmp = tempfile.mkdtemp(prefix="loom-lessons-")
    wanted = [n for n in args.only.split(",") if n]
    lines = ["# Lessons: measured answers against theory", "",
             f"Command: `{args.command}` on {os.cpu_count()} cores. Each lesson runs as `loom-cli lesson NAME "
             "--json` does (real mpirun jobs, full length); measured is the median over the repeats, with its "
             "range when repeated; wall is the whole lesson.", "",
             "| # | lesson | measured | theory | measured/theory | unit | wall s |", "|---|---|---|---|---|---|---|"]
    for name, order in sorted(lesson_names(args.cli), key=lambda x: x[1]):
        if wanted and name not in wanted:
            continue
        results = [run_lesson(args, tmp, name, r) for r in range(args.repeats)]
        measured = [r[0]["measured"] for r in results]
        walls = [r[1] for r in results]
        theory = results[0][0].get("theory")
        unit = results[0][0].get("unit", "")
        med = statistics.median(measured)
        spread = f" ({min(measured):.4g}-{max(measured):.4g})" if len(measured) > 1 else ""
        ratio = f"{med / theory:.3f}" if theory else "-"
        lines.append(f"| {order} | `{name}` | {med:.10g}{spread} | {theory if theory is not None else '-'} | {ratio} "
                     f"| {unit} | {statistics.median(walls):.1f} |")
        print(lines[-1], file=sys.stderr, flush=True)
    bench_util.write_report("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
