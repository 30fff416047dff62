#!/usr/bin/python3
"""How close `loom-cli predict` comes to what the runs then measure, on this machine.

For every example plan that trains and variants of them (PLANS below), in --rounds rounds
(each round every plan once, so that the machine's drift falls on all of them alike):
  1. a calibration run (--cal-steps, as long as `loom-cli calibrate`'s) into a calibration store;
  2. a longer measured run (--steps) into a measurement store; its median step from
     `compare` (warm-up left out).
Then each plan is predicted twice: from the whole calibration store ("seen": this
configuration was calibrated), and from a copy with this plan's calibration runs deleted
("unseen": only the other plans' runs, i.e. other sizes, thread counts, replica counts or
crowding, scaled).
Prints a markdown table (measured median of the rounds with their min-max, the two
predictions and their errors; the fullest rank's memory; for the parameter-server modes
the mean staleness, predicted (seen) and measured in each round; for pipelines each
stage's bubble, the seen prediction stored as a run and shown against the measured runs'
median) and writes it to --out. --keep DIR keeps the stores; --repredict then predicts
again from them without running anything.

  /usr/bin/python3 bench/predict_accuracy.py [--rounds 3] [--steps 200] [--cal-steps 200] [--only REGEX] [--keep DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, add_run_args, parse_run_args, wait_for_quiet  # noqa: E402

CPU = {"kind": "cpu"}
# Every example plan that trains (serving: predict_serving.py), then variants of them: ranks, micro-batches, schedules, buckets,
# stragglers, crowding, the asynchronous modes' bound and workers. (Shaped links:
# predict_shaped.py.)
PLANS = [
    ("one process", "mlp_fashion", {}),
    ("data parallel x4", "dp4_mlp_fashion", {}),
    ("GPipe 2 stages", "gpipe_mlp", {}),
    ("1F1B 2 stages", "onefoneb_mlp", {}),
    ("hybrid 2x2", "hybrid_mlp", {}),
    ("layer split", "layer_split_mlp", {}),
    ("unbalanced pipeline", "pipeline_unbalanced_mlp", {}),
    ("branches, one device", "branches_example", {}),
    ("branches on two devices", "branches_two_devices", {}),
    ("CNN, one process", "cnn_fashion", {}),
    ("spirals, one process", "spirals_synthetic", {}),
    ("parameter server, 2 workers", "parameter_server_mlp", {}),
    ("SSP bound 2, straggler", "ssp_straggler_mlp", {}),
    ("local SGD every 4 steps", "local_sgd_mlp", {}),
    # variants
    ("one process, accumulation x4", "mlp_fashion", {"parallel": {"grad_accumulation": 4}, "training": {"batch": 256}}),
    ("one process, batch 256", "mlp_fashion", {"training": {"batch": 256}}),
    ("data parallel x2, straggler", "mlp_fashion", {"parallel": {"devices": [CPU, CPU], "data_parallel": 2,
                                                                "stragglers": [{"rank": 1, "slowdown": 1.5}]},
                                                   "training": {"batch": 128}}),
    ("data parallel x2, straggler 2 ms delay", "mlp_fashion",
     {"parallel": {"devices": [CPU, CPU], "data_parallel": 2,
                   "stragglers": [{"rank": 1, "delay": "constant", "delay_ms": 2.0}]}, "training": {"batch": 128}}),
    ("data parallel x2, 0.1 MB buckets", "mlp_fashion", {"parallel": {"devices": [CPU, CPU], "data_parallel": 2, "bucket_mb": 0.1},
                                                        "training": {"batch": 128}}),
    ("data parallel x3 on 2 cores", "mlp_fashion", {"parallel": {"devices": [CPU, CPU, CPU], "data_parallel": 3},
                                                   "training": {"batch": 192}}),
    ("1F1B, 4 micro-batches", "onefoneb_mlp", {"parallel": {"microbatches": 4}}),
    ("GPipe, 2 micro-batches", "gpipe_mlp", {"parallel": {"microbatches": 2}}),
    ("hybrid 2x2, 8 micro-batches", "hybrid_mlp", {"parallel": {"microbatches": 8}}),
    ("parameter server, 3 workers", "parameter_server_mlp", {"parallel": {"data_parallel": 3, "devices": [CPU] * 4},
                                                             "training": {"batch": 192}}),
    # five ranks on two cores: a crowding no other plan runs
    ("parameter server, 4 workers", "parameter_server_mlp", {"parallel": {"data_parallel": 4, "devices": [CPU] * 5},
                                                             "training": {"batch": 256}}),
    ("SSP bound 0, no straggler", "ssp_straggler_mlp", {"parallel": {"sync": {"mode": "ssp", "bound": 0, "servers": 1},
                                                                    "stragglers": []}}),
    ("local SGD every step", "local_sgd_mlp", {"parallel": {"sync": {"mode": "local_sgd", "period": 1}}}),
]


def env():
    e = dict(os.environ)
    e.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl_vader_single_copy_mechanism="none")
    return e


def write_plan(folder, index, source, changes, steps):
    with open(os.path.join(ROOT, "resources", "plans", source + ".json")) as f:
        plan = json.load(f)
    for section, values in changes.items():
        plan[section].update(values)
    plan["training"].update(steps=steps, epochs=1, eval_every=0)
    plan["name"] = f"{source}-{index}"
    path = os.path.join(folder, f"plan{index}-{steps}.json")
    with open(path, "w") as f:
        json.dump(plan, f)
    return path


def cli(args, *argv):
    r = subprocess.run([args.cli, *argv], capture_output=True, text=True, env=env())
    return r


def run(args, plan, db):
    wait_for_quiet(args)
    r = cli(args, "run", plan, "--db", db, "--json")
    if r.returncode != 0:
        sys.exit(f"run of {plan} failed: {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])["id"]


def stored_runs(args, db, count):
    """Per plan index, the ids of its runs in a kept store (write_plan names each plan
    SOURCE-INDEX)."""
    r = cli(args, "runs", "--db", db, "--json")
    if r.returncode != 0:
        sys.exit(f"runs failed: {r.stderr}")
    out = [[] for _ in range(count)]
    for stored in sorted(json.loads(r.stdout), key=lambda x: x["id"]):
        out[int(stored["name"].rsplit("-", 1)[1])].append(stored["id"])
    return out


def median_step(args, db, run_id, other_id):
    """A run's median step (ms), as `compare` gives it (it compares two runs at least)."""
    r = cli(args, "compare", str(run_id), str(other_id), "--db", db, "--json")
    if r.returncode != 0:
        sys.exit(f"compare failed: {r.stderr}")
    for m in json.loads(r.stdout.strip().splitlines()[-1])["metrics"]:
        if m["key"] == "step_time_median_ms":
            return m["values"][0]
    sys.exit("compare gave no step_time_median_ms")


