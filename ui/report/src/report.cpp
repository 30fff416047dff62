// build_report, self_contained_html and write_report (report.h).
#include "loom/ui/report/report.h"

#include <QAbstractTextDocumentLayout>
#include <QBuffer>
#include <QDateTime>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextFrame>
#include <QTextLayout>
#include <QUrl>

#include <cmath>
#include <optional>

#include "loom/analysis/analysis.h"
#include "loom/analysis/compare.h"
#include "loom/analysis/critical_path.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/text/run_text.h"
#include "loom/ui/colors.h"
#include "loom/ui/run_rows.h"
#include "report_pictures.h"

namespace loom::ui::report {

namespace {

QString qs(const std::string& text) { return QString::fromStdString(text); }
QString esc(const std::string& text) { return qs(text).toHtmlEscaped(); }
QString letter(std::size_t i) { return QString(QChar('A' + int(i))); }
QString pre(const std::string& text) { return QStringLiteral("<pre>%1</pre>").arg(esc(text)); }

QString number(double v, int decimals) {
  return std::isfinite(v) ? QString::number(v, 'f', decimals) : QStringLiteral("-");
}

// A fraction as "83.25 %"; unknown is "-" alone.
QString percent(double fraction) {
  return std::isfinite(fraction) ? number(100 * fraction, 2) + QStringLiteral(" %") : number(fraction, 2);
}

// What report pictures and tables need of one run, read once.
struct RunData {
  trace::RunRecord run;
  std::optional<Plan> plan;
  std::vector<trace::MetricRecord> metrics;
  detail::RunTimeline timeline;
  std::vector<std::pair<int, std::int64_t>> first_steps;  // rank, its first Step start
};

Expected<RunData> read_run(store::RunStore& store, std::int64_t id) {
  RunData d;
  auto run = store.load_run(id);
  if (!run.ok()) return run.error();
  d.run = std::move(*run);
  auto parsed = parse_plan(d.run.plan_json);
  if (parsed.ok()) d.plan = std::move(*parsed.plan);
  auto metrics = store.load_metrics(id);
  if (!metrics.ok()) return metrics.error();
  d.metrics = std::move(*metrics);
  auto clocks = store.load_ranks(id);
  if (!clocks.ok()) return clocks.error();
  d.timeline.clocks = std::move(*clocks);
  auto ranks = store.event_ranks(id);
  if (!ranks.ok()) return ranks.error();
  for (int rank : *ranks) {
    auto events = store.load_events(id, rank);
    if (!events.ok()) return events.error();
    for (const trace::Event& e : *events) {
      if (e.kind != trace::EventKind::Step) continue;
      d.first_steps.emplace_back(rank, e.start_ns);
      break;
    }
    d.timeline.events.emplace_back(rank, std::move(*events));
  }
  d.timeline.layer_names = analysis::layer_names_by_id(d.run.plan_json);
  return d;
}

bool has_step(const RunData& d, int step) {
  for (const auto& [rank, events] : d.timeline.events)
    for (const trace::Event& e : events)
      if (e.kind == trace::EventKind::Step && e.step == step) return true;
  return false;
}

QString image_tag(Report& report, QImage image, const QString& alt) {
  report.images.push_back(std::move(image));
  return QStringLiteral("<p><img src=\"image:%1\" width=\"%2\" alt=\"%3\"></p>")
      .arg(report.images.size() - 1)
      .arg(std::min(report.images.back().width(), 680))
      .arg(alt.toHtmlEscaped());
}

double last_metric(const std::vector<trace::MetricRecord>& metrics, const std::string& name) {
  double v = std::nan("");
  for (const auto& m : metrics)
    if (m.name == name && m.step >= 0) v = m.value;  // ordered by step, then time
  return v;
}

// "one process on NVIDIA H200": the mode, and what it ran on where its ranks said.
std::string mode_on_device(const RunData& d) {
  const std::string device = analysis::devices_short(analysis::group_devices(d.timeline.clocks));
  const std::string mode = analysis::run_mode(d.run);
  return device.empty() ? mode : mode + " on " + device;
}

QString runs_table(const std::vector<RunData>& runs) {
  QString html = QStringLiteral(
      "<table width=\"100%\" border=\"1\" cellspacing=\"0\" cellpadding=\"3\"><tr><th></th><th>run</th><th>name</th><th>mode</th>"
      "<th>status</th><th>ranks</th><th>wall s</th><th>samples/s</th><th>final test accuracy</th></tr>");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const trace::RunRecord& r = runs[i].run;
    // Words and numbers stay whole ("Complete/d" wrapped in a narrow column); the name
    // and the mode wrap between words.
    html += QStringLiteral("<tr><td style=\"white-space:nowrap\"><font color=\"%1\">&#9632;</font> %2</td>"
                           "<td style=\"white-space:nowrap\">#%3</td><td>%4</td><td>%5</td>"
                           "<td style=\"white-space:nowrap\">%6</td><td align=\"right\">%7</td>"
                           "<td align=\"right\" style=\"white-space:nowrap\">%8</td>"
                           "<td align=\"right\" style=\"white-space:nowrap\">%9</td>"
                           "<td align=\"right\" style=\"white-space:nowrap\">%10</td></tr>")
                .arg(run_color(int(i)).name(), letter(i))
                .arg(r.id)
                .arg(esc(r.name), esc(mode_on_device(runs[i])), esc(ui::run_status_label(r.status)))
                .arg(r.world_size)
                // Unknown (an imported trace has no samples) is "-", as in every view, never 0;
                // a 20 ms trace's wall time is not "0.0".
                .arg(number(r.wall_s, r.wall_s < 1 ? 3 : 1),
                     number(r.samples_per_s() > 0 ? r.samples_per_s() : std::nan(""), 0),
                     percent(last_metric(runs[i].metrics, "test_accuracy")));
  }
  html += QStringLiteral("</table>");
  // What each run ran on in full, where its ranks said (runs before schema v7 did not).
  QStringList devices;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto groups = analysis::group_devices(runs[i].timeline.clocks);
    if (!analysis::any_device_recorded(groups)) continue;
    for (const std::string& line : analysis::device_lines(groups))
      devices << QStringLiteral("%1 %2").arg(runs.size() > 1 ? letter(i) : QString(), esc(line)).trimmed();
  }
  // Beside runs that said, one that did not is named, so no run's line is missing unexplained.
  for (std::size_t i = 0; i < runs.size() && !devices.isEmpty(); ++i)
    if (!analysis::any_device_recorded(analysis::group_devices(runs[i].timeline.clocks)))
      devices << QStringLiteral("%1 not recorded").arg(letter(i));
  if (!devices.isEmpty()) html += QStringLiteral("<p>Devices: ") + devices.join(QStringLiteral("<br>")) + QStringLiteral("</p>");
  return html;
}

