#!/usr/bin/env python3
"""Reliability of real runs when something goes wrong (issue 16), not a timed test.

Each trial starts `loom-cli run` on the 4-rank data-parallel example (steps raised so it
would run for minutes) into a fresh run store, waits until every rank trains (the run has
stored events), then does one thing to it:

  kill-rank   SIGKILL to a random rank.                 Expected: failed.
  stop-rank   SIGSTOP to a random rank (hang_timeout_s = --hang-limit).   Expected: hung.
  kill-host   SIGKILL to loom-cli itself.               Expected: interrupted on the next read.
  disk-full   the store on a 3 MiB tmpfs (root only).   Expected: failed, "disk is full".
  stop-server SIGSTOP to the parameter server of the 3-rank parameter-server example
              (hang_timeout_s = --hang-limit).             Expected: hung, the server named.
  stop-worker SIGSTOP to one of its two workers.         Expected: hung, that worker named.
  diverge     the 1-process MLP example, SGD at lr 1e6.   Expected: failed, "the loss
              diverged at step N", with every loss value up to then stored.

and measures, per trial:
  detection s  from the action until the store says the run ended (polled every 50 ms with
               sqlite3; for kill-host, until `loom-cli runs` reads it as interrupted, which
               it does on its first read once the owner is gone);
  orphans      processes of the job (mpirun and ranks, found below loom-cli before the
               action) still alive 10 s after the action (zombies are not alive);
  integrity    PRAGMA integrity_check of the store afterwards ("ok" or the first problem);
  status       the stored status, and whether it is the expected one.

The mutated-plan part of the issue's reliability bench is bench/plan_mutation.py.

  python3 bench/reliability.py [--kill-rank 20 --stop-rank 10 --kill-host 20 --disk-full 1]
"""
import argparse
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from bench_util import ROOT

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none")
EXPECTED = {"kill-rank": "failed", "stop-rank": "hung", "kill-host": "interrupted", "disk-full": "failed",
            "stop-server": "hung", "stop-worker": "hung", "diverge": "failed"}
PS_KINDS = ("stop-server", "stop-worker")
PS_RANKS, PS_WORKERS = 3, 2  # resources/plans/parameter_server_mlp.json: ranks 0-1 work, rank 2 serves


def proc_stat(pid):
    """(parent pid, state letter) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0]


def alive(pid):
    st = proc_stat(pid)
    return st is not None and st[1] != "Z"


def command(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def descendants(root):
    parent_of = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st and st[1] != "Z":
                parent_of[int(name)] = st[0]
    found, grew = {root}, True
    while grew:
        grew = False
        for pid, parent in parent_of.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    found.discard(root)
    return found


def rank_pids(job):
    return sorted(p for p in job if command(p).split(" ")[0].endswith("loom-rank"))


STEP_KIND = 13  # profiles/event.h EventKind::Step


def store_row(db):
    """(status, error, events stored, ranks that stored a step) of the store's only run, or
    None before it exists."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        row = con.execute("SELECT id, status, error FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        if not row:
            return None
        events = con.execute("SELECT COUNT(*) FROM events WHERE run_id = ?", (row[0],)).fetchone()[0]
        training = con.execute("SELECT COUNT(DISTINCT rank) FROM events WHERE run_id = ? AND kind = ?",
                               (row[0], STEP_KIND)).fetchone()[0]
        con.close()
        return row[1], row[2], events, training
    except sqlite3.Error:
        return None


def integrity(db):
    try:
        con = sqlite3.connect(db, timeout=5)
        result = con.execute("PRAGMA integrity_check").fetchone()[0]
        con.close()
        return result
    except sqlite3.Error as e:
        return f"error: {e}"


