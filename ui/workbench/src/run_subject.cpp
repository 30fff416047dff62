// Which run is on screen, in words (run_subject.h).
#include "loom/ui/workbench/run_subject.h"

#include <QCoreApplication>

#include "loom/analysis/device_identity.h"
#include "loom/ui/run_rows.h"

namespace loom::ui {

namespace {
QString tr(const char* text) { return QCoreApplication::translate("RunSubject", text); }
QString quoted(const std::string& name) { return QStringLiteral("\u201c%1\u201d").arg(QString::fromStdString(name)); }
}  // namespace

QString runLabel(const ShownRun& run) { return run.id > 0 ? tr("run %1").arg(run.id) : QString(); }

QString runCaption(const ShownRun& run, const loom::Plan& designer) {
  if (run.id <= 0) {
    return tr("No run on screen \u00b7 designing %1: press Run to train it, or open a stored run from the Runs tab")
        .arg(quoted(designer.name));
  }
  QString text = tr("Run %1").arg(run.id);
  if (run.plan) text += tr(" \u00b7 plan %1").arg(quoted(run.plan->name));
  if (run.predicted) {
    text += tr(" \u00b7 predicted, not measured");  // its status says nothing: it never ran
  } else if (run.status) {
    text += QStringLiteral(" \u00b7 ") + QString::fromStdString(run_status_label(*run.status)).toLower();
  }
  if (!run.device.empty()) text += tr(" \u00b7 on %1").arg(QString::fromStdString(run.device));
  if (run.resumed_from > 0) text += tr(" \u00b7 resumed from run %1").arg(run.resumed_from);
  if (!run.plan) return text;
  if (run.plan->name != designer.name) {
    text += tr(" \u2014 not the plan in the designer (%1)").arg(quoted(designer.name));
  } else if (!(*run.plan == designer)) {
    text += tr(" \u2014 the designer's plan has changed since this run");
  }
  return text;
}

QString runCaptionToolTip(const ShownRun& run, const loom::Plan& designer) {
  const QString caption = runCaption(run, designer);
  if (run.id <= 0 || run.device_detail.empty()) return caption;
  return caption + QLatin1Char('\n') + QString::fromStdString(run.device_detail);
}

void setDevices(ShownRun& run, const std::vector<loom::trace::RankRecord>& ranks) {
  const auto groups = loom::analysis::group_devices(ranks);
  run.device = loom::analysis::devices_named(groups);
  run.device_detail.clear();
  if (!loom::analysis::any_device_recorded(groups)) return;
  for (const std::string& line : loom::analysis::device_lines(groups))
    run.device_detail += (run.device_detail.empty() ? "" : "\n") + line;
}

QString dockTitle(const QString& base, const ShownRun& run) {
  return run.id > 0 ? QStringLiteral("%1 \u00b7 %2").arg(base, runLabel(run)) : base;
}

QString windowTitleFor(const QString& planLabel, const ShownRun& run) {
  const QString plan = (planLabel.isEmpty() ? tr("untitled") : planLabel) + QStringLiteral("[*]");
  if (run.id <= 0) return tr("%1 \u2014 Loom").arg(plan);
  return tr("%1 \u00b7 %2 \u2014 Loom").arg(plan, runLabel(run));
}

}  // namespace loom::ui