// Why a run has no plan to show: an imported trace names its files; anything else is a
// stored plan this version cannot read.
QString no_plan_words(const trace::RunRecord& run) {
  const QJsonObject plan = QJsonDocument::fromJson(QByteArray::fromStdString(run.plan_json)).object();
  if (!plan.contains(QStringLiteral("imported")))
    return QStringLiteral("<p>The stored plan cannot be read by this version of Loom.</p>");
  QStringList files;
  for (const QJsonValue& f : plan.value(QStringLiteral("files")).toArray()) files << f.toString().toHtmlEscaped();
  return QStringLiteral("<p>No Loom plan: a PyTorch profiler trace imported from %1, a profile recorded "
                        "elsewhere. It has no model, batch or optimizer to show.</p>")
      .arg(files.isEmpty() ? QStringLiteral("its files") : files.join(QStringLiteral(", ")));
}

// The model table `loom-cli validate` prints, and the training settings.
QString plan_section(const RunData& d, std::size_t index) {
  QString html = QStringLiteral("<h3>Plan of %1 (#%2 %3)</h3>").arg(letter(index)).arg(d.run.id).arg(esc(d.run.name));
  if (!d.plan) return html + no_plan_words(d.run);
  const Plan& p = *d.plan;
  const QString length = p.training.steps > 0 ? QStringLiteral("%1 steps").arg(p.training.steps)
                                              : QStringLiteral("%1 epochs").arg(p.training.epochs);
  html += QStringLiteral("<p>Global batch %1, %2, %3 with learning rate %4, data %5, seed %6.</p>")
              .arg(p.training.batch)
              .arg(length, qs(std::string(optimizer_name(p.training.optimizer.kind))))
              .arg(p.training.optimizer.lr)
              .arg(qs(std::string(data_source_name(p.data.source))))
              .arg(p.training.seed);
  return html + pre(format_model_table(infer_model(p, nullptr)));
}

