// The designer's words about a plan (plan_help.h): one table of strategy fields (name,
// group, glossary term, a line computed for the plan), the map from JSON paths to
// controls, and the rewriting of core's JSON-worded advice into advice about controls.
#include "loom/ui/designer/plan_help.h"

#include <QCoreApplication>
#include <QRegularExpression>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "loom/ui/designer/layer_rows.h"
#include "loom/ui/glossary.h"

namespace loom::ui {
namespace {

QString tr(const char* text) { return QCoreApplication::translate("PlanHelp", text); }
QString qs(std::string_view text) { return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size())); }
const QString kSep = QStringLiteral(" \u203a ");  // " › "

using PlanLine = std::function<QString(const loom::Plan&, const loom::ModelInfo&)>;

struct FieldInfo {
  QString path;
  QString group;
  QString name;
  QString term;   // glossary key, or "" when the text below says it all
  QString about;  // what the field is, when no glossary term covers it
  PlanLine line;  // what the current value means for this plan; may be empty
};

std::int64_t perReplicaBatch(const loom::Plan& p) {
  const std::int64_t split = std::int64_t(std::max(1, p.parallel.data_parallel)) * std::max(1, p.parallel.grad_accumulation);
  return p.training.batch / std::max<std::int64_t>(1, split);
}

QString percent(double f) { return QString::number(f * 100.0, 'f', f < 0.1 ? 1 : 0) + QLatin1Char('%'); }

QString bubbleLine(const loom::Plan& p, const loom::ModelInfo&) {
  const int s = p.parallel.stages, m = std::max(1, p.parallel.microbatches);
  if (s <= 1) return tr("This plan has one stage: no pipeline, no bubble.");
  const double bubble = double(s - 1) / double(m + s - 1);
  return tr("This plan: p = %1, m = %2 → bubble (p-1)/(m+p-1) = %3/%4 = %5 of a step with balanced stages; "
            "micro-batches of %6 samples.")
      .arg(s).arg(m).arg(s - 1).arg(m + s - 1).arg(percent(bubble)).arg(perReplicaBatch(p) / m);
}

QString bucketLine(const loom::Plan& p, const loom::ModelInfo& info) {
  std::int64_t params = 0;
  for (std::int64_t s : info.stage_params) params = std::max(params, s);
  if (params == 0) params = info.total_params;
  const double grad_mib = double(params) * 4.0 / (1024.0 * 1024.0);
  const double bucket = p.parallel.bucket_mb;
  if (!(bucket > 0)) return {};
  const auto buckets = std::max<long long>(1, std::llround(std::ceil(grad_mib / bucket)));
  QString text = tr("This plan: %1 MiB of gradients per replica → about %2 bucket(s) per step.")
                     .arg(grad_mib, 0, 'f', 2).arg(buckets);
  if (!(p.parallel.sync.mode == loom::SyncMode::AllReduce && p.parallel.data_parallel > 1)) {
    text += tr(" Used only with more than one replica and sync mode allreduce.");
  }
  return text;
}

QString replicasLine(const loom::Plan& p, const loom::ModelInfo&) {
  return tr("This plan: %1 replica(s) × %2 stage(s) = %3 worker rank(s); each replica trains on %4 samples per step.")
      .arg(p.parallel.data_parallel).arg(p.parallel.stages).arg(p.parallel.data_parallel * p.parallel.stages)
      .arg(p.training.batch / std::max(1, p.parallel.data_parallel));
}

QString accumulationLine(const loom::Plan& p, const loom::ModelInfo&) {
  const int k = std::max(1, p.parallel.grad_accumulation);
  return tr("This plan: %1 pass(es) of %2 samples per replica before each optimizer step.").arg(k).arg(perReplicaBatch(p));
}

QString boundLine(const loom::Plan& p, const loom::ModelInfo&) {
  if (p.parallel.sync.mode != loom::SyncMode::Ssp) return tr("Used only with sync mode ssp.");
  return tr("This plan: a worker may run at most %1 step(s) ahead of the slowest.").arg(p.parallel.sync.bound);
}

