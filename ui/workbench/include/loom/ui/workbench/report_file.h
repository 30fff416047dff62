// The workbench's "Save report…" (a stored run, or a comparison): opens its own store
// connection, builds the report (loom/ui/report/report.h) and writes it by extension.
#pragma once

#include <QString>

#include <cstdint>
#include <vector>

namespace loom::ui {

// "" on success, else a message naming what failed.
QString write_report_file(const QString& db_path, const std::vector<std::int64_t>& runs, double target_accuracy,
                          int step, const QString& path);

}  // namespace loom::ui