QString comparison_tables(const analysis::Comparison& c) {
  QString html = QStringLiteral("<h2>Figures</h2><p>Each value with its ratio to run A; &#9733; marks the better "
                                "run where one is better (docs/figures.md defines every figure).</p>"
                                "<table width=\"100%\" border=\"1\" cellspacing=\"0\" cellpadding=\"3\"><tr><th>figure</th>");
  for (std::size_t i = 0; i < c.runs.size(); ++i) html += QStringLiteral("<th>%1 #%2</th>").arg(letter(i)).arg(c.runs[i].id);
  html += QStringLiteral("</tr>");
  for (const auto& row : c.metrics) {
    if (std::none_of(row.values.begin(), row.values.end(), [](double v) { return std::isfinite(v); })) continue;
    html += QStringLiteral("<tr><td>%1%2</td>").arg(esc(row.label), row.unit.empty() ? QString() : " (" + esc(row.unit) + ")");
    for (std::size_t i = 0; i < row.values.size(); ++i) {
      QString cell = qs(text::format_compare_value(row.values[i]));
      const std::string ratio = text::format_compare_ratio(row.values[i], row.values[0], "\u00d7");
      if (i > 0 && !ratio.empty()) cell += QStringLiteral(" (%1)").arg(qs(ratio).toHtmlEscaped().replace(QChar(0xd7), "&times;"));
      if (int(i) == row.best) cell = QStringLiteral("<b>&#9733; %1</b>").arg(cell);
      html += QStringLiteral("<td align=\"right\">%1</td>").arg(cell);
    }
    html += QStringLiteral("</tr>");
  }
  html += QStringLiteral("</table>");
  const std::string split = text::format_step_time_split(c);
  if (!split.empty())
    html += QStringLiteral("<h3>Where the step time went</h3><p>Critical path per step against run A's, by part "
                           "(ms):</p>") + pre(split);
  if (!c.phases.empty()) {
    html += QStringLiteral("<h3>Phase diff</h3><table width=\"100%\" border=\"1\" cellspacing=\"0\" cellpadding=\"3\"><tr><th>role</th>"
                           "<th>phase</th>");
    for (std::size_t i = 0; i < c.runs.size(); ++i) html += QStringLiteral("<th>%1 ms</th>").arg(letter(i));
    html += QStringLiteral("</tr>");
    for (const auto& row : c.phases) {
      html += QStringLiteral("<tr><td>%1</td><td>%2</td>").arg(esc(row.role), esc(row.phase));
      for (double v : row.median_ms) html += QStringLiteral("<td align=\"right\">%1</td>").arg(qs(text::format_compare_value(v)));
      html += QStringLiteral("</tr>");
    }
    html += QStringLiteral("</table>");
  }
  return html;
}

// `loom-cli show`'s text for one run: summary, efficiencies, critical path.
Expected<QString> one_run_figures(store::RunStore& store, const RunData& d, Report& report, int width_px) {
  auto summary = analysis::summarize_run(store, d.run.id);
  if (!summary.ok()) return summary.error();
  std::vector<std::vector<trace::Event>> events;
  for (const auto& [rank, e] : d.timeline.events) {
    if (events.size() <= std::size_t(rank)) events.resize(std::size_t(rank) + 1);
    events[std::size_t(rank)] = e;
  }
  const auto paths = analysis::analyze_run_paths(d.run, d.timeline.clocks, std::move(events));
  const std::string text = text::format_summary(*summary) +
                           text::format_efficiency(analysis::pop_efficiency(summary->ranks)) +
                           text::format_path_analysis(paths, d.timeline.layer_names);
  return QStringLiteral("<h2>Figures</h2>") + pre(text) + QStringLiteral("<h3>Where each rank's time went</h3>") +
         image_tag(report, detail::breakdown_picture(*summary, width_px), QStringLiteral("breakdown"));
}