def predict(args, plan, db):
    """(step ms, the fullest rank's predicted bytes, mean staleness or None, why not) of a prediction."""
    r = cli(args, "predict", plan, "--db", db, "--json")
    if r.returncode != 0:
        return None, None, None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
    p = json.loads(r.stdout.strip().splitlines()[-1])
    staleness = p["staleness"]["mean"] if "staleness" in p else None
    return p["step_ms"], max(m["total"] for m in p["memory"]), staleness, ""


def stage_bubbles(args, db, run_id):
    """Each pipeline stage's bubble fraction as `show` gives it (None: not a pipeline)."""
    r = cli(args, "show", str(run_id), "--db", db, "--json")
    if r.returncode != 0:
        sys.exit(f"show failed: {r.stderr}")
    stages = json.loads(r.stdout.strip().splitlines()[-1]).get("stages") or []
    return [s["bubble_fraction"] for s in stages] if len(stages) > 1 else None


def predicted_bubbles(args, plan, cal_db, folder, index):
    """The seen prediction stored as a run (in a copy of the calibration store) and its
    stages' bubbles as `show` gives them, so both sides are the same figure."""
    db = os.path.join(folder, f"bubble{index}.db")
    shutil.copy(cal_db, db)
    r = cli(args, "predict", plan, "--db", db, "--store", "--json")
    if r.returncode != 0:
        return None
    return stage_bubbles(args, db, json.loads(r.stdout.strip().splitlines()[-1])["id"])


