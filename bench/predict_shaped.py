#!/usr/bin/python3
"""Predicted against measured across a shaped network: two simulated hosts
(scripts/cluster/netns-hosts.sh: network namespaces loom-a and loom-b, one rank each),
their links shaped with tc (--rate; a token bucket, tbf), and a cluster file that says
the same (two hosts like this one, the link's bandwidth, and its latency). --delay-ms
adds a one-way delay between the hosts: this kernel has no netem, so a delay line
(build/bench/link_delay, a tun device the hosts' packets are routed through; see
scripts/cluster/netns-hosts.sh) holds each packet that long. The cluster file's latency is
--latency-us plus the delay; --latency-us stands for the veth hop and the TCP stack (a TCP
ping-pong between the hosts takes 0.034-0.051 ms there and back unshaped).

  1. calibration: the same plans with both ranks on this host (localhost), --cal-steps,
     so that every layer, loss, optimizer and residual cost at 1 BLAS thread is measured;
  2. prediction: `loom-cli predict PLAN --cluster` with the shaped link;
  3. measurement: the plan across the shaped hosts, --rounds times, median step.
Plans: 2 data-parallel replicas (an all-reduce a step over the link) and a 2-stage 1F1B
pipeline (activations and gradients over the link per micro-batch). Root only (network
namespaces, tc). Writes the table to --out.

  /usr/bin/python3 bench/predict_shaped.py [--rate 1gbit] [--delay-ms 2] [--latency-us 50] [--queue-ms 5] [--rounds 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import ROOT, add_run_args, cli_json, median_step_ms, parse_run_args  # noqa: E402

SCRIPTS = os.path.join(ROOT, "scripts", "cluster")
HOSTS = ["loom-a", "loom-b"]


def plan_for(kind, hosts, steps):
    """The 784-256-128-10 MLP of the examples on two ranks, 1 BLAS thread each."""
    source = "dp4_mlp_fashion" if kind == "data parallel x2" else "onefoneb_mlp"
    with open(os.path.join(ROOT, "resources", "plans", source + ".json")) as f:
        plan = json.load(f)
    plan["name"] = f"shaped-{kind.split()[0]}-{hosts[0]}"
    plan["training"].update(steps=steps, epochs=1, eval_every=0, threads=1)
    plan["parallel"]["devices"] = [{"kind": "cpu", "host": h} for h in hosts]
    if kind == "data parallel x2":
        plan["parallel"]["data_parallel"] = 2
    return plan


def cli(args, argv, remote=False):
    """loom-cli's JSON; remote: its ranks start on the simulated hosts through their agent."""
    extra = dict(OMPI_MCA_plm_rsh_agent=os.path.join(SCRIPTS, "netns-agent.sh"), LOOM_STREAM_HOST="10.213.1.1")
    return cli_json(args, *argv, extra_env=extra if remote else None)


def write(folder, name, obj):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def delay(build, us, on):
    """The one-way delay between the hosts (no netem here: a delay line on a tun)."""
    hosts = os.path.join(SCRIPTS, "netns-hosts.sh")
    if on and us > 0:
        binary = os.path.join(build, "bench", "link_delay")
        if not os.path.exists(binary):
            sys.exit(f"error: {binary} not found (cmake --build build --target link_delay)")
        subprocess.run([hosts, "delay", str(int(us)), binary], check=True)
    else:
        subprocess.run([hosts, "delay", "off"], check=True)