// The page's look in a browser; paged_document swaps in kPrintStyle, the page margins being
// the paper's. `show`'s text is small so that its widest table (about 140 characters) fits
// an A4 page, and wraps rather than leave the page where a line is longer.
constexpr const char* kScreenStyle = "body{font-family:sans-serif;max-width:60em;margin:1em auto}";
constexpr const char* kPrintStyle = "body{font-family:sans-serif}";

QString document(const QString& title, const QString& body) {
  return QStringLiteral("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>%1</title><style>%2"
                        "pre{font-size:6pt;white-space:pre-wrap}table{border-collapse:collapse;font-size:9pt}"
                        "img{max-width:100%}</style></head><body><h1>%1</h1>%3</body></html>")
      .arg(title.toHtmlEscaped(), QLatin1String(kScreenStyle), body);
}

}  // namespace

Expected<Report> build_report(store::RunStore& store, const ReportOptions& options) {
  if (options.runs.empty() || int(options.runs.size()) > analysis::kMaxCompared)
    return make_error(ErrorCode::InvalidArgument, "a report is of one run or of 2 to 6 runs",
                      "name the runs by id (loom-cli runs lists them)");
  std::vector<RunData> runs;
  for (std::int64_t id : options.runs) {
    auto d = read_run(store, id);
    if (!d.ok()) return d.error();
    runs.push_back(std::move(*d));
  }
  Report report;
  QStringList ids;
  for (const RunData& d : runs) ids << QStringLiteral("#%1").arg(d.run.id);
  report.title = runs.size() == 1 ? QStringLiteral("Loom report: run #%1 %2").arg(runs[0].run.id).arg(qs(runs[0].run.name))
                                  : QStringLiteral("Loom comparison: runs %1").arg(ids.join(QStringLiteral(", ")));
  QString body = QStringLiteral("<p>Made %1 from %2.</p>")
                     .arg(QDateTime::currentDateTime().toString(Qt::ISODate), esc(store.path())) +
                 runs_table(runs);
  if (runs.size() == 1) {
    auto figures = one_run_figures(store, runs[0], report, options.width_px);
    if (!figures.ok()) return figures.error();
    body += *figures;
  } else {
    analysis::CompareOptions compare;
    compare.target_accuracy = options.target_accuracy;
    auto c = analysis::compare_runs(store, options.runs, compare);
    if (!c.ok()) return c.error();
    body += comparison_tables(*c);
  }
  std::vector<detail::RunCurves> curves;
  std::vector<detail::RunTimeline> timelines;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const double batch = runs[i].plan ? double(runs[i].plan->training.batch) : 1.0;
    curves.push_back({QStringLiteral("%1 #%2 %3").arg(letter(i)).arg(runs[i].run.id).arg(qs(runs[i].run.name)), batch,
                      runs[i].metrics, runs[i].first_steps});
    timelines.push_back(runs[i].timeline);
  }
  body += QStringLiteral("<h2>Training curves</h2>") +
          image_tag(report, detail::curves_picture(curves, options.width_px), QStringLiteral("training curves"));
  body += QStringLiteral("<h2>Timelines at step %1</h2><p>From the start of step %1, the same time span for every "
                         "run.</p>").arg(options.step);
  std::vector<QImage> pictures = detail::timeline_pictures(timelines, options.step, options.width_px);
  for (std::size_t i = 0; i < pictures.size(); ++i) {
    body += QStringLiteral("<h3><font color=\"%1\">&#9632;</font> %2 #%3 %4</h3>")
                .arg(run_color(int(i)).name(), letter(i)).arg(runs[i].run.id).arg(esc(runs[i].run.name));
    if (!has_step(runs[i], options.step))
      body += QStringLiteral("<p>This run has no step %1: shown from its start.</p>").arg(options.step);
    body += image_tag(report, std::move(pictures[i]), QStringLiteral("timeline"));
  }
  for (std::size_t i = 0; i < runs.size(); ++i) body += plan_section(runs[i], i);
  report.html = document(report.title, body);
  return report;
}

QString self_contained_html(const Report& report) {
  QString html = report.html;
  for (std::size_t i = 0; i < report.images.size(); ++i) {
    QByteArray png;
    QBuffer buffer(&png);
    buffer.open(QIODevice::WriteOnly);
    report.images[i].save(&buffer, "PNG");
    html.replace(QStringLiteral("src=\"image:%1\"").arg(i),
                 QStringLiteral("src=\"data:image/png;base64,%1\"").arg(QString::fromLatin1(png.toBase64())));
  }
  return html;
}

