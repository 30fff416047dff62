// write_report_file (report_file.h).
#include "loom/ui/workbench/report_file.h"

#include "loom/store/run_store.h"
#include "loom/ui/report/report.h"

namespace loom::ui {

QString write_report_file(const QString& db_path, const std::vector<std::int64_t>& runs, double target_accuracy,
                          int step, const QString& path) {
  auto store = loom::store::RunStore::open(db_path.toStdString());
  if (!store.ok()) return QString::fromStdString(store.error().describe());
  report::ReportOptions options;
  options.runs = runs;
  options.target_accuracy = target_accuracy;
  options.step = step;
  auto built = report::build_report(*store, options);
  if (!built.ok()) return QString::fromStdString(built.error().describe());
  const loom::Status written = report::write_report(*built, path);
  return written.ok() ? QString() : QString::fromStdString(written.error().describe());
}

}  // namespace loom::ui
