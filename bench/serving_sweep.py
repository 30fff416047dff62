"""The request-batching sweep: resources/plans/serve_cnn_fashion.json (rank 0 serves the
CNN, two client ranks send Poisson requests) run by loom-cli over a grid of largest batch
B, timeout T and arrival rate, every run a real mpirun job. Reported per run, from
`loom-cli show --json` (figures defined in docs/figures.md, "Serving"): latency p50/p95/p99,
throughput, mean batch against the textbook min(B, 1 + rate x T) (valid while the
server keeps up), the mean compute of a batch and the server's busy fraction.

There is no peer tool here: serving frameworks (Triton, TorchServe) are not installed on
this machine, so the reference is the formula, and the limit is the arrival rate itself
(a server that keeps up serves exactly what arrives).

Usage: /usr/bin/python3 bench/serving_sweep.py [--rates 400,3000] [--batches 1,2,4,8,16]
       [--timeouts 2,10] [--requests 800]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import bench_util


def env():
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_btl_vader_single_copy_mechanism="none")


def ints(text):
    return [int(x) for x in text.split(",") if x]


def numbers(text):
    return [float(x) for x in text.split(",") if x]


def run_one(args, tmp, rate, batch, timeout_ms):
    plan = json.load(open(os.path.join(bench_util.ROOT, "resources", "plans", "serve_cnn_fashion.json")))
    plan["name"] = f"serve-r{rate:g}-b{batch}-t{timeout_ms:g}"
    plan["data"]["path"] = args.data
    plan["serve"].update({"max_batch": batch, "timeout_ms": timeout_ms, "rate": rate, "requests": args.requests})
    path = os.path.join(tmp, "plan.json")
    json.dump(plan, open(path, "w"))
    bench_util.wait_for_quiet(args)
    p = subprocess.run([args.cli, "run", path, "--db", args.db, "--json"], capture_output=True, text=True, env=env())
    if p.returncode != 0:
        sys.exit(f"error: {plan['name']} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    run_id = json.loads(p.stdout.strip().splitlines()[-1])["id"]
    shown = subprocess.run([args.cli, "show", str(run_id), "--db", args.db, "--json"], capture_output=True, text=True)
    return json.loads(shown.stdout.strip().splitlines()[-1])["serving"]


def row(rate, batch, timeout_ms, s):
    theory = min(batch, 1 + rate * timeout_ms / 1000)
    lat = s["latency_ms"]
    return (f"| {rate:g} | {batch} | {timeout_ms:g} | {lat['p50']:.2f} | {lat['p95']:.2f} | {lat['p99']:.2f} "
            f"| {s['throughput_per_s']:.0f} | {s['throughput_per_s'] / rate:.2f} | {s['mean_batch']:.2f} "
            f"| {theory:.2f} | {s['batch_compute_ms']:.3f} | {100 * s['busy_fraction']:.0f}% |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_util.add_run_args(ap, "serving_sweep.md")
    ap.add_argument("--rates", type=numbers, default=numbers("400,3000"))
    ap.add_argument("--batches", type=ints, default=ints("1,2,4,8,16"))
    ap.add_argument("--timeouts", type=numbers, default=numbers("2,10"))
    ap.add_argument("--requests", type=int, default=800)
    ap.set_defaults(steps=1)
    args = bench_util.parse_run_args(ap)
    tmp = tempfile.mkdtemp(prefix="loom-serving-")
    args.db = args.db or os.path.join(tmp, "runs.db")
    lines = ["# Request batching sweep", "",
             f"Command: `{args.command}` on {os.cpu_count()} cores; {args.requests} requests per run from 2 "
             "clients (Poisson), rank 0 serving `serve_cnn_fashion.json`'s CNN with its initial weights.", "",
             "served/rate: throughput over the arrival rate (1.00 = the server keeps up; with Poisson "
             "arrivals the seed's sample of arrival times sets it: seed 42's last requests arrive about 5% "
             "after requests/rate, so a server that keeps up shows 0.95, the same in every run). theory: "
             "min(B, 1 + rate x T), the mean batch of a server that keeps up. Latency: sent to reply, client "
             "clock. busy: the batches' compute over the serving span.", "",
             "| rate/s | B | T ms | p50 ms | p95 ms | p99 ms | served/s | served/rate | mean batch | theory "
             "| compute ms | busy |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rate in args.rates:
        for timeout_ms in args.timeouts:
            for batch in args.batches:
                s = run_one(args, tmp, rate, batch, timeout_ms)
                lines.append(row(rate, batch, timeout_ms, s))
                print(lines[-1], file=sys.stderr, flush=True)
    bench_util.write_report("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
