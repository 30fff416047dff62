#!/usr/bin/python3
"""Predicted against measured across a shaped network: two or three simulated hosts
(scripts/cluster/netns-hosts.sh: network namespaces loom-a, loom-b and loom-c, one rank
each; --hosts), the links between them emulated (--rate, --queue-ms and --delay-ms; this kernel has no
netem: build/bench/link_emulator on a tun device the hosts' packets are routed through,
see shape()), and a cluster file that says the same (as many hosts like this one, the link's
bandwidth, and its latency: --latency-us plus the delay; --latency-us stands for the veth
hop and the TCP stack: a TCP ping-pong between the hosts takes 0.034-0.051 ms there and
back unshaped).

  0. once, a 5-step run across the shaped hosts: its set-up measures their link (clock
     alignment and bandwidth probe), which calibration then holds (host_links.h);
  1. calibration: the same plans with both ranks on this host (localhost), --cal-steps,
     so that every layer, loss, optimizer and residual cost at 1 BLAS thread is measured;
  2. prediction, twice: `loom-cli predict PLAN --cluster` with the shaped link written
     down, and `loom-cli predict PLAN` alone, which takes the link the runs across the
     hosts so far measured (step 0's, then also the earlier plans' measured runs');
  3. measurement: the plan across the shaped hosts, --rounds times, median step.
Plans: as many data-parallel replicas as hosts (an all-reduce a step over the links;
once with the default bucket, once with 0.1 MB buckets: four all-reduces a step, not two)
and a 1F1B pipeline of as many stages (activations and gradients over the links per
micro-batch). The simulated hosts share this machine's cores: three ranks on two cores
are crowded here and in the calibrating runs on this host alike. The cluster file says so
("shared_cores": this machine's cores), and the learnt prediction knows it from the runs
across the hosts, whose ranks all named this machine's kernel (host_links.h); where there
are more hosts than cores, `loom-cli calibrate` also runs each plan's uncrowded layouts. Root only (network namespaces, tc).
Writes the table to --out.

--slow-host HOST --slow-rate RATE [--slow-delay-ms D]: that host's port is slower (every
packet to or from it at RATE, D ms; the emulator's LOOM_LINK_PORTS), so its links differ
from the others'. A cluster file has one link for every pair, so the written-down column
then takes the median of the pairs' links (what the learnt prediction did before each
pair was learnt, 2026-11-30); the learnt column takes each pair's own.

  /usr/bin/python3 bench/predict_shaped.py [--hosts 2|3] [--rate 1gbit] [--delay-ms 2]
      [--queue-ms 5] [--shaper emulator|tbf] [--latency-us 50] [--rounds 3]
      [--slow-host loom-c --slow-rate 100mbit [--slow-delay-ms 2]]
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
ALL_HOSTS = ["loom-a", "loom-b", "loom-c"]


def kinds(n):
    return (f"data parallel x{n}", f"1F1B {n} stages", f"data parallel x{n}, 0.1 MB buckets")


def plan_for(kind, hosts, steps):
    """The MLPs of the examples on one rank a host, 1 BLAS thread each: data parallel, 64
    samples a replica; 1F1B, the 784-256-448-256-10 MLP, on three stages fc1, fc2 and the
    rest. The small buckets make four all-reduces a step (5.7 KB, 131 KB, 1 KB, 803 KB),
    not two: more latency."""
    data_parallel = kind.startswith("data parallel")
    source = "dp4_mlp_fashion" if data_parallel else "onefoneb_mlp"
    with open(os.path.join(ROOT, "resources", "plans", source + ".json")) as f:
        plan = json.load(f)
    n = len(hosts)
    plan["name"] = f"shaped-{kinds(n).index(kind)}-{n}-{hosts[0]}"
    plan["training"].update(steps=steps, epochs=1, eval_every=0, threads=1)
    plan["parallel"]["devices"] = [{"kind": "cpu", "host": h} for h in hosts]
    if data_parallel:
        plan["parallel"]["data_parallel"] = n
        plan["training"]["batch"] = 64 * n
    elif n == 3:  # flatten, fc1, relu | fc2, relu | fc3, relu, classifier
        plan["parallel"]["stages"] = 3
        for layer, stage in zip(plan["model"]["layers"], (0, 0, 0, 1, 1, 2, 2, 2)):
            layer["stage"] = stage
    if kind.endswith("buckets"):
        plan["parallel"]["bucket_mb"] = 0.1
    return plan


def cli(args, argv, remote=False):
    """loom-cli's JSON; remote: its ranks start on the simulated hosts through their agent.
    Where the hosts' ranks outnumber this machine's cores, Loom's launcher knows that they
    crowd its cores (the hosts are its network namespaces) and has waiting ranks yield the
    core: spinning, three ranks on two cores took 36-39 ms a step for data parallel x3 at
    1 Gb/s and 0.5 ms, yielding 25-28 (2026-11-29)."""
    extra = dict(OMPI_MCA_plm_rsh_agent=os.path.join(SCRIPTS, "netns-agent.sh"), LOOM_STREAM_HOST="10.213.1.1")
    return cli_json(args, *argv, extra_env=extra if remote else None)


def write(folder, name, obj):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(obj, f)
    return path


def rate_mbit(rate):
    """'1gbit' -> 1000.0, '100mbit' -> 100.0."""
    return {"gbit": 1000.0, "mbit": 1.0}[rate.lstrip("0123456789.")] * float(rate.rstrip("gmbit"))


def slow_delay_ms(args):
    return args.delay_ms if args.slow_delay_ms is None else args.slow_delay_ms


def written_link(args, hosts):
    """The one link a cluster file gives every pair: the shaped link, or with a slow host
    the median over the pairs of the hosts' links (latency, bandwidth apart)."""
    def link(rate, delay_ms):
        # What a message's bytes get of the wire: TCP's 1448 bytes of payload a frame
        # (with timestamps) in the 1514 bytes the emulator (and tc) count per frame.
        return rate_mbit(rate) / 8000 * 1448 / 1514, args.latency_us + 1000 * delay_ms
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1:]]
    links = [link(args.slow_rate, slow_delay_ms(args)) if args.slow_host in (a, b) else link(args.rate, args.delay_ms)
             for a, b in pairs]
    median = lambda values: sorted(values)[len(values) // 2]  # noqa: E731
    return median([g for g, _ in links]), median([u for _, u in links])


def shape(args, on):
    """The link between the hosts, each way. --shaper emulator (the default): the link
    emulator (build/bench/link_emulator through scripts/cluster/netns-hosts.sh link): a
    FIFO queue of --queue-ms at the rate (a switch port's buffer), each packet's frames
    sent at --rate, then --delay-ms to arrive. --shaper tbf: a token bucket on the root side
    of each host's veth (16 KB burst, the same queue), as this bench used before
    2026-11-28, and the emulator for the delay alone.

    Why the emulator: with no delay tbf and the emulator carry the runs alike, but with a
    delay tbf carried a bidirectional exchange (each host sending 1 MB to the other at
    once, 1 Gb/s and 2 ms) in 16-17 ms where latency + size / bandwidth says 10.1 and a
    one-way transfer took its time; predictions of the runs were 6-38% low at 0.5 to
    2 ms. An htb class over a FIFO took 10.3-11.2 ms there, but htb takes TCP's 64 KB
    segmentation-offload packets whole: one passes at once after a pause, so 1F1B's 64 KB
    activations crossed 100 Mb/s faster than the rate (57 ms a step against 64 through
    tbf), and a queue shorter than one packet dropped them all. The emulator charges each
    such packet for every frame it stands for. The burst is none: a wire sends every byte at
    its rate (a 1 ms burst at 1 Gb/s, 125 KB, let the activations pass unshaped)."""
    hosts = os.path.join(SCRIPTS, "netns-hosts.sh")
    binary = os.path.join(args.build, "bench", "link_emulator")
    for h in ALL_HOSTS:
        subprocess.run(["tc", "qdisc", "del", "dev", f"veth-{h}", "root"], capture_output=True)
    subprocess.run([hosts, "link", "off"], check=True)
    if not on:
        return
    if not os.path.exists(binary):
        sys.exit(f"error: {binary} not found (cmake --build build --target link_emulator)")
    delay_us = str(int(1000 * args.delay_ms))
    if args.shaper == "emulator":
        env = dict(os.environ)
        if args.slow_host:
            address = f"10.213.{ALL_HOSTS.index(args.slow_host) + 1}.2"
            env["LOOM_LINK_PORTS"] = f"{address}={int(1000 * slow_delay_ms(args))}:{rate_mbit(args.slow_rate):g}"
        subprocess.run([hosts, "link", binary, delay_us, f"{rate_mbit(args.rate):g}", str(int(1000 * args.queue_ms))],
                       check=True, env=env)
        return
    for h in ALL_HOSTS:
        subprocess.run(["tc", "qdisc", "add", "dev", f"veth-{h}", "root", "tbf", "rate", args.rate, "burst", "16000",
                        "latency", f"{args.queue_ms:g}ms"], check=True)
    if args.delay_ms > 0:
        subprocess.run([hosts, "link", binary, delay_us], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_args(ap, "predict_shaped.md")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--latency-us", type=float, default=50.0)
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay added between the hosts")
    ap.add_argument("--shaper", choices=["emulator", "tbf"], default="emulator", help="how the rate is set (see shape())")
    ap.add_argument("--queue-ms", type=float, default=5.0,
                    help="the link's queue, in ms at the rate (was 200 before 2026-11-28)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hosts", type=int, choices=[2, 3], default=2, help="simulated hosts, one rank each")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--cal-steps", type=int, default=120)
    ap.add_argument("--slow-host", choices=ALL_HOSTS, help="a host whose port is slower than the rest")
    ap.add_argument("--slow-rate", default="100mbit")
    ap.add_argument("--slow-delay-ms", type=float, help="its one-way delay (default: --delay-ms)")
    args = parse_run_args(ap)
    if args.slow_host and (args.shaper != "emulator" or args.slow_host not in ALL_HOSTS[:args.hosts]):
        sys.exit("error: --slow-host needs the emulator and one of the hosts in use")
    folder = tempfile.mkdtemp(prefix="loom-shaped-")
    db = os.path.join(folder, "runs.db")
    gbs, latency_us = written_link(args, ALL_HOSTS[:args.hosts])
    cluster = write(folder, "cluster.json", {
        "name": f"{args.hosts} hosts like this one, {args.rate} between them", "hosts": args.hosts,
        "devices_per_host": 1, "device": "calibrated", "shared_cores": len(os.sched_getaffinity(0)),
        "links": {"between_hosts": {"bandwidth_gbs": gbs, "latency_us": latency_us}}})
    if subprocess.run([os.path.join(SCRIPTS, "netns-hosts.sh"), "up"]).returncode != 0:
        sys.exit("cannot create the simulated hosts (root, iproute2, network namespaces)")
    rows = []
    try:
        shape(args, True)
        hosts = ALL_HOSTS[:args.hosts]
        probe = write(folder, "probe.json", plan_for(kinds(args.hosts)[0], hosts, 5))
        cli(args, ["run", probe, "--db", db, "--json"], remote=True)
        shape(args, False)
        for kind in kinds(args.hosts):
            local = write(folder, "local.json", plan_for(kind, ["localhost"] * args.hosts, args.cal_steps))
            calibration = cli(args, ["run", local, "--db", db, "--json"])["id"]
            if args.hosts > os.cpu_count():  # crowded here: the hosts' own costs come from calibrate's layouts
                cli(args, ["calibrate", local, "--steps", str(args.cal_steps), "--db", db, "--json"])
            remote = write(folder, "remote.json", plan_for(kind, hosts, args.steps))
            predicted = cli(args, ["predict", remote, "--db", db, "--cluster", cluster, "--json"])
            learnt = cli(args, ["predict", remote, "--db", db, "--json"])
            shape(args, True)
            steps = []
            for _ in range(args.rounds):
                run = cli(args, ["run", remote, "--db", db, "--json"], remote=True)
                steps.append(median_step_ms(args, db, run["id"], calibration))
            shape(args, False)
            steps.sort()
            rows.append((kind, predicted["step_ms"], learnt["step_ms"], steps[len(steps) // 2], steps[0], steps[-1],
                         predicted["notes"] + [n for n in learnt["notes"] if n.startswith("ranks on ")]))
            print(rows[-1][:6], file=sys.stderr, flush=True)
    finally:
        shape(args, False)
        subprocess.run([os.path.join(SCRIPTS, "netns-hosts.sh"), "down"])
    lines = [f"Command: `{args.command}`", "",
             f"{args.hosts} simulated hosts, one rank each, links shaped to {args.rate} "
             + (f"(link emulator, a {args.queue_ms:g} ms queue), " if args.shaper == "emulator" else
                f"(tc tbf, a {args.queue_ms:g} ms queue), ")
             + (f"a one-way delay of {args.delay_ms:g} ms" if args.delay_ms > 0 else "no delay added")
             + (f"; {args.slow_host}'s port {args.slow_rate}, {slow_delay_ms(args):g} ms (every packet to or from it)"
                if args.slow_host else "")
             + f"; the cluster file's link {latency_us:g} us and {gbs:.4g} GB/s"
             + (" (the median over the pairs)." if args.slow_host else "."), "",
             "| plan | predicted step, link written down, ms | error | predicted step, link learnt, ms | error "
             "| measured median, ms (min-max over rounds) |", "|---|---|---|---|---|---|"]
    for kind, p, q, m, lo, hi, _ in rows:
        lines.append(f"| {kind} | {p:.2f} | {100 * (p / m - 1):+.1f}% | {q:.2f} | {100 * (q / m - 1):+.1f}% "
                     f"| {m:.2f} ({lo:.2f}-{hi:.2f}) |")
    lines += [""] + [f"- {kind}: " + "; ".join(notes) for kind, *_, notes in rows if notes]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