def shape(args, on):
    """A token bucket on the root side of each host's veth: what enters a host passes at
    rate, so a message from one host to the other crosses one shaped hop. Its burst, what
    passes at the veth's own speed after a pause, is 16 KB (eleven 1500-byte packets),
    whatever the rate: a wire sends every byte at its rate, and a burst of 1 ms at 1 Gb/s
    (125 KB) let a pipeline's 64 KB activations, sent less often than the rate allows, pass
    as if unshaped (1F1B measured 7.9 ms a step where 0.5 ms per message predicted 12). Its
    queue holds queue_ms at the rate (tbf's latency): a switch port's buffer. A deep one
    (200 ms) holds a rendezvous handshake or an ACK behind a whole message going the other
    way. With --delay-ms, each packet is first held that long by the delay line."""
    burst = 16000
    delay(args.build, 1000 * args.delay_ms, on)
    for h in HOSTS:
        dev = f"veth-{h}"
        subprocess.run(["tc", "qdisc", "del", "dev", dev, "root"], capture_output=True)
        if on:
            subprocess.run(["tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", args.rate, "burst", str(burst),
                            "latency", f"{args.queue_ms:g}ms"], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(ap, "predict_shaped.md")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--latency-us", type=float, default=50.0)
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay added between the hosts")
    ap.add_argument("--queue-ms", type=float, default=5.0,
                    help="the shaped link's queue, in ms at the rate (tbf latency; was 200 before 2026-11-28)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--cal-steps", type=int, default=120)
    args = parse_run_args(ap)
    folder = tempfile.mkdtemp(prefix="loom-shaped-")
    db = os.path.join(folder, "runs.db")
    gbs = {"gbit": 0.125, "mbit": 0.000125}[args.rate.lstrip("0123456789.")] * float(args.rate.rstrip("gmbit"))
    cluster = write(folder, "cluster.json", {
        "name": f"two hosts like this one, {args.rate} between them", "hosts": 2,
        "devices_per_host": 1, "device": "calibrated",
        "links": {"between_hosts": {"bandwidth_gbs": gbs, "latency_us": args.latency_us + 1000 * args.delay_ms}}})
    if subprocess.run([os.path.join(SCRIPTS, "netns-hosts.sh"), "up"]).returncode != 0:
        sys.exit("cannot create the simulated hosts (root, iproute2, network namespaces)")
    rows = []
    try:
        for kind in ("data parallel x2", "1F1B 2 stages"):
            local = write(folder, "local.json", plan_for(kind, ["localhost", "localhost"], args.cal_steps))
            calibration = cli(args, ["run", local, "--db", db, "--json"])["id"]
            remote = write(folder, "remote.json", plan_for(kind, HOSTS, args.steps))
            predicted = cli(args, ["predict", remote, "--db", db, "--cluster", cluster, "--json"])
            shape(args, True)
            steps = []
            for _ in range(args.rounds):
                run = cli(args, ["run", remote, "--db", db, "--json"], remote=True)
                steps.append(median_step_ms(args, db, run["id"], calibration))
            shape(args, False)
            steps.sort()
            rows.append((kind, predicted["step_ms"], steps[len(steps) // 2], steps[0], steps[-1], predicted["notes"]))
            print(rows[-1][:5], file=sys.stderr, flush=True)
    finally:
        shape(args, False)
        subprocess.run([os.path.join(SCRIPTS, "netns-hosts.sh"), "down"])
    lines = [f"Command: `{args.command}`", "",
             f"Two simulated hosts, one rank each, links shaped to {args.rate} (tc tbf, a {args.queue_ms:g} ms queue), "
             + (f"a one-way delay of {args.delay_ms:g} ms (build/bench/link_delay); the cluster file's latency "
                f"{args.latency_us + 1000 * args.delay_ms:g} us." if args.delay_ms > 0 else
                f"no delay added; the cluster file's latency {args.latency_us:g} us."), "",
             "| plan | predicted step, ms | measured median, ms (min-max over rounds) | error |", "|---|---|---|---|"]
    for kind, p, m, lo, hi, _ in rows:
        lines.append(f"| {kind} | {p:.2f} | {m:.2f} ({lo:.2f}-{hi:.2f}) | {100 * (p / m - 1):+.1f}% |")
    lines += [""] + [f"- {kind}: " + "; ".join(notes) for kind, *_, notes in rows if notes]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