Status write_report(const Report& report, const QString& path) {
  const QString format = QFileInfo(path).suffix().toLower();
  if (format == "html" || format == "htm") {
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate))
      return make_error(ErrorCode::Io, path.toStdString() + ": " + file.errorString().toStdString());
    const QByteArray bytes = self_contained_html(report).toUtf8();
    if (file.write(bytes) != bytes.size() || !file.flush())
      return make_error(ErrorCode::Io, path.toStdString() + ": " + file.errorString().toStdString());
    return {};
  }
  if (format == "pdf") {
    const std::unique_ptr<QTextDocument> doc = paged_document(report);
    QPdfWriter writer(path);
    writer.setPageSize(QPageSize(QPageSize::A4));
    writer.setPageMargins(QMarginsF(0, 0, 0, 0));  // the document's pages carry the margins
    writer.setTitle(report.title);
    writer.setCreator(QStringLiteral("Loom"));
    doc->print(&writer);
    if (!QFileInfo(path).exists() || QFileInfo(path).size() == 0)
      return make_error(ErrorCode::Io, path.toStdString() + " could not be written");
    return {};
  }
  return make_error(ErrorCode::InvalidArgument, path.toStdString() + ": a report is written as .html or .pdf",
                    "name the file report.html or report.pdf");
}

namespace {

constexpr double kLayoutDpi = 96, kMillimetre = kLayoutDpi / 25.4, kMarginMm = 15;

// A heading whose next block starts on a later page stands alone at its page's foot: it
// is moved to the next page, and the layout is looked at again (each move can push
// later ones), a few times at most.
void keep_headings_with_what_follows(QTextDocument& doc) {
  const double page = doc.pageSize().height();
  // Where a block's first line lands: a line that does not fit is pushed to the next page
  // while its block still starts on this one (an image after a heading).
  auto page_of = [&](const QTextBlock& b) {
    double top = doc.documentLayout()->blockBoundingRect(b).top();
    if (b.layout() && b.layout()->lineCount() > 0) top += b.layout()->lineAt(0).y();
    return int(top / page);
  };
  for (int pass = 0; pass < 8; ++pass) {
    bool moved = false;
    for (QTextBlock b = doc.begin(); b.isValid(); b = b.next()) {
      const QTextBlock next = b.next();
      if (b.blockFormat().headingLevel() == 0 || !next.isValid() || page_of(next) <= page_of(b)) continue;
      QTextCursor cursor(b);
      QTextBlockFormat format = b.blockFormat();
      format.setPageBreakPolicy(QTextFormat::PageBreak_AlwaysBefore);
      cursor.setBlockFormat(format);
      moved = true;
    }
    if (!moved) return;
  }
}

}  // namespace

std::unique_ptr<QTextDocument> paged_document(const Report& report) {
  auto doc = std::make_unique<QTextDocument>();
  for (std::size_t i = 0; i < report.images.size(); ++i)
    doc->addResource(QTextDocument::ImageResource, QUrl(QStringLiteral("image:%1").arg(i)), report.images[i]);
  doc->setHtml(QString(report.html).replace(QLatin1String(kScreenStyle), QLatin1String(kPrintStyle)));
  QTextFrameFormat root = doc->rootFrame()->frameFormat();
  root.setMargin(kMarginMm * kMillimetre);
  doc->rootFrame()->setFrameFormat(root);
  doc->setPageSize(QSizeF(210 * kMillimetre, 297 * kMillimetre));  // A4
  keep_headings_with_what_follows(*doc);
  return doc;
}

std::vector<QImage> render_pages(QTextDocument& doc, double scale) {
  const QSizeF page = doc.pageSize();
  std::vector<QImage> pages;
  for (int i = 0; i < doc.pageCount(); ++i) {
    QImage image(QSize(int(page.width() * scale), int(page.height() * scale)), QImage::Format_RGB32);
    image.fill(Qt::white);
    QPainter painter(&image);
    painter.scale(scale, scale);
    painter.translate(0, -i * page.height());
    doc.drawContents(&painter, QRectF(0, i * page.height(), page.width(), page.height()));
    pages.push_back(std::move(image));
  }
  return pages;
}

}  // namespace loom::ui::report
