#!/usr/bin/env python3
"""Mutated plans against `loom-cli validate` (issue 16's reliability bench, plan part).

Each input is one of the example plans (resources/plans/*.json) with 1-3 random
mutations, chosen to hit what once crashed validation: a number replaced by an extreme
value (0, -1, 2^31-1, 2^31, 2^53, 2^63-1, 1e308, NaN-like strings), a value replaced by
another JSON type, a key deleted or duplicated into a sibling, a list truncated or
repeated, a layer's parallel block nested deeper, or the text cut at a random byte. Every
input is validated by a fresh `loom-cli validate` process under an address-space limit
(--memory-mib, default 1024) and a time limit (--timeout, default 20 s).

Counted per input: the exit code (0 valid, 2 refused with errors, anything else is a
failure of Loom: a crash, an abort, or 1), the time, and whether a refusal names a JSON
path. Printed: a table of outcomes, the slowest inputs, and every failing input is kept
in --keep (default bench/results/plan_mutation_failures/) to become a regression test.

  python3 bench/plan_mutation.py [--count 10000] [--seed 16]
"""
import argparse
import copy
import glob
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTREMES = [0, -1, 1, 2**31 - 1, 2**31, -2**31, 2**53, 2**63 - 1, -2**63, 10**308, 1e-308, 0.5, -0.5, 1e30]
OTHER_TYPES = [None, True, "x", "", [], {}, [1, 2], {"a": 1}]


def paths(value, prefix=()):
    """Every (path, value) in a JSON document, depth first."""
    yield prefix, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, prefix + (i,))


def get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def put(doc, path, value):
    if not path:
        return value
    get(doc, path[:-1])[path[-1]] = value
    return doc


def mutate_once(doc, rng):
    found = list(paths(doc))
    path, value = rng.choice(found)
    kind = rng.random()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and kind < 0.6:
        return put(doc, path, rng.choice(EXTREMES))
    if kind < 0.7 and path:
        return put(doc, path, copy.deepcopy(rng.choice(OTHER_TYPES)))
    if kind < 0.8 and path and isinstance(get(doc, path[:-1]), dict):
        del get(doc, path[:-1])[path[-1]]
        return doc
    if kind < 0.9 and isinstance(value, list) and value:
        return put(doc, path, value * rng.choice([0, 2, 50]) if rng.random() < 0.5 else value[: rng.randrange(len(value))])
    if isinstance(value, dict) and value.get("type") == "parallel":
        # One more level of parallel blocks around this one, several times.
        nested = value
        for _ in range(rng.choice([1, 8, 40])):
            nested = {"type": "parallel", "branches": [{"layers": [nested]}]}
        return put(doc, path, nested)
    if isinstance(value, dict) and value.get("type") and rng.random() < 0.5:
        return put(doc, path, {**value, "stage": rng.choice(EXTREMES)})
    return doc


def make_input(plans, rng):
    name, doc = rng.choice(plans)
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        doc = mutate_once(doc, rng)
    text = json.dumps(doc)
    if rng.random() < 0.05:
        text = text[: rng.randrange(max(1, len(text)))]  # cut anywhere
    return name, text


def limit_memory(mib):
    def apply():
        limit = mib * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "loom-cli"))
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--memory-mib", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--keep", default=os.path.join(ROOT, "bench", "results", "plan_mutation_failures"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "plan_mutation.md"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    plans = [(os.path.basename(p), json.load(open(p))) for p in sorted(glob.glob(os.path.join(ROOT, "resources", "plans", "*.json")))]
    outcomes, times, slowest, failures, unnamed = {}, [], [], [], 0
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mutated.json")
        for i in range(args.count):
            name, text = make_input(plans, rng)
            with open(path, "w") as f:
                f.write(text)
            t0 = time.monotonic()
            try:
                proc = subprocess.run([args.cli, "validate", path], capture_output=True, text=True,
                                      timeout=args.timeout, preexec_fn=limit_memory(args.memory_mib))
                code = proc.returncode
                err = proc.stderr
            except subprocess.TimeoutExpired:
                code, err = "timeout", ""
            seconds = time.monotonic() - t0
            times.append(seconds)
            slowest = sorted(slowest + [(seconds, name, i)], reverse=True)[:5]
            key = {0: "0 valid", 2: "2 refused"}.get(code, f"{code} FAILURE")
            outcomes[key] = outcomes.get(key, 0) + 1
            if code == 2 and ": /" not in err and "(document)" not in err:
                unnamed += 1
            if code not in (0, 2):
                os.makedirs(args.keep, exist_ok=True)
                kept = os.path.join(args.keep, f"input-{i}-{name}")
                with open(kept, "w") as f:
                    f.write(text)
                failures.append((i, name, code, err.strip()[-300:], kept))
    lines = ["# Mutated plans against loom-cli validate", "",
             f"- date: {time.strftime('%Y-%m-%d %H:%M', time.localtime(started))}; {os.cpu_count()} cores; "
             f"whole script {time.time() - started:.0f} s",
             f"- command: `python3 bench/plan_mutation.py --count {args.count} --seed {args.seed} --memory-mib "
             f"{args.memory_mib} --timeout {args.timeout:g}`",
             f"- inputs: the {len(plans)} example plans, 1-3 mutations each (extreme numbers, other JSON types, "
             "deleted keys, truncated or repeated lists, parallel blocks nested up to 40 deeper, extreme "
             "stages, 5% cut at a random byte); each validated by its own process under the limits above", "",
             "| outcome | inputs |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(outcomes.items())]
    lines += ["", f"- refusals that named no JSON path: {unnamed}",
              f"- time per input: median {statistics.median(times) * 1e3:.0f} ms, max {max(times) * 1e3:.0f} ms",
              "- slowest: " + ", ".join(f"#{i} {n} {s * 1e3:.0f} ms" for s, n, i in slowest)]
    if failures:
        lines += ["", "Failures (kept for regression tests):", ""]
        lines += [f"- #{i} from {n}: exit {c}: `{e}` ({k})" for i, n, c, e, k in failures]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