def rank_of(db, pid):
    """The rank number of a rank process, from the store's ranks table (None if unknown)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        row = con.execute("SELECT rank FROM ranks WHERE pid = ? ORDER BY run_id DESC LIMIT 1", (pid,)).fetchone()
        con.close()
        return row[0] if row else None
    except sqlite3.Error:
        return None


def write_plan(path, ranks, steps, hang_limit, kind=""):
    example = "parameter_server_mlp.json" if kind in PS_KINDS else "dp4_mlp_fashion.json"
    with open(os.path.join(ROOT, "resources", "plans", example)) as f:
        plan = json.load(f)
    plan["training"]["steps"] = steps
    plan["training"]["hang_timeout_s"] = hang_limit
    if kind not in PS_KINDS:
        plan["parallel"]["devices"] = plan["parallel"]["devices"][:ranks]
        plan["parallel"]["data_parallel"] = ranks
    with open(path, "w") as f:
        json.dump(plan, f)


def start(args, plan, db, ranks, stepping):
    """loom-cli running `plan`, and its job once `stepping` of its `ranks` ranks train
    (store steps; a parameter server does not), or None if they never did."""
    cli = subprocess.Popen([args.cli, "run", plan, "--db", db], env=ENV, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and cli.poll() is None:
        time.sleep(0.2)
        job = descendants(cli.pid)
        row = store_row(db)
        if len(rank_pids(job)) == ranks and row and row[3] == stepping:
            return cli, job
    return cli, None


def pick_target(kind, db, job):
    """The rank process to act on, and its rank: the server, a random worker, or any rank."""
    pids = rank_pids(job)
    if kind == "stop-server":
        pids = [p for p in pids if rank_of(db, p) == PS_WORKERS]
    elif kind == "stop-worker":
        pids = [p for p in pids if rank_of(db, p) in range(PS_WORKERS)]
    target = random.choice(pids) if pids else None
    return target, (rank_of(db, target) if target else None)


def diverge_trial(args, workdir, index):
    """The MLP example with SGD at a learning rate of 1e6, to its end: the run fails saying where the
    loss diverged, and every loss value up to then is stored."""
    db = os.path.join(workdir, f"diverge-{index}.db")
    plan_path = os.path.join(workdir, f"diverge-{index}.json")
    with open(os.path.join(ROOT, "resources", "plans", "mlp_fashion.json")) as f:
        plan = json.load(f)
    plan["training"]["optimizer"] = {"type": "sgd", "lr": 1e6}  # Adam's steps are bounded: it would not diverge
    with open(plan_path, "w") as f:
        json.dump(plan, f)
    t0 = time.monotonic()
    done = subprocess.run([args.cli, "run", plan_path, "--db", db], env=ENV, capture_output=True, text=True)
    row = store_row(db)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    losses = con.execute("SELECT COUNT(*) FROM metrics WHERE name = 'loss'").fetchone()[0]
    con.close()
    error = row[1] if row else ""
    return {"kind": "diverge", "detection_s": time.monotonic() - t0, "orphans": 0, "integrity": integrity(db),
            "status": row[0] if row else "?", "error": (error or "")[:240], "events": row[2] if row else 0,
            "exit": done.returncode, "losses_kept": losses, "named_right": "diverged at step" in (error or "")}


def wait_status(db, away_from="running", limit_s=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        row = store_row(db)
        if row and row[0] != away_from:
            return time.monotonic() - t0, row
        time.sleep(0.05)
    return None, store_row(db)


def orphans_after(job, acted_at, wait_s=10):
    while time.monotonic() - acted_at < wait_s:
        time.sleep(0.2)
    left = [p for p in job if alive(p)]
    for p in left:  # leave nothing behind for the next trial
        try:
            os.kill(p, signal.SIGCONT)
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return left


def trial(args, kind, workdir, index):
    db_dir = os.path.join(workdir, f"{kind}-{index}")
    os.makedirs(db_dir)
    mounted = False
    if kind == "disk-full":
        mounted = subprocess.call(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", db_dir]) == 0
        if not mounted:
            return {"kind": kind, "skipped": "cannot mount a tmpfs here"}
    db = os.path.join(db_dir, "runs.db")
    plan = os.path.join(workdir, f"{kind}-{index}.json")
    stops = kind == "stop-rank" or kind in PS_KINDS
    write_plan(plan, args.ranks, 200000, args.hang_limit if stops else 0, kind)
    ranks, stepping = (PS_RANKS, PS_WORKERS) if kind in PS_KINDS else (args.ranks, args.ranks)
    cli, job = start(args, plan, db, ranks, stepping)
    if job is None and kind != "disk-full":
        cli.kill()
        return {"kind": kind, "skipped": "the ranks never trained: " + cli.stderr.read().decode()[-300:]}
    target, target_rank = pick_target(kind, db, job) if job else (None, None)
    acted_at = time.monotonic()
    if kind == "kill-rank":
        os.kill(target, signal.SIGKILL)
    elif stops:
        os.kill(target, signal.SIGSTOP)
    elif kind == "kill-host":
        os.kill(cli.pid, signal.SIGKILL)
    if kind == "kill-host":
        cli.wait()
        left = orphans_after(job, acted_at)
        listed = subprocess.run([args.cli, "runs", "--db", db, "--json"], env=ENV, capture_output=True, text=True)
        detection = None  # the owner's death is seen by the first reader after it
        runs = json.loads(listed.stdout or "[]")
        row = (runs[0]["status"], runs[0].get("error", ""), store_row(db)[2]) if runs else store_row(db)
    else:
        detection, row = wait_status(db)
        left = orphans_after(job or set(), acted_at)
        try:
            cli.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cli.kill()
        row = store_row(db) or row  # the final error, completed once mpirun has ended
    result = {"kind": kind, "detection_s": detection, "orphans": len(left), "integrity": integrity(db),
              "status": row[0] if row else "?", "error": (row[1] if row else "")[:240],
              "events": row[2] if row else 0, "exit": cli.returncode, "target_rank": target_rank}
    if (kind in ("kill-rank", "stop-rank") or kind in PS_KINDS) and target_rank is not None:
        result["named_right"] = result["error"].startswith(f"rank {target_rank} ")
    if mounted:
        subprocess.call(["umount", db_dir])
    return result


def summarise(kind, results):
    done = [r for r in results if "skipped" not in r]
    if not done:
        return f"| {kind} | 0 | skipped: {results[0]['skipped'] if results else 'not run'} | | | | | |"
    times = [r["detection_s"] for r in done if r["detection_s"] is not None]
    expected = sum(r["status"] == EXPECTED[kind] for r in done)
    time_text = (f"{statistics.median(times):.2f} ({min(times):.2f}-{max(times):.2f})" if times
                 else "first read after the owner died")
    ok = sum(r["integrity"] == "ok" for r in done)
    named = [r["named_right"] for r in done if "named_right" in r]
    named_text = f"{sum(named)}/{len(named)}" if named else "-"
    return (f"| {kind} | {len(done)} | {expected}/{len(done)} {EXPECTED[kind]} | {named_text} | {time_text} | "
            f"{sum(r['orphans'] for r in done)} | {ok}/{len(done)} ok | "
            f"{statistics.median(r['events'] for r in done):.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "loom-cli"))
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--kill-rank", type=int, default=20)
    ap.add_argument("--stop-rank", type=int, default=10)
    ap.add_argument("--kill-host", type=int, default=20)
    ap.add_argument("--disk-full", type=int, default=1)
    ap.add_argument("--stop-server", type=int, default=5)
    ap.add_argument("--stop-worker", type=int, default=5)
    ap.add_argument("--diverge", type=int, default=1)
    ap.add_argument("--hang-limit", type=float, default=5.0, help="the stop-rank plans' hang_timeout_s")
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "reliability.md"))
    args = ap.parse_args()
    random.seed(args.seed)
    started = time.time()
    results = {k: [] for k in EXPECTED}
    with tempfile.TemporaryDirectory() as workdir:
        for kind, count in (("kill-rank", args.kill_rank), ("stop-rank", args.stop_rank),
                            ("kill-host", args.kill_host), ("disk-full", args.disk_full),
                            ("stop-server", args.stop_server), ("stop-worker", args.stop_worker),
                            ("diverge", args.diverge)):
            for i in range(count):
                r = diverge_trial(args, workdir, i) if kind == "diverge" else trial(args, kind, workdir, i)
                results[kind].append(r)
                print(json.dumps(r), flush=True)
    lines = [
        "# Reliability bench", "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}; machine: {os.cpu_count()} cores; "
        f"whole script {time.time() - started:.0f} s",
        f"- command: `python3 bench/reliability.py --ranks {args.ranks} --kill-rank {args.kill_rank} --stop-rank "
        f"{args.stop_rank} --kill-host {args.kill_host} --disk-full {args.disk_full} --stop-server "
        f"{args.stop_server} --stop-worker {args.stop_worker} --diverge {args.diverge} --hang-limit {args.hang_limit}`",
        f"- plan: resources/plans/dp4_mlp_fashion.json on {args.ranks} ranks, 200,000 steps (minutes unless ended); "
        "stop-server and stop-worker: resources/plans/parameter_server_mlp.json (2 workers, 1 server), 200,000 steps; "
        "diverge: resources/plans/mlp_fashion.json with SGD at lr 1e6 (detection: the whole run; right rank named: the "
        "error says where the loss diverged; its loss values kept: see the trial's `losses_kept`)",
        "- detection: action to the stored end of the run (median, min-max); orphans: job processes alive 10 s "
        "after the action, over all trials; integrity: PRAGMA integrity_check; events: stored, median; right rank "
        "named: the error starts with the rank that was killed or stopped", "",
        "| action | trials | stored status | right rank named | detection s | orphans | integrity | events |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [summarise(k, results[k]) for k in EXPECTED]
    unexpected = [r for k in EXPECTED for r in results[k] if "skipped" not in r and r["status"] != EXPECTED[k]]
    if unexpected:
        lines += ["", "Trials that ended otherwise:", ""] + [f"- `{json.dumps(r)}`" for r in unexpected]
    examples = {k: next((r["error"] for r in results[k] if r.get("error")), "") for k in EXPECTED}
    lines += ["", "What the user reads (one trial each):", ""] + [f"- {k}: {e}" for k, e in examples.items() if e]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    sys.exit(main())