QString periodLine(const loom::Plan& p, const loom::ModelInfo&) {
  if (p.parallel.sync.mode != loom::SyncMode::LocalSgd) return tr("Used only with sync mode local_sgd.");
  return tr("This plan: parameters are averaged every %1 step(s).").arg(p.parallel.sync.period);
}

QString batchLine(const loom::Plan& p, const loom::ModelInfo&) {
  return tr("This plan: %1 samples per step = %2 replica(s) × %3 pass(es) × %4 samples.")
      .arg(p.training.batch).arg(p.parallel.data_parallel).arg(std::max(1, p.parallel.grad_accumulation))
      .arg(perReplicaBatch(p));
}

const std::vector<FieldInfo>& fields() {
  static const std::vector<FieldInfo> table = {
      {"/parallel/data_parallel", tr("Data parallel"), tr("Replicas"), "data_parallel", {}, replicasLine},
      {"/parallel/grad_accumulation", tr("Data parallel"), tr("Gradient accumulation"), "gradient_accumulation", {},
       accumulationLine},
      {"/parallel/bucket_mb", tr("Data parallel"), tr("Bucket (MiB)"), "bucket", {}, bucketLine},
      {"/parallel/backend", tr("Data parallel"), tr("Backend"), {},
       tr("How the ranks talk. mpi: Open MPI (shared memory on one host, TCP between hosts), for cpu devices. "
          "nccl: NVIDIA's collectives, for gpu devices only."),
       {}},
      {"/parallel/stages", tr("Pipeline"), tr("Stages"), "pipeline_stage",
       {},
       [](const loom::Plan& p, const loom::ModelInfo&) {
         return tr("Each stage runs on its own rank: put layers on stages in the Placement tab. This plan: %1 stage(s).")
             .arg(p.parallel.stages);
       }},
      {"/parallel/microbatches", tr("Pipeline"), tr("Micro-batches"), "micro_batch", {}, bubbleLine},
      {"/parallel/schedule", tr("Pipeline"), tr("Schedule"), {},
       tr("The order in which a stage runs its micro-batches' forward and backward passes. gpipe: all forwards, then "
          "all backwards. 1f1b: after a warm-up, one forward then one backward. Both leave a bubble of "
          "(p-1)/(m+p-1) with balanced stages; 1F1B keeps at most p micro-batches' activations instead of m."),
       {}},
      {"/parallel/sync/mode", tr("Sync"), tr("Mode"), {},
       tr("How the replicas agree on the parameters. allreduce: synchronous data parallel, gradients averaged every "
          "step. parameter_server: asynchronous, workers push gradients to server ranks and pull parameters. ssp: "
          "parameter server with a staleness bound. local_sgd: replicas step alone and average parameters every "
          "period steps."),
       {}},
      {"/parallel/sync/bound", tr("Sync"), tr("Staleness bound"), "ssp", {}, boundLine},
      {"/parallel/sync/period", tr("Sync"), tr("Averaging period"), "local_sgd", {}, periodLine},
      {"/parallel/sync/servers", tr("Sync"), tr("Servers"), "parameter_server",
       {},
       [](const loom::Plan& p, const loom::ModelInfo&) {
         return tr("Each server is one more rank; every tensor is split across the %1 server(s).").arg(p.parallel.sync.servers);
       }},
      {"/parallel/sync/staleness_aware_lr", tr("Sync"), tr("Staleness-aware learning rate"), {},
       tr("The server divides the learning rate by the gradient's staleness (when it is above 0), so stale gradients "
          "move the parameters less.\nlr used = lr / staleness"),
       {}},
      {"/training/batch", tr("Training"), tr("Global batch"), {},
       tr("Samples per optimizer step, over all replicas.\nglobal batch = replicas × gradient accumulation × batch "
          "per pass"),
       batchLine},
      {"/training/steps", tr("Training"), tr("Steps (0 = epochs)"), {},
       tr("Optimizer steps to train for; 0 trains for the number of epochs below instead."), {}},
      {"/training/epochs", tr("Training"), tr("Epochs"), {},
       tr("Passes over the training set; used only when Steps is 0."), {}},
      {"/training/optimizer/type", tr("Training"), tr("Optimizer"), {},
       tr("sgd: w ← w − lr·g. momentum: v ← μ·v + g, w ← w − lr·v. adam: per-parameter steps scaled by running "
          "averages of the gradient and its square."),
       {}},
      {"/training/optimizer/lr", tr("Training"), tr("Learning rate"), {},
       tr("The optimizer's step size (lr in w ← w − lr·g)."), {}},
      {"/training/optimizer/momentum", tr("Training"), tr("Momentum"), {},
       tr("μ: the fraction of the previous update kept (momentum optimizer only).\nv ← μ·v + g, w ← w − lr·v"), {}},
  };
  return table;
}

