"""Replays a pipeline step with free communication, to split a measured bubble into its causes.

Schedule theory assumes uniform stages (every forward takes tF, every backward tB, on every
stage) and free communication. A measured bubble above it has three possible sources, and
replaying the step with the stages' own op durations tells them apart:

  theory                       uniform op times, free communication
  replay, stage means          each stage's mean forward / backward time: what the stages'
                               imbalance alone costs (GPipe multiplies it by m: the slower
                               stage paces every micro-batch of a phase)
  replay, op times as traced   every op's traced duration, step by step: imbalance plus the
                               jitter of individual ops (a late op delays its successors)
  measured                     the run itself: the rest is communication (transfer copies,
                               waiting for a message) and untraced bookkeeping

The replay takes each stage's ops in the order the rank ran them (read from the trace, so it
follows whatever the schedule did) and starts each op as soon as its stage is free and its
input exists: a forward needs the previous stage's forward of the same micro-batch, a
backward the next stage's backward of it. As in the engine, every stage waits for the last
backward of all stages before its optimizer step (the step's closing meeting). Bubble and
its convention are loom-cli's: window minus busy per stage, over the window (GPipe) or over
busy (1F1B), summed over the counted steps, mean over stages.
"""
import statistics

FORWARD_KINDS = (0, 3, 14)  # Forward, DataLoad, Loss: the work of a micro-batch's forward op
BACKWARD_KIND = 1
OPTIMIZER_KIND = 2
COMPUTE_STREAM = 0


def traced_ops(db, run_id, rank, step):
    """([(phase, microbatch, busy_ns)] in execution order, optimizer_ns) of one rank's step."""
    rows = db.execute("SELECT kind, microbatch, start_ns, end_ns FROM events WHERE run_id=? AND rank=? AND step=? "
                      "AND stream=? AND kind IN (0, 1, 2, 3, 14) ORDER BY start_ns",
                      (run_id, rank, step, COMPUTE_STREAM)).fetchall()
    order, busy, optimizer = [], {}, 0
    for kind, microbatch, start, end in rows:
        if kind == OPTIMIZER_KIND:
            optimizer += end - start
            continue
        key = ("F" if kind in FORWARD_KINDS else "B", microbatch)
        if key not in busy:
            order.append(key)
            busy[key] = 0
        busy[key] += end - start
    return [(phase, mb, busy[(phase, mb)]) for phase, mb in order], optimizer


def replay(stage_ops, optimizer_ns):
    """Window and busy (ns) per stage of one step replayed with free communication.
    stage_ops[s] = [(phase, microbatch, duration)] in stage s's order."""
    p = len(stage_ops)
    done = {}  # (stage, phase, microbatch) -> end time
    clock, next_op = [0] * p, [0] * p
    remaining = sum(len(ops) for ops in stage_ops)
    while remaining:
        progressed = False
        for s in range(p):
            while next_op[s] < len(stage_ops[s]):
                phase, mb, duration = stage_ops[s][next_op[s]]
                source = (s - 1 if phase == "F" else s + 1, phase, mb)
                needs_input = 0 <= source[0] < p
                if needs_input and source not in done:
                    break
                start = max(clock[s], done[source] if needs_input else 0)
                clock[s] = done[(s, phase, mb)] = start + duration
                next_op[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise ValueError("the traced op order deadlocks: not a linear pipeline")
    window = max(clock) + optimizer_ns
    return [(window, sum(d for _, _, d in ops) + optimizer_ns) for ops in stage_ops]


def bubble_fraction(per_stage_totals, schedule):
    """Mean over stages of bubble/busy (1F1B) or bubble/window (GPipe), from (window, busy) sums."""
    fractions = []
    for window, busy in per_stage_totals:
        bubble = window - busy
        fractions.append(bubble / busy if schedule == "1f1b" else bubble / window)
    return statistics.mean(fractions)


def stage_means(pooled):
    """Per stage, {phase: mean op duration} over every counted step."""
    return [{ph: statistics.mean(d for p_, _, d in ops if p_ == ph) for ph in ("F", "B")} for ops in pooled]


def explain_run(db, run_id, ranks, first_step, schedule):
    """Replayed bubble fractions of a one-replica pipeline run (rank r = stage r) over steps >=
    first_step: {'stage_means', 'as_traced', 'imbalance_F', 'imbalance_B'}."""
    steps = [s for (s,) in db.execute("SELECT DISTINCT step FROM events WHERE run_id=? AND kind=13 AND step>=? "
                                      "ORDER BY step", (run_id, first_step))]
    traced = [[0, 0] for _ in ranks]
    pooled = [[] for _ in ranks]  # every counted step's ops, per stage
    orders, optimizers = None, []
    for step in steps:
        per_stage = [traced_ops(db, run_id, r, step) for r in ranks]
        ops = [o for o, _ in per_stage]
        orders = orders or ops
        optimizers.append(statistics.mean(opt for _, opt in per_stage))
        for s, (window, busy) in enumerate(replay(ops, optimizers[-1])):
            traced[s][0] += window
            traced[s][1] += busy
        for s, o in enumerate(ops):
            pooled[s] += o
    means = stage_means(pooled)
    averaged = [[(ph, mb, means[s][ph]) for ph, mb, _ in ops] for s, ops in enumerate(orders)]
    per_step = replay(averaged, statistics.mean(optimizers))
    return {"as_traced": bubble_fraction(traced, schedule), "stage_means": bubble_fraction(per_step, schedule),
            "imbalance_F": imbalance(means, "F"), "imbalance_B": imbalance(means, "B")}


def imbalance(means, phase):
    """Slowest stage's mean op time for a phase over the fastest's, minus one."""
    times = [m[phase] for m in means]
    return max(times) / min(times) - 1


def self_check():
    """Uniform ops must replay to exactly the schedule theory (the replay's own test)."""
    for p, m in ((2, 1), (2, 8), (3, 4), (4, 8)):
        gpipe = [[("F", i, 1.0) for i in range(m)] + [("B", i, 2.0) for i in reversed(range(m))] for _ in range(p)]
        got = bubble_fraction(replay(gpipe, 0), "gpipe")
        assert abs(got - (p - 1) / (m + p - 1)) < 1e-12, (p, m, got)
        one_f_one_b = []
        for s in range(p):
            warm = min(p - s, m)
            ops = [("F", i, 1.0) for i in range(warm)]
            for i in range(m - warm):
                ops += [("B", i, 2.0), ("F", warm + i, 1.0)]
            ops += [("B", i, 2.0) for i in range(m - warm, m)]
            one_f_one_b.append(ops)
        got = bubble_fraction(replay(one_f_one_b, 0), "1f1b")
        assert abs(got - (p - 1) / m) < 1e-12, (p, m, got)
