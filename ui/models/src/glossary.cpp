// The glossary table (glossary.h). Texts describe what Loom does, not textbook variants:
// e.g. buckets start their all-reduce during the backward pass (launcher/engine
// gradient_sync), SSP's bound is in steps ("clocks") of the slowest worker.
#include "loom/ui/glossary.h"

#include <QCoreApplication>

namespace loom::ui {

namespace {

QString tr(const char* text) { return QCoreApplication::translate("Glossary", text); }

std::vector<Term> build() {
  return {
      {"data_parallel", tr("Data parallel"),
       tr("Every replica holds the whole model (or the whole pipeline stage) and trains on its own slice of each "
          "global batch. After the backward pass the replicas average their gradients with an all-reduce, so all of "
          "them take the same optimizer step."),
       tr("per-replica batch = global batch / (replicas × gradient accumulation)")},
      {"all_reduce", tr("All-reduce"),
       tr("A collective operation: every rank contributes a tensor and every rank receives the sum of all of them "
          "(Loom divides by the number of replicas to average gradients). A ring all-reduce sends and receives "
          "2(n-1)/n times the tensor per rank."),
       {}},
      {"bucket", tr("Bucket"),
       tr("Gradients are all-reduced in buckets of about this size. A bucket's all-reduce starts as soon as the "
          "backward pass has produced all of its gradients, so it overlaps the rest of the backward pass. Small "
          "buckets start earlier but pay the per-message latency more often; one big bucket waits for the whole "
          "backward pass."),
       tr("buckets per step ≈ gradient bytes / bucket size")},
      {"gradient_accumulation", tr("Gradient accumulation"),
       tr("Each replica runs k forward and backward passes on k smaller batches and adds up their gradients before "
          "one all-reduce and one optimizer step: the maths of the larger batch with the memory of a smaller one, "
          "and k times fewer all-reduces per sample."),
       tr("batch per pass = global batch / (replicas × k)")},
      {"pipeline_stage", tr("Pipeline stage"),
       tr("A contiguous group of layers that runs on its own rank. Activations flow forward from stage s to s+1, "
          "gradients flow back; p is the number of stages."),
       {}},
      {"micro_batch", tr("Micro-batch"),
       tr("The per-replica batch is cut into m equal micro-batches that go through the pipeline one after the "
          "other, so that several stages work at the same time. More micro-batches: a smaller bubble, but smaller "
          "(less efficient) matrix products and more messages."),
       tr("micro-batch size = global batch / (replicas × gradient accumulation × m)")},
      {"bubble", tr("Bubble"),
       tr("The part of a training step during which a pipeline stage is idle, waiting for work from its neighbours, "
          "as a fraction of that stage's step time (so never above 100%). With p stages of equal cost and m "
          "micro-batches, GPipe and 1F1B both leave the same fraction idle; unbalanced stages add idle time on the "
          "cheaper stages."),
       tr("bubble = (p-1)/(m+p-1) for balanced stages")},
      {"gpipe", tr("GPipe"),
       tr("A pipeline schedule: every stage runs the forward pass of all m micro-batches, then all the backward "
          "passes, then one optimizer step. Simple, but each stage keeps the activations of all m micro-batches."),
       tr("bubble = (p-1)/(m+p-1)")},
      {"1f1b", tr("1F1B"),
       tr("One forward, one backward: after a warm-up of at most p-1 forward passes a stage alternates one forward "
          "and one backward. The same bubble as GPipe for the same p and m, but a stage keeps at most p "
          "micro-batches' activations instead of m."),
       tr("bubble = (p-1)/(m+p-1); activations held ≤ p micro-batches")},
      {"parameter_server", tr("Parameter server"),
       tr("A rank that holds a shard of every parameter tensor. Workers push their gradients to the servers and "
          "pull fresh parameters, without waiting for each other (asynchronous training)."),
       {}},
      {"staleness", tr("Staleness"),
       tr("How many updates the server applied between the moment a worker read the parameters and the moment its "
          "gradient (computed on those parameters) was applied. 0 means as fresh as synchronous training."),
       tr("staleness = server version when applied − version the worker read")},
      {"ssp", tr("SSP (stale synchronous parallel)"),
       tr("Asynchronous training with a bound s: the fastest worker may run at most s steps ahead of the slowest "
          "one; further ahead it waits. s = 0 behaves like synchronous training; a larger s lets fast workers go "
          "on, with staler gradients."),
       tr("fastest step − slowest step ≤ s")},
      {"local_sgd", tr("Local SGD"),
       tr("Each replica takes optimizer steps on its own and the replicas average their parameters every H steps "
          "(the averaging period). H = 1 communicates every step like data parallel; a larger H communicates H "
          "times less often while the replicas drift apart in between."),
       tr("all-reduces per step = 1/H")},
      {"straggler", tr("Straggler"),
       tr("A rank slower than the others; Loom can make one on purpose (compute × slowdown, or a random delay per "
          "step). In synchronous training everyone waits for it; in asynchronous training it mostly sends stale "
          "gradients."),
       {}},
      {"exposed_comm", tr("Exposed communication"),
       tr("Time a rank spent communicating or waiting for a message with no computation running alongside: it "
          "adds directly to the step time. What overlaps with work is hidden communication instead."),
       {}},
      {"hidden_comm", tr("Hidden communication"),
       tr("Communication that ran while the rank was computing, e.g. a bucket's all-reduce during the rest of the "
          "backward pass. It costs no wall time, so the breakdown draws it as a thin bar beside the stack instead "
          "of adding it."),
       {}},
      {"setup", tr("Setup"),
       tr("Everything before the first training step: starting the ranks, loading the data, aligning the ranks' "
          "clocks, probing the bandwidth between them, building the model. Drawn on the timeline as its own kind "
          "and kept out of the training figures."),
       {}},
      {"warmup_step", tr("Warm-up step"),
       tr("The first training step, slower than the rest (first allocations, cold caches, first messages). It is "
          "shown but left out of throughput, the breakdown and the bubbles."),
       {}},
      {"steady_step", tr("Steady step"),
       tr("A training step after the warm-up. Throughput, the per-rank breakdown, bubbles and exposed "
          "communication are computed over steady steps only, so setup does not dilute them."),
       {}},
      {"oversubscription", tr("Oversubscription"),
       tr("More ranks on a host than it has CPU cores. The ranks take turns on the cores: a rank can be descheduled "
          "while it computes or waits, so waits and communication look much longer than the strategy makes them, "
          "and the timings say more about the machine than about the plan."),
       tr("oversubscribed when ranks on a host > its cores")},
      {"descheduled", tr("Descheduled time"),
       tr("Time a rank's process was ready to run but not running, because the operating system gave its core to "
          "another process. It is not communication, even when it happens inside a communication call."),
       {}},
      {"timeline_rows", tr("Timeline rows"),
       tr("Each rank has up to three rows (four on a GPU). compute: forward, backward, loss and optimizer (on a "
          "GPU, timed on the GPU itself). collectives: the background thread's all-reduces (they can overlap the "
          "backward pass) and the setup's probes. steps · messages: the rank's main thread, with each step as a "
          "bar and, under it, the point-to-point sends, receives, pushes and pulls it waits on. copies (GPU "
          "ranks): each batch's copy from host to GPU memory."),
       {}},
      {"busbw", tr("algbw / busbw"),
       tr("Algorithm bandwidth is the tensor's bytes divided by the collective's time. Bus bandwidth scales it by "
          "what the algorithm must move per rank, so that it can be compared with the link's peak (as nccl-tests "
          "reports it)."),
       tr("algbw = bytes / time; all-reduce busbw = algbw × 2(n-1)/n")},
      {"compute", tr("Compute"),
       tr("Forward and backward passes of the rank's layers, and the loss."), {}},
      {"optimizer", tr("Optimizer"),
       tr("Applying the gradients to the parameters (the SGD, momentum or Adam step)."), {}},
      {"data", tr("Data loading"), tr("Preparing the next batch: reading samples and copying them into the input."), {}},
      {"idle", tr("Idle / bubble"),
       tr("Time a rank had nothing to do: in a pipeline, the bubble while it waits for a neighbour stage; otherwise "
          "waiting for slower ranks."),
       {}},
      {"critical_path", tr("Critical path"),
       tr("The chain of work that decided how long a step took, across ranks: it starts at the rank whose step "
          "ended last and walks back; where that rank waited in a receive it jumps to the sender, where it waited "
          "in a collective it jumps to the last rank to arrive, otherwise it steps back along the same rank. Its "
          "time splits into work, exposed communication, waiting for late ranks, time descheduled and untraced "
          "gaps; a comparison splits the difference in step time the same way."),
       {}},
      {"pop_efficiency", tr("Load balance, communication and parallel efficiency"),
       tr("The POP project's efficiencies over the worker ranks, with useful time = compute + optimizer + data "
          "loading and runtime = the longest training window. 100% is perfect."),
       tr("load balance = mean useful / max useful; communication efficiency = max useful / runtime; "
          "parallel efficiency = load balance × communication efficiency")},
      {"comparison", tr("Comparing runs"),
       tr("Select 2 to 6 runs in the Runs dock and choose Compare. Run A (listed first) is the baseline: ratios "
          "and differences are to it, and ★ marks the better run. Each run keeps one colour in every tab. "
          "The timelines line up the start of a chosen step (or each run's first event) and zoom together; "
          "the phase diff lines up ranks by role (stage, worker, server), so runs with different numbers of "
          "ranks still compare."),
       {}},
      {"prediction", tr("Prediction"),
       tr("Run > Predict lays out one steady step of the plan, rank by rank, from what this machine's stored runs "
          "measured, without running it: step time, throughput, bubble, exposed communication and memory per "
          "rank. It is stored as a run of kind \"predicted\" (never counted as measured), so the comparison puts "
          "it beside a real run with the error per span kind. The What-if dock re-predicts as its knobs move."),
       {}},
      {"calibration", tr("Calibration"),
       tr("What predictions stand on: each layer's forward and backward, the loss, the optimizer, data loading "
          "and each message or collective, as the median time measured at each size in this machine's stored "
          "runs, plus the time no span covered. Every finished run refines it. Run > Calibrate makes short runs "
          "of the plan in the layouts prediction needs when there is no history; the What-if dock's Calibration "
          "tab lists it, and Reset calibration tags its runs \"not calibrating\"."),
       tr("a cost between two measured sizes: linear between them")},
  };
}

}  // namespace

const std::vector<Term>& glossary() {
  static const std::vector<Term> terms = build();
  return terms;
}

const Term* find_term(const QString& key) {
  for (const Term& t : glossary()) {
    if (t.key == key) return &t;
  }
  return nullptr;
}

QString term_tooltip(const QString& key) {
  const Term* t = find_term(key);
  if (t == nullptr) return {};
  QString text = t->name + QStringLiteral(": ") + t->text;
  if (!t->formula.isEmpty()) text += QStringLiteral("\n") + t->formula;
  return text;
}

QString glossary_html() {
  QString html = QStringLiteral("<dl>");
  for (const Term& t : glossary()) {
    html += QStringLiteral("<dt><a name=\"%1\"></a><b>%2</b></dt><dd>%3").arg(t.key, t.name.toHtmlEscaped(),
                                                                             t.text.toHtmlEscaped());
    if (!t.formula.isEmpty()) html += QStringLiteral("<br><i>%1</i>").arg(t.formula.toHtmlEscaped());
    html += QStringLiteral("</dd>");
  }
  return html + QStringLiteral("</dl>");
}

}  // namespace loom::ui
