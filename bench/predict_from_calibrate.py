#!/usr/bin/python3
"""How close `loom-cli predict` comes with no history but `loom-cli calibrate` of one plan.

A user who has run nothing calibrates once (`loom-cli calibrate PLAN`) and then predicts
the plan's neighbours: other batches, replicas, buckets, stages and micro-batches. This
bench does exactly that, in --rounds rounds (each round: a fresh store, `calibrate` of
--base, every variant predicted from that store alone, then every variant run once into
a measurement store), and writes a markdown table: per variant the measured median step
over the rounds (min-max), the predictions' median (min-max) and the error between the
two medians; the variants that `calibrate` itself ran are marked. Each round also
predicts from a copy of its store without calibrate's runs at four times the batch (the
larger batch and the 1 KB buckets), to show what those runs add; or, with
--long-cal-steps N, from a second `calibrate --steps N` in the same round (the two
calibrations in alternating order), to show what longer calibration runs change.

  /usr/bin/python3 bench/predict_from_calibrate.py [--rounds 3] [--steps 200] [--base mlp_fashion] [--long-cal-steps N]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import add_run_args, parse_run_args  # noqa: E402
from predict_accuracy import CPU, cli, median_step, run, write_plan  # noqa: E402

# (label, changes to the base plan)
VARIANTS = [
    ("one process, batch 64", {}),
    ("one process, batch 32", {"training": {"batch": 32}}),
    ("one process, batch 128", {"training": {"batch": 128}}),
    ("one process, batch 256", {"training": {"batch": 256}}),
    ("data parallel x2", {"parallel": {"devices": [CPU] * 2, "data_parallel": 2}, "training": {"batch": 128}}),
    ("data parallel x2, 0.1 MB buckets", {"parallel": {"devices": [CPU] * 2, "data_parallel": 2, "bucket_mb": 0.1},
                                          "training": {"batch": 128}}),
    ("data parallel x2, 1 MB buckets, batch 64", {"parallel": {"devices": [CPU] * 2, "data_parallel": 2, "bucket_mb": 1}}),
    ("data parallel x4 on 2 cores", {"parallel": {"devices": [CPU] * 4, "data_parallel": 4}, "training": {"batch": 256}}),
    ("data parallel x3 on 2 cores", {"parallel": {"devices": [CPU] * 3, "data_parallel": 3}, "training": {"batch": 192}}),
    ("1F1B 2 stages, 4 micro-batches", {"parallel": {"devices": [CPU] * 2, "stages": 2, "microbatches": 4,
                                                     "schedule": "1f1b"}}),
    ("GPipe 2 stages, 8 micro-batches", {"parallel": {"devices": [CPU] * 2, "stages": 2, "microbatches": 8,
                                                      "schedule": "gpipe"}, "training": {"batch": 128}}),
]


def stage_layers(plan_path, stages):
    """Cut the base model's layers into `stages` stages as the pipeline examples do: the
    first half of the top-level layers on stage 0 (write_plan copies the base's layers)."""
    if stages < 2:
        return
    with open(plan_path) as f:
        plan = json.load(f)
    layers = plan["model"]["layers"]
    for i, layer in enumerate(layers):
        layer["stage"] = min(stages - 1, i * stages // len(layers))
    with open(plan_path, "w") as f:
        json.dump(plan, f)


def variant_plan(args, folder, index, changes, steps):
    path = write_plan(folder, index, args.base, changes, steps)
    stage_layers(path, changes.get("parallel", {}).get("stages", 1))
    return path


def predicted_step(args, plan, db):
    """(step ms, whether calibrate ran this very configuration, why there is no step)."""
    r = cli(args, "predict", plan, "--db", db, "--json")
    if r.returncode != 0:
        return None, False, (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
    p = json.loads(r.stdout.strip().splitlines()[-1])
    return p["step_ms"], "measured_steps_ms" in p, ""  # what its own runs measured, where there were some


def without_larger_batch(args, cal_db):
    """A copy of the store without calibrate's runs at four times the batch."""
    path = cal_db.replace(".db", "-small.db")
    shutil.copy(cal_db, path)
    r = cli(args, "runs", "--db", path, "--json")
    for stored in json.loads(r.stdout):
        if "4x the batch" in stored["name"]:
            cli(args, "delete", str(stored["id"]), "--db", path, "--yes")
    return path


def median(values):
    v = sorted(values)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(ap, "predict_from_calibrate.md")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--base", default="mlp_fashion")
    ap.add_argument("--long-cal-steps", type=int, default=0,
                    help="also calibrate with this many steps a run, and predict from that store in the third column")
    args = parse_run_args(ap)
    folder = tempfile.mkdtemp(prefix="loom-calibrate-")
    meas_db = os.path.join(folder, "measured.db")
    predicted = [[] for _ in VARIANTS]
    predicted_small = [[] for _ in VARIANTS]
    ran = [False for _ in VARIANTS]
    measured = [[] for _ in VARIANTS]
    notes = set()
    for round_ in range(args.rounds):
        cal_db = os.path.join(folder, f"calibration{round_}.db")
        base = write_plan(folder, 0, args.base, {}, args.steps)
        if args.long_cal_steps:
            small_db = cal_db.replace(".db", "-long.db")
            order = [(cal_db, []), (small_db, ["--steps", str(args.long_cal_steps)])]
            for db, extra in (order if round_ % 2 == 0 else order[::-1]):
                print(f"round {round_ + 1}: calibrate {' '.join(extra)}", file=sys.stderr, flush=True)
                r = cli(args, "calibrate", base, "--db", db, *extra)
                if r.returncode != 0:
                    sys.exit(f"calibrate failed: {r.stderr}")
        else:
            print(f"round {round_ + 1}: calibrate", file=sys.stderr, flush=True)
            r = cli(args, "calibrate", base, "--db", cal_db)
            if r.returncode != 0:
                sys.exit(f"calibrate failed: {r.stderr}")
            small_db = without_larger_batch(args, cal_db)
        for i, (label, changes) in enumerate(VARIANTS):
            plan = variant_plan(args, folder, i, changes, args.steps)
            step, seen, why = predicted_step(args, plan, cal_db)
            ran[i] = ran[i] or seen
            if step is None:
                notes.add(f"- {label}: {why}")
            else:
                predicted[i].append(step)
            small, _, _ = predicted_step(args, plan, small_db)
            if small is not None:
                predicted_small[i].append(small)
        for i, (label, changes) in enumerate(VARIANTS):
            print(f"round {round_ + 1}: {label}", file=sys.stderr, flush=True)
            measured[i].append(run(args, variant_plan(args, folder, i, changes, args.steps), meas_db))
    ids = [rid for runs in measured for rid in runs]
    steps = {rid: median_step(args, meas_db, rid, ids[0] if rid != ids[0] else ids[1]) for rid in ids}
    third = f"calibrated with {args.long_cal_steps} steps a run" if args.long_cal_steps else "without the 4x-batch runs"
    lines = [f"Command: `{args.command}`", "",
             "| variant of " + args.base + " | calibrate ran it | measured median step, ms (min-max) "
             f"| predicted, ms (min-max over rounds) | error | {third} | error |",
             "|---|---|---|---|---|---|---|"]
    errors = []

    def shown(values, m):
        if not values:
            return "- | -", None
        error = 100 * (median(values) / median(m) - 1)
        return f"{median(values):.3f} ({min(values):.3f}-{max(values):.3f}) | {error:+.1f}%", error

    for i, (label, _) in enumerate(VARIANTS):
        m = [steps[rid] for rid in measured[i]]
        full, error = shown(predicted[i], m)
        small, small_error = shown(predicted_small[i], m)
        if error is not None:
            errors.append((abs(error), abs(small_error) if small_error is not None else None, ran[i]))
        lines.append(f"| {label} | {'yes' if ran[i] else 'no'} | {median(m):.3f} ({min(m):.3f}-{max(m):.3f}) | {full} | {small} |")
    unrun = [(e, s) for e, s, seen in errors if not seen]
    if unrun:
        lines += ["", f"|error| of the variants calibrate did not run: median {median([e for e, _ in unrun]):.1f}%, at most "
                      f"{max(e for e, _ in unrun):.1f}%, over {len(unrun)}."]
        small = [s for _, s in unrun if s is not None]
        if small:
            lines[-1] += (f" {third[0].upper() + third[1:]}: median {median(small):.1f}%, at most {max(small):.1f}%, "
                          f"over {len(small)}.")
    if args.long_cal_steps:
        for name, column in (("calibrated with the default steps", predicted), (third, predicted_small)):
            signed = [100 * (median(column[i]) / median([steps[rid] for rid in measured[i]]) - 1)
                      for i in range(len(VARIANTS)) if column[i]]
            lines.append(f"Signed error {name}: median {median(signed):+.1f}% over {len(signed)} variants.")
    text = "\n".join(lines + ([""] + sorted(notes) if notes else [])) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
