// `loom-report RUN_ID [RUN_ID...] (--html FILE | --pdf FILE)... [--db PATH]
//  [--target-accuracy X] [--step N]`: a report of one stored run, or a comparison of 2 to 6,
// as self-contained HTML and/or PDF (loom/ui/report/report.h). `loom-cli report` runs this
// program (it draws with the workbench's widgets, which loom-cli does not link); without a
// display it draws offscreen. Exit codes as loom-cli: 0 ok, 1 failed, 2 invalid input.
#include <QApplication>
#include <QFileInfo>

#include <cmath>
#include <cstdio>
#include <limits>
#include <cstdlib>
#include <string>
#include <vector>

#include "loom/store/run_store.h"
#include "loom/ui/report/report.h"

namespace {

constexpr int kOk = 0, kFailed = 1, kInvalidInput = 2;

constexpr const char* kUsage =
    "usage: loom-cli report RUN_ID [RUN_ID...] (--html FILE | --pdf FILE)... [--db PATH]\n"
    "                       [--target-accuracy X] [--step N]\n"
    "\n"
    "Writes a report of one stored run, or a comparison of 2 to 6 (the first is the baseline):\n"
    "the runs and their plans, the figures (`show` for one run; for several the comparison's\n"
    "table with ratios, where the step time went and the phase diff), the training curves,\n"
    "the breakdown (one run) and each run's timeline at the same step. HTML is one file with\n"
    "the pictures inside; PDF is A4.\n"
    "  --html FILE             write the report as HTML\n"
    "  --pdf FILE              write the report as PDF\n"
    "  --db PATH               the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
    "  --target-accuracy X     a comparison adds the time and steps to reach test accuracy X (0.85 or 85)\n"
    "  --step N                the step the timelines show (default 1, the first steady step)\n"
    "Exit codes: 0 ok, 1 failed, 2 an unknown run, a missing store or a bad option.\n";

struct Options {
  std::vector<std::int64_t> runs;
  std::vector<QString> files;
  QString db;
  double target = std::numeric_limits<double>::quiet_NaN();
  int step = 1;
};

bool fail(const std::string& message) {
  std::fprintf(stderr, "loom-cli: report: %s\n", message.c_str());
  return false;
}

bool parse_number(const std::string& text, double low, double high, double& out) {
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0' && out >= low && out <= high;
}

bool parse(const QStringList& args, Options& o) {
  for (int i = 0; i < args.size(); ++i) {
    const std::string arg = args[i].toStdString();
    const bool has_value = i + 1 < args.size();
    if (arg == "--html" || arg == "--pdf" || arg == "--db" || arg == "--target-accuracy" || arg == "--step") {
      if (!has_value) return fail(arg + " needs a value");
      const QString value = args[++i];
      double v = 0;
      if (arg == "--db") {
        o.db = value;
      } else if (arg == "--target-accuracy") {
        if (!parse_number(value.toStdString(), 1e-9, 100, v)) return fail("--target-accuracy needs 0..1 or a percentage");
        o.target = v > 1 ? v / 100 : v;
      } else if (arg == "--step") {
        if (!parse_number(value.toStdString(), 0, 1e9, v) || v != std::floor(v)) return fail("--step needs a step number");
        o.step = int(v);
      } else {
        const QString want = arg == "--html" ? "html" : "pdf";
        const QString ext = QFileInfo(value).suffix().toLower();
        if (!(ext == want || (want == "html" && ext == "htm")))
          return fail(arg + " " + value.toStdString() + ": the file should end in ." + want.toStdString());
        o.files.push_back(value);
      }
    } else if (!arg.empty() && arg[0] == '-') {
      return fail("unknown option '" + arg + "'");
    } else {
      double v = 0;
      if (!parse_number(arg, 1, 9e15, v) || v != std::floor(v))
        return fail("'" + arg + "' is not a run id (a positive number; see `loom-cli runs`)");
      o.runs.push_back(std::int64_t(v));
    }
  }
  if (o.runs.empty()) return fail("name one run, or 2 to 6 to compare");
  if (o.files.empty()) return fail("say where to write it: --html FILE or --pdf FILE");
  return true;
}

// The offscreen platform's notes on features it lacks are not the user's concern.
void quiet_messages(QtMsgType type, const QMessageLogContext&, const QString& text) {
  if (type == QtDebugMsg || text.contains("propagateSizeHints") || text.contains("XDG_RUNTIME_DIR")) return;
  std::fprintf(stderr, "%s\n", qPrintable(text));
}

}  // namespace

int main(int argc, char** argv) {
  qInstallMessageHandler(quiet_messages);
  // A terminal without a display (ssh, CI): draw offscreen.
  if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
      qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
    qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  const QStringList args = QApplication::arguments().mid(1);
  if (args.contains("--help") || args.contains("-h")) {
    std::fputs(kUsage, stdout);
    return kOk;
  }
  Options o;
  if (!parse(args, o)) {
    std::fputs(kUsage, stderr);
    return kInvalidInput;
  }
  const std::string db = o.db.isEmpty() ? loom::store::RunStore::default_path() : o.db.toStdString();
  if (!QFileInfo::exists(QString::fromStdString(db))) {
    fail("no run store at " + db + " (runs are stored by `loom-cli run` or the workbench)");
    return kInvalidInput;
  }
  auto store = loom::store::RunStore::open(db);
  if (!store.ok()) {
    fail(store.error().describe());
    return kFailed;
  }
  loom::ui::report::ReportOptions options;
  options.runs = o.runs;
  options.target_accuracy = o.target;
  options.step = o.step;
  auto report = loom::ui::report::build_report(*store, options);
  if (!report.ok()) {
    fail(report.error().describe());
    const auto code = report.error().code;
    return code == loom::ErrorCode::NotFound || code == loom::ErrorCode::InvalidArgument ? kInvalidInput : kFailed;
  }
  for (const QString& file : o.files) {
    const loom::Status written = loom::ui::report::write_report(*report, file);
    if (!written.ok()) {
      fail(written.error().describe());
      return kFailed;
    }
    std::printf("wrote %s: %s (%zu pictures)\n", qPrintable(file), qPrintable(report->title), report->images.size());
  }
  return kOk;
}
