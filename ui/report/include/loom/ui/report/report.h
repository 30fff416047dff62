// A report of one run, or a comparison of 2 to 6 runs, written as one self-contained HTML
// file (pictures embedded as data: URIs) or as PDF:
//   - the runs (mode, status, ranks, steps, samples/s, test accuracy) and each plan's model
//     table and training settings;
//   - the figures: for one run what `loom-cli show` prints (steady throughput, breakdown,
//     bubble, efficiencies, critical path, who waited for whom); for several, the
//     comparison's metrics with ratios to run A and the better run starred, where the
//     step time went, and the phase diff;
//   - pictures drawn by the workbench's own widgets: the training curves, the breakdown
//     (one run), and each run's timeline at the same steady step (aligned on its start,
//     the same time span in every run).
// The widgets need a QApplication (the offscreen platform where there is no display); the
// store is read on the calling thread. `loom-cli report` and the workbench both use this.
#pragma once

#include <QImage>
#include <QString>
#include <QTextDocument>

#include <cstdint>
#include <memory>
#include <limits>
#include <vector>

#include "loom/core/status.h"
#include "loom/store/run_store.h"

namespace loom::ui::report {

struct ReportOptions {
  std::vector<std::int64_t> runs;  // one run, or 2 to 6 (the first is the baseline)
  // Time to this test accuracy (0..1) in a comparison; NaN leaves the rows out.
  double target_accuracy = std::numeric_limits<double>::quiet_NaN();
  int step = 1;  // the timelines show this step (default: the first steady one)
  int width_px = 960;  // pictures' width
};

struct Report {
  QString title;
  QString html;                // a whole document; pictures as <img src="image:N">
  std::vector<QImage> images;  // N = index
};

// InvalidArgument for no run or more than 6; NotFound for an unknown run; store errors.
Expected<Report> build_report(store::RunStore& store, const ReportOptions& options);

// The document with each picture inlined as a PNG data: URI.
QString self_contained_html(const Report& report);

// By the file's extension: .html/.htm (self-contained) or .pdf (A4). InvalidArgument
// naming the extension for anything else; Io when the file cannot be written.
Status write_report(const Report& report, const QString& path);

// The PDF's pages as write_report prints them: A4 with 15 mm margins, laid out at 96 dpi,
// no heading left alone at a page's foot (it starts the next page). Tests read it: nothing
// may be wider than a page.
std::unique_ptr<QTextDocument> paged_document(const Report& report);

// Each page of a paged document as a picture, `scale` pixels per layout unit.
std::vector<QImage> render_pages(QTextDocument& doc, double scale = 1.0);

}  // namespace loom::ui::report
