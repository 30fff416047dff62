#!/usr/bin/python3
"""Serving predicted before it runs, against the runs: the serving example (a CNN, 2
clients, Poisson arrivals) is run once at its own settings to calibrate (the batch's
forward pass by size, a request's overhead distribution); then every configuration of
the sweep (rate, max batch B, timeout T) is predicted from that one run alone, and run
--rounds times (rounds interleaved, A B C ... A B C ...). Reports p50 and p95 latency,
predicted and measured (median of the rounds, with their min-max), and the errors.

  /usr/bin/python3 bench/predict_serving.py [--rounds 3]
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, add_run_args, cli_json as cli, parse_run_args, wait_for_quiet  # noqa: E402

# (rate requests/s, max batch, timeout ms)
CONFIGS = [(400, 8, 5), (200, 8, 5), (800, 8, 5), (400, 4, 5), (400, 16, 10), (400, 8, 1), (1200, 16, 5)]


def plan_file(folder, rate, batch, timeout):
    with open(os.path.join(ROOT, "resources", "plans", "serve_cnn_fashion.json")) as f:
        plan = json.load(f)
    plan["name"] = f"serve-{rate}-{batch}-{timeout}"
    plan["serve"].update(rate=rate, max_batch=batch, timeout_ms=timeout)
    path = os.path.join(folder, plan["name"] + ".json")
    with open(path, "w") as f:
        json.dump(plan, f)
    return path


def middle(values):
    values = sorted(values)
    return values[len(values) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(ap, "predict_serving.md")
    ap.add_argument("--rounds", type=int, default=3)
    args = parse_run_args(ap)
    folder = tempfile.mkdtemp(prefix="loom-serve-")
    cal_db, meas_db = os.path.join(folder, "calibration.db"), os.path.join(folder, "measured.db")
    wait_for_quiet(args)
    cli(args, "run", plan_file(folder, *CONFIGS[0]), "--db", cal_db, "--json")
    predicted = {c: cli(args, "predict", plan_file(folder, *c), "--db", cal_db, "--json") for c in CONFIGS}
    measured = {c: [] for c in CONFIGS}
    for round_ in range(args.rounds):
        for c in CONFIGS:
            print(f"round {round_ + 1}: rate {c[0]}, B {c[1]}, T {c[2]}", file=sys.stderr, flush=True)
            wait_for_quiet(args)
            run = cli(args, "run", plan_file(folder, *c), "--db", meas_db, "--json")
            shown = cli(args, "show", str(run["id"]), "--db", meas_db, "--json")
            measured[c].append(shown["serving"]["latency_ms"])
    lines = [f"Command: `{args.command}`", "",
             "Calibrated from one run at rate 400/s, B 8, T 5 ms; every row predicted from that run alone.", "",
             "| rate/s | B | T ms | p50 predicted | p50 measured (min-max) | error | p95 predicted | p95 measured (min-max) | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    errors = {"p50": [], "p95": []}
    for c in CONFIGS:
        row = [str(c[0]), str(c[1]), str(c[2])]
        for q in ("p50", "p95"):
            p = predicted[c]["latency_ms"][q]
            m = [x[q] for x in measured[c]]
            e = 100 * (p / middle(m) - 1)
            errors[q].append(abs(e))
            row += [f"{p:.2f}", f"{middle(m):.2f} ({min(m):.2f}-{max(m):.2f})", f"{e:+.0f}%"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "|error|: " + "; ".join(f"{q} median {middle(v):.0f}%, max {max(v):.0f}%" for q, v in errors.items()) + "."]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