const FieldInfo* fieldFor(const QString& path) {
  for (const FieldInfo& f : fields()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

// Straggler fields: "/parallel/stragglers/N/<key>".
QString stragglerFieldName(const QString& key) {
  if (key == QLatin1String("rank")) return tr("Rank");
  if (key == QLatin1String("slowdown")) return tr("Slowdown (x)");
  if (key == QLatin1String("delay")) return tr("Delay");
  if (key == QLatin1String("delay_ms")) return tr("Mean delay (ms)");
  return {};
}

QString stragglerHelp(const QString& key) {
  QString text = term_tooltip("straggler") + QStringLiteral("\n\n");
  if (key == QLatin1String("rank")) return text + tr("Which rank is slowed down.");
  if (key == QLatin1String("slowdown")) return text + tr("Its compute takes this many times longer (1 = normal speed).");
  if (key == QLatin1String("delay")) {
    return text + tr("A random pause added to each of its steps: none, constant, uniform or exponential, with the "
                     "mean below.");
  }
  if (key == QLatin1String("delay_ms")) return text + tr("Mean of the pause per step, in milliseconds.");
  return {};
}

// The layer or branch a model path points into, by name: "fc2", "block1 › branch 1".
// Returns the matched row's json path length so callers know what is left over.
QString rowNameForPath(const loom::Plan& plan, const QString& path, int* matched) {
  const std::string p = path.toStdString();
  const LayerRow* best = nullptr;
  const auto rows = layerRows(plan.model, true);
  for (const LayerRow& r : rows) {
    const bool inside = p == r.json_path || p.rfind(r.json_path + "/", 0) == 0;
    if (inside && (best == nullptr || r.json_path.size() > best->json_path.size())) best = &r;
  }
  if (best == nullptr) return {};
  *matched = static_cast<int>(best->json_path.size());
  if (!best->is_branch) return qs(layerAt(plan.model, best->address).name);
  LayerAddress block(best->address.begin(), best->address.end() - 1);
  return qs(layerAt(plan.model, block).name) + kSep + tr("branch %1").arg(best->address.back());
}

QString modelControl(const loom::Plan& plan, const QString& path) {
  int matched = 0;
  const QString name = rowNameForPath(plan, path, &matched);
  if (name.isEmpty()) return path.startsWith(QLatin1String("/model/input")) ? tr("Plan file › model input") : tr("Model");
  const QString rest = path.mid(matched);
  if (rest == QLatin1String("/stage")) return tr("Placement") + kSep + name;
  if (rest == QLatin1String("/name")) return tr("Model") + kSep + name + kSep + tr("Name");
  if (rest == QLatin1String("/type")) return tr("Model") + kSep + name + kSep + tr("Type");
  if (!rest.isEmpty()) return tr("Model") + kSep + name + kSep + tr("Settings") + kSep + rest.mid(1);
  return tr("Model") + kSep + name;
}

QString devicesControl(const QString& path) {
  static const QRegularExpression re(QStringLiteral("^/parallel/devices/(\\d+)(?:/(\\w+))?"));
  const auto m = re.match(path);
  if (!m.hasMatch()) return tr("Devices");
  QString text = tr("Devices") + kSep + tr("rank %1").arg(m.captured(1));
  const QString key = m.captured(2);
  if (key == QLatin1String("host")) text += kSep + tr("Host");
  if (key == QLatin1String("kind")) text += kSep + tr("Kind");
  if (key == QLatin1String("gpu")) text += kSep + tr("GPU");
  return text;
}

// Every JSON-ism core's reasons use, as the control that sets it. Ordered: longer, more
// specific phrases first, so "parallel.stages" is not half-replaced by a shorter rule.
struct Rewrite {
  QRegularExpression from;
  QString to;
};

const std::vector<Rewrite>& rewrites() {
  static const std::vector<Rewrite> table = {
      {QRegularExpression(QStringLiteral("give some layers \"stage\": (\\d+) or lower parallel\\.stages")),
       tr("place some layers on stage \\1 in the Placement tab, or lower Strategy › Pipeline › Stages")},
      {QRegularExpression(QStringLiteral("set \"stage\" on the branch instead")),
       tr("move the whole branch instead (its branch row in the Model tab)")},
      {QRegularExpression(QStringLiteral("use \"backend\": \"mpi\" for cpu devices")),
       tr("set Strategy › Data parallel › Backend to mpi for cpu devices")},
      {QRegularExpression(QStringLiteral("\\(set \"kind\": \"gpu\" to use the GPU\\)")),
       tr("(set the rank's Kind to gpu in the Devices tab to use a GPU)")},
      {QRegularExpression(QStringLiteral("needs a \"gpu\" index")), tr("needs a GPU index (the GPU column in the Devices tab)")},
      {QRegularExpression(QStringLiteral("a device needs a host name \\(\"localhost\" for this machine\\)")),
       tr("a device needs a host name (type localhost in the Host column for this machine)")},
      {QRegularExpression(QStringLiteral("list one device per rank, or lower parallel\\.stages")),
       tr("add replicas in the Devices tab, or lower Strategy › Pipeline › Stages")},
      {QRegularExpression(QStringLiteral(": list one device per rank")), tr(": add or remove devices in the Devices tab")},
      {QRegularExpression(QStringLiteral("use stages 1")), tr("set Strategy › Pipeline › Stages to 1")},
      {QRegularExpression(QStringLiteral("use microbatches 1")), tr("set Strategy › Pipeline › Micro-batches to 1")},
      {QRegularExpression(QStringLiteral("use another gpu or backend mpi")),
       tr("give the rank another GPU in the Devices tab, or set Backend to mpi")},
      {QRegularExpression(QStringLiteral("\\(batch / data_parallel / grad_accumulation\\)")),
       tr("(Global batch / Replicas / Gradient accumulation)")},
      {QRegularExpression(QStringLiteral("data_parallel x grad_accumulation")), tr("Replicas × Gradient accumulation")},
      {QRegularExpression(QStringLiteral("data_parallel (\\d+) x stages (\\d+)")), tr("\\1 replica(s) × \\2 stage(s)")},
      {QRegularExpression(QStringLiteral("\\(add a flatten layer, then a linear layer with out (\\d+)\\)")),
       tr("(Add layer › flatten, then Add layer › linear with out \\1)")},
      {QRegularExpression(QStringLiteral("parallel\\.stages")), tr("Stages")},
      {QRegularExpression(QStringLiteral("parallel\\.data_parallel")), tr("Replicas")},
      // What is left of the "key": value form, generically: "\"stage\": 1" -> "Stage 1".
      {QRegularExpression(QStringLiteral("\"(\\w+)\": \"?([\\w.-]+)\"?")), QStringLiteral("\\1 \\2")},
      {QRegularExpression(QStringLiteral("\"(\\w+)\"")), QStringLiteral("\\1")},
  };
  return table;
}

// Layer paths inside a reason ("also used by /model/layers/3") become layer names.
QString namePaths(const loom::Plan& plan, QString text) {
  static const QRegularExpression path(QStringLiteral("/model/layers(?:/\\d+(?:/branches/\\d+(?:/layers)?)?)*"));
  QString out;
  qsizetype last = 0;
  for (auto it = path.globalMatch(text); it.hasNext();) {
    const auto m = it.next();
    int matched = 0;
    const QString name = rowNameForPath(plan, m.captured(0), &matched);
    out += text.mid(last, m.capturedStart(0) - last) + (name.isEmpty() ? m.captured(0) : name);
    last = m.capturedEnd(0);
  }
  return out + text.mid(last);
}

}  // namespace

const QStringList& strategyFieldPaths() {
  static const QStringList paths = [] {
    QStringList out;
    for (const FieldInfo& f : fields()) out << f.path;
    return out;
  }();
  return paths;
}

QString strategyFieldName(const QString& path) {
  if (const FieldInfo* f = fieldFor(path)) return f->name;
  if (path.startsWith(QLatin1String("/parallel/stragglers/"))) return stragglerFieldName(path.section('/', 4, 4));
  return {};
}

QString strategyFieldGroup(const QString& path) {
  if (const FieldInfo* f = fieldFor(path)) return f->group;
  return path.startsWith(QLatin1String("/parallel/stragglers")) ? tr("Stragglers") : QString();
}

QString strategyFieldHelp(const loom::Plan& plan, const loom::ModelInfo& info, const QString& path) {
  if (path.startsWith(QLatin1String("/parallel/stragglers/"))) return stragglerHelp(path.section('/', 4, 4));
  const FieldInfo* f = fieldFor(path);
  if (f == nullptr) return {};
  QString text = f->term.isEmpty() ? f->name + QStringLiteral(": ") + f->about : term_tooltip(f->term);
  if (f->line) {
    const QString line = f->line(plan, info);
    if (!line.isEmpty()) text += QStringLiteral("\n\n") + line;
  }
  return text;
}

QString controlForPath(const loom::Plan& plan, const QString& path) {
  if (const FieldInfo* f = fieldFor(path)) return tr("Strategy") + kSep + f->group + kSep + f->name;
  if (path.startsWith(QLatin1String("/parallel/stragglers/"))) {
    const QString name = stragglerFieldName(path.section('/', 4, 4));
    QString text = tr("Strategy") + kSep + tr("Stragglers") + kSep + tr("straggler %1").arg(path.section('/', 3, 3));
    return name.isEmpty() ? text : text + kSep + name;
  }
  if (path.startsWith(QLatin1String("/parallel/devices"))) return devicesControl(path);
  if (path.startsWith(QLatin1String("/model"))) return modelControl(plan, path);
  if (path.startsWith(QLatin1String("/parallel/sync"))) return tr("Strategy") + kSep + tr("Sync");
  if (path.startsWith(QLatin1String("/parallel"))) return tr("Strategy");
  const QString section = path.section('/', 1, 1);
  return section.isEmpty() ? tr("Plan") : tr("Plan file") + kSep + section;
}

QString rephraseReason(const loom::Plan& plan, const QString& reason) {
  QString text = namePaths(plan, reason);
  for (const Rewrite& r : rewrites()) text.replace(r.from, r.to);
  return text;
}

ShownError describePlanError(const loom::Plan& plan, const loom::PlanError& error) {
  return {controlForPath(plan, QString::fromStdString(error.path)), rephraseReason(plan, QString::fromStdString(error.reason))};
}

QString describeResumeError(const loom::Plan* plan, const loom::Error& error) {
  QString message = QString::fromStdString(error.message), hint = QString::fromStdString(error.hint);
  static const QRegularExpression invalid(QStringLiteral("^the resumed plan is not valid: (/\\S*): (.*)$"));
  if (const auto m = invalid.match(message); m.hasMatch() && plan)
    message = QObject::tr("the resumed plan is not valid: %1: %2")
                  .arg(controlForPath(*plan, m.captured(1)), rephraseReason(*plan, m.captured(2)));
  message.replace(QStringLiteral("--replicas changes data-parallel all-reduce runs only"),
                  QObject::tr("only a data-parallel all-reduce run can resume on another number of replicas"));
  if (hint == QLatin1String("resume it without --replicas")) hint = QObject::tr("resume it on its own replica count");
  if (hint.startsWith(QLatin1String("set training.checkpoint_every in the plan")))
    hint = QObject::tr("to resume a run later, its plan needs a checkpoint interval: checkpoint_every under "
                       "\"training\" in the plan file (the designer has no field for it); a stopped run also "
                       "saves one when it stops");
  return hint.isEmpty() ? message : message + QStringLiteral("\n\n") + hint;
}

}  // namespace loom::ui