def measured_figures(args, db, run_id):
    """The fullest rank's device memory at its end (buffers keep their largest size: the
    peak), and the mean staleness where the run recorded updates."""
    r = cli(args, "show", str(run_id), "--db", db, "--json")
    if r.returncode != 0:
        sys.exit(f"show failed: {r.stderr}")
    shown = json.loads(r.stdout.strip().splitlines()[-1])
    staleness = shown["staleness"]["overall"]["mean"] if "staleness" in shown else None
    return max(m["total_bytes"] for m in shown["device_memory"]), staleness


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(ap, "predict_accuracy.md")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--cal-steps", type=int, default=200)  # as `loom-cli calibrate` (kCalibrationSteps)
    ap.add_argument("--only", help="only the plans whose label matches this regular expression")
    ap.add_argument("--keep", help="keep the plans and the calibration and measurement stores in this folder")
    ap.add_argument("--repredict", action="store_true",
                    help="run nothing: predict again from the stores a run with --keep left there (after a change "
                         "to the predictor; the measured side is the same runs)")
    args = parse_run_args(ap)
    plans = [p for p in PLANS if not args.only or re.search(args.only, p[0])]
    folder = args.keep or tempfile.mkdtemp(prefix="loom-predict-")
    os.makedirs(folder, exist_ok=True)
    cal_db, meas_db = os.path.join(folder, "calibration.db"), os.path.join(folder, "measured.db")
    cal_runs = [[] for _ in plans]
    measured = [[] for _ in plans]
    if args.repredict:
        if not args.keep or args.only:
            sys.exit("error: --repredict needs --keep DIR of an earlier run, and every plan (no --only)")
        cal_runs, measured = stored_runs(args, cal_db, len(plans)), stored_runs(args, meas_db, len(plans))
    for round_ in range(0 if args.repredict else args.rounds):
        for i, (label, source, changes) in enumerate(plans):
            print(f"round {round_ + 1}: {label}", file=sys.stderr, flush=True)
            cal_runs[i].append(run(args, write_plan(folder, i, source, changes, args.cal_steps), cal_db))
            measured[i].append(run(args, write_plan(folder, i, source, changes, args.steps), meas_db))
    all_ids = [rid for runs in measured for rid in runs]
    by_id = {rid: median_step(args, meas_db, rid, all_ids[0] if rid != all_ids[0] else all_ids[1]) for rid in all_ids}
    rows, stale_rows, bubble_rows = [], [], []
    for i, (label, source, changes) in enumerate(plans):
        plan = write_plan(folder, i, source, changes, args.steps)
        seen, memory, staleness, why_seen = predict(args, plan, cal_db)
        unseen_db = os.path.join(folder, f"unseen{i}.db")
        shutil.copy(cal_db, unseen_db)
        for rid in cal_runs[i]:
            cli(args, "delete", str(rid), "--db", unseen_db, "--yes")
        unseen, _, _, why_unseen = predict(args, plan, unseen_db)
        peak, first_staleness = measured_figures(args, meas_db, measured[i][0])
        if staleness is not None or first_staleness is not None:
            # every round's: a configuration near a turning point measures either side of it
            each_round = [first_staleness] + [measured_figures(args, meas_db, rid)[1] for rid in measured[i][1:]]
            stale_rows.append((label, staleness, each_round))
        measured_bubbles = [stage_bubbles(args, meas_db, rid) for rid in measured[i]]
        if measured_bubbles[0] is not None:
            per_stage = [sorted(run[s] for run in measured_bubbles) for s in range(len(measured_bubbles[0]))]
            bubble_rows.append((label, predicted_bubbles(args, plan, cal_db, folder, i),
                                [v[len(v) // 2] for v in per_stage], [(v[0], v[-1]) for v in per_stage]))
        values = sorted(by_id[r] for r in measured[i])
        mid = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
        rows.append((label, mid, values[0], values[-1], seen, why_seen, unseen, why_unseen, memory, peak))

    def err(p, m):
        return f"{100 * (p / m - 1):+.1f}%" if p is not None else "-"

    lines = [f"Command: `{args.command}`", "",
             "| plan | measured median step, ms (min-max over rounds) | spread | predicted, seen | error | predicted, unseen | error "
             "| memory of the fullest rank, predicted / measured peak | error |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for label, mid, lo, hi, seen, ws, unseen, wu, memory, peak in rows:
        mem = f"{memory / 1024:.0f} / {peak / 1024:.0f} KiB" if memory else "-"
        lines.append(f"| {label} | {mid:.3f} ({lo:.3f}-{hi:.3f}) | {100 * (hi - lo) / mid:.0f}% "
                     f"| {seen if seen is None else f'{seen:.3f}'} | {err(seen, mid)} "
                     f"| {unseen if unseen is None else f'{unseen:.3f}'} | {err(unseen, mid)} | {mem} | {err(memory, peak)} |")
        for kind, why in (("seen", ws), ("unseen", wu)):
            if why:
                notes.append(f"- {label}, {kind}: {why}")

    def summary(values):
        values = sorted(values)
        if not values:
            return "none"
        mid = values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
        return f"mean {sum(values) / len(values):.1f}%, median {mid:.1f}%, over {len(values)} plans"

    seen_errors = [abs(100 * (r[4] / r[1] - 1)) for r in rows if r[4] is not None]
    unseen_errors = [abs(100 * (r[6] / r[1] - 1)) for r in rows if r[6] is not None]
    spreads = [100 * (r[3] - r[2]) / r[1] for r in rows]
    memory_errors = [abs(100 * (r[8] / r[9] - 1)) for r in rows if r[8]]
    lines += ["", f"|error| seen: {summary(seen_errors)}; unseen: {summary(unseen_errors)}; "
                  f"the measured runs' own spread (max-min over median): {summary(spreads)}; "
                  f"memory of the fullest rank: {summary(memory_errors)}."]
    if stale_rows:
        lines += ["", "| plan | mean staleness, predicted (seen) | measured, each round |", "|---|---|---|"]
        for label, predicted, each_round in stale_rows:
            show = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
            lines.append(f"| {label} | {show(predicted)} | {', '.join(show(v) for v in each_round)} |")
    if bubble_rows:
        lines += ["", "| plan | bubble per stage, predicted (seen) | measured (median of rounds, min-max) | largest difference |",
                  "|---|---|---|---|"]
        for label, predicted, measured_mid, spread in bubble_rows:
            pct = lambda v: f"{100 * v:.1f}%"  # noqa: E731
            shown = ", ".join(pct(v) for v in predicted) if predicted else "-"
            meas = ", ".join(f"{pct(m)} ({pct(lo)}-{pct(hi)})" for m, (lo, hi) in zip(measured_mid, spread))
            diff = (f"{100 * max(abs(p - m) for p, m in zip(predicted, measured_mid)):.1f} points"
                    if predicted and len(predicted) == len(measured_mid) else "-")
            lines.append(f"| {label} | {shown} | {meas} | {diff} |")
    text = "\n".join(lines + ([""] + notes if notes else [])) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
