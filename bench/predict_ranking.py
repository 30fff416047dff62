#!/usr/bin/python3
"""Does the layout search pick the layout that is measured fastest? On this machine:
`loom-cli calibrate` the plan, `loom-cli search --devices D --save` its layouts, then run
the first --layouts of the ranking (saved plans; rounds interleaved) and compare: the
predicted best's measured step against the measured best's (target: the same layout, or
within 5%), and the predicted order against the measured one.

  /usr/bin/python3 bench/predict_ranking.py [--plan resources/plans/mlp_fashion.json] [--devices 2]
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, add_run_args, cli_json as cli, median_step_ms, parse_run_args, wait_for_quiet  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(ap, "predict_ranking.md")
    ap.add_argument("--plan", default=os.path.join(ROOT, "resources", "plans", "mlp_fashion.json"))
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--layouts", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=150)
    args = parse_run_args(ap)
    folder = tempfile.mkdtemp(prefix="loom-ranking-")
    db = os.path.join(folder, "runs.db")
    calibration = cli(args, "calibrate", args.plan, "--db", db, "--steps", "80", "--json")
    ranked = cli(args, "search", args.plan, "--db", db, "--devices", str(args.devices), "--json")["layouts"]
    ranked = [r for r in ranked if "left_out" not in r][:args.layouts]
    saved = cli(args, "search", args.plan, "--db", db, "--devices", str(args.devices), "--top", str(args.layouts),
                "--save", folder, "--json")["saved"]
    measured = {i: [] for i in range(len(saved))}
    other = calibration["runs"][0]["id"]
    for round_ in range(args.rounds):
        for i, path in enumerate(saved):
            with open(path) as f:
                plan = json.load(f)
            plan["training"].update(steps=args.steps, epochs=1, eval_every=0)
            with open(path, "w") as f:
                json.dump(plan, f)
            wait_for_quiet(args)
            run = cli(args, "run", path, "--db", db, "--json")
            measured[i].append(median_step_ms(args, db, run["id"], other))
            print(f"round {round_ + 1}, layout {i + 1}: {measured[i][-1]:.3f} ms", file=sys.stderr, flush=True)
    lines = [f"Command: `{args.command}`", "",
             f"Calibrated by `loom-cli calibrate` (80 steps); layouts of `{os.path.basename(args.plan)}` on up to "
             f"{args.devices} devices, the first {len(saved)} of the predicted ranking, each run {args.rounds} times.", "",
             "| predicted rank | layout | predicted step, ms | measured step, ms (min-max) | measured rank |", "|---|---|---|---|---|"]
    mid = {i: sorted(v)[len(v) // 2] for i, v in measured.items()}
    order = sorted(mid, key=lambda i: mid[i])
    for i in range(len(saved)):
        layout = ranked[i]
        name = f"{layout['replicas']} x {layout['stages']}, {layout['schedule']}, {layout['microbatches']} mb, {layout['bucket_mb']:g} MB"
        lines.append(f"| {i + 1} | {name} | {layout['step_ms']:.3f} | {mid[i]:.3f} ({min(measured[i]):.3f}-{max(measured[i]):.3f}) "
                     f"| {order.index(i) + 1} |")
    gap = 100 * (mid[0] / mid[order[0]] - 1)
    lines += ["", f"The predicted best measured {mid[0]:.3f} ms; the measured best ({order[0] + 1} in the predicted order) "
                  f"{mid[order[0]]:.3f} ms: {gap:+.1f}% (target: within 5%)."]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
