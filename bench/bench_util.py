"""Helpers shared by the benchmark scripts (pipeline_bench.py, async_bench.py): waiting
for a quiet machine, CPU accounting, and interval arithmetic over spans from the run store."""
import os
import resource
import shlex
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def add_run_args(ap, result_name):
    """The options every benchmark has: where loom-cli and the data are, the quiet-machine
    wait, the run store, and the report file bench/results/<result_name>."""
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--cli", help="loom-cli binary (default BUILD/app/loom-cli; loom-rank is found next to it, in "
                                  "the build tree, or via $LOOM_RANK)")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--quiet-wait", type=float, default=60,
                    help="seconds to wait, before each run, for other processes to leave the CPU (0: do not)")
    ap.add_argument("--db", help="run store to use (default: a temporary file)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", result_name))


def parse_run_args(ap):
    """Parses, records the command line for the report, finds loom-cli, checks --warmup."""
    args = ap.parse_args()
    args.command = "/usr/bin/python3 " + " ".join(shlex.quote(a) for a in sys.argv)
    args.cli = os.path.abspath(args.cli or os.path.join(args.build, "app", "loom-cli"))
    if not os.path.exists(args.cli):
        sys.exit(f"error: {args.cli} not found (cmake --build build --target loom-cli loom-rank)")
    if getattr(args, "warmup", 0) >= getattr(args, "steps", 1):
        sys.exit("error: --warmup must be below --steps")
    return args


def wait_for_quiet(args):
    """Up to --quiet-wait seconds until the machine is idle (< 0.25 cores busy over 1 s)
    before a run starts; what others use during the run is reported as `other CPU`."""
    deadline = time.monotonic() + args.quiet_wait
    while True:
        b0 = cpu_busy_s()
        time.sleep(1.0)
        busy = cpu_busy_s() - b0
        if busy < 0.25 or time.monotonic() >= deadline:
            return busy
        print(f"    machine busy ({busy:.2f} cores used by others), waiting ...", file=sys.stderr, flush=True)


def cpu_busy_s():
    """Non-idle CPU seconds of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    """CPU seconds of this script's finished descendants (loom-cli, mpirun, the ranks)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def overlap(a, b):
    """Length of the intersection of two interval lists (each merged first)."""
    a, b = union(a), union(b)
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def write_report(text, out):
    """Prints the report and writes it to `out` (none or "-": print only)."""
    print(text)
    if out and out != "-":
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(text)
        print(f"written to {out}", file=sys.stderr)


def cli_json(args, *argv, extra_env=None):
    """Runs `loom-cli ARGV` (as root where need be) and returns its last output line as
    JSON; exits the benchmark with loom-cli's error when it fails."""
    import json
    import subprocess
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", **(extra_env or {}))
    r = subprocess.run([args.cli, *argv], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"loom-cli {' '.join(argv)} failed: {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def median_step_ms(args, db, run_id, other_id):
    """A run's median steady step (ms) as `compare` gives it (which needs a second run)."""
    for m in cli_json(args, "compare", str(run_id), str(other_id), "--db", db, "--json")["metrics"]:
        if m["key"] == "step_time_median_ms":
            return m["values"][0]
    sys.exit("compare gave no step_time_median_ms")
