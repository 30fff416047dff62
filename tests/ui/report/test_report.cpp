// Reports over a real store file with two runs written into it (two ranks, five steps of
// forward/backward spans, loss and accuracy metrics): the comparison's document names both
// runs and holds the figures, where the step time went, the phase diff and one picture per
// chart and timeline; one run's report holds `show`'s text; HTML is self-contained, PDF is
// a PDF; a wrong extension, an unknown run and too many runs are refused; `loom-cli report`
// writes both files and exits 2 on bad input.
#include <QAbstractTextDocumentLayout>
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTextBlock>
#include <QTextLayout>
#include <QtTest>

#include "loom/core/plan.h"
#include "loom/store/run_store.h"
#include "loom/test/events.h"
#include "loom/test/expect.h"
#include "loom/test/plans.h"
#include "loom/ui/report/report.h"

namespace {

using loom::trace::Event;
using loom::trace::EventKind;
using loom::testing::must_ok;

// On the compute stream, from a whole millisecond for a length that may not be whole.
Event span(EventKind kind, std::int64_t start_ms, double length_ms, int step) {
  const std::int64_t start_ns = start_ms * 1'000'000;
  return loom::testing::span_ns(kind, loom::trace::Stream::Compute, start_ns, start_ns + std::int64_t(length_ms * 1e6),
                                step);
}

// Two data-parallel ranks; each step `step_ms` long, most of it forward and backward. With
// `on_h200`, the ranks say they ran on H200s, written as a rank there writes it (no GPU
// here: the report's words are what is tested).
qint64 store_run(loom::store::RunStore& store, const char* name, double step_ms, bool on_h200 = false) {
  const loom::Plan plan = loom::testing::data_parallel_plan(name, 2);
  const std::int64_t id = *store.create_run(loom::store::new_run_record(plan, "test"));
  std::vector<loom::trace::MetricRecord> metrics;
  for (int rank = 0; rank < 2; ++rank) {
    loom::trace::RankRecord record;
    record.rank = rank;
    if (on_h200) {
      record.device_info.kind = "gpu";
      record.device_info.name = "NVIDIA H200";
      record.device_info.memory_bytes = 150'011'707'392LL;
      record.device_info.driver = "580.159.04";
    }
    must_ok(store.upsert_rank(id, record));
    std::vector<Event> events;
    for (int step = 0; step < 5; ++step) {
      const std::int64_t t = std::int64_t(step * step_ms);
      events.push_back(span(EventKind::Forward, t, step_ms * 0.3, step));
      events.push_back(span(EventKind::Backward, t + std::int64_t(step_ms * 0.3), step_ms * 0.6, step));
      events.push_back(span(EventKind::Step, t, step_ms, step));
      metrics.push_back({rank, step, (t + 1) * 1'000'000, "loss", 2.0 - 0.2 * step});
    }
    metrics.push_back({rank, 4, 5 * std::int64_t(step_ms) * 1'000'000, "test_accuracy", 0.5});
    must_ok(store.append_events(id, rank, events.data(), events.size()));
  }
  must_ok(store.append_metrics(id, metrics));
  must_ok(store.finish_run(id, loom::trace::RunStatus::Completed, 1.0, 640, ""));
  return id;
}

}  // namespace

class TestReport : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    db_ = dir_.filePath("runs.db");
    auto store = loom::store::RunStore::open(db_.toStdString());
    QVERIFY(store.ok());
    fast_ = store_run(*store, "fast", 10);
    slow_ = store_run(*store, "slow", 20, /*on_h200=*/true);
  }

  void comparisonReportHoldsFiguresAndPictures() {
    auto store = loom::store::RunStore::open(db_.toStdString());
    loom::ui::report::ReportOptions options;
    options.runs = {fast_, slow_};
    auto report = loom::ui::report::build_report(*store, options);
    QVERIFY2(report.ok(), report.ok() ? "" : report.error().describe().c_str());
    QCOMPARE(report->title, QString("Loom comparison: runs #%1, #%2").arg(fast_).arg(slow_));
    const QString& html = report->html;
    for (const char* text : {"fast", "slow", "all-reduce, 2 replicas", "step time, median", "Where the step time went",
                             "Phase diff", "forward", "Training curves", "Timelines at step 1", "Plan of B"})
      QVERIFY2(html.contains(text), text);
    // What each ran on: the slow run's ranks said; the fast run's did not.
    QVERIFY2(html.contains("all-reduce, 2 replicas on NVIDIA H200"), qPrintable(html.left(3000)));
    QVERIFY2(html.contains("Devices: B ranks 0-1: NVIDIA H200, 139.7 GiB, driver 580.159.04"), qPrintable(html.left(3000)));
    QVERIFY(!html.contains("Devices: A"));
    // The slow run's median step is twice the fast one's: its ratio says so.
    QVERIFY2(html.contains("20 (2.00&times;)"), qPrintable(html.mid(html.indexOf("step time, median"), 300)));
    // One curves picture and one timeline per run, each referenced once.
    QCOMPARE(report->images.size(), std::size_t(3));
    for (std::size_t i = 0; i < report->images.size(); ++i) {
      QVERIFY(!report->images[i].isNull() && report->images[i].width() >= 900);
      QCOMPARE(html.count(QString("src=\"image:%1\"").arg(i)), 1);
    }
  }

  // A PyTorch trace beside Loom runs: its accuracy is "-" (not "- %"), its plan section
  // says it is a profile imported from its files, its missing device is said, and its
  // timeline says it has no step 0 (its steps are 1-4; the Loom run's 0-4).
  void importedTraceSaysWhatItLacks() {
    auto store = loom::store::RunStore::open(db_.toStdString());
    loom::trace::RunRecord run;
    run.name = "pytorch rank0.json";
    run.world_size = 1;
    run.plan_json = R"({"imported": "kineto", "files": ["rank0.json"], "world_size": 1})";
    const std::int64_t id = *store->create_run(run);
    std::vector<Event> events;
    for (int step = 1; step <= 4; ++step) events.push_back(span(EventKind::Step, step * 10, 10, step));
    must_ok(store->append_events(id, 0, events.data(), events.size()));
    must_ok(store->finish_run(id, loom::trace::RunStatus::Completed, 0.05, 0, ""));
    loom::ui::report::ReportOptions options;
    options.runs = {slow_, id};
    options.step = 4;
    const QString at4 = loom::ui::report::build_report(*store, options)->html;
    QVERIFY(!at4.contains("has no step"));
    options.step = 0;
    const QString html = loom::ui::report::build_report(*store, options)->html;
    QVERIFY2(!html.contains("- %"), qPrintable(html.left(3000)));
    QVERIFY(html.contains("No Loom plan: a PyTorch profiler trace imported from rank0.json"));
    QVERIFY(html.contains("<br>B not recorded"));
    QCOMPARE(html.count("This run has no step 0: shown from its start."), 1);
    must_ok(store->delete_run(id));
  }

  void oneRunReportHoldsShowsText() {
    auto store = loom::store::RunStore::open(db_.toStdString());
    loom::ui::report::ReportOptions options;
    options.runs = {slow_};
    auto report = loom::ui::report::build_report(*store, options);
    QVERIFY(report.ok());
    QVERIFY(report->html.contains("steady"));          // format_summary's throughput basis
    QVERIFY(report->html.contains("critical path"));   // format_path_analysis
    QVERIFY(report->html.contains("device:        ranks 0-1: NVIDIA H200, 139.7 GiB"));  // format_summary's device line
    QCOMPARE(report->images.size(), std::size_t(3));   // breakdown, curves, timeline
  }

  void writesSelfContainedHtmlAndPdf() {
    auto store = loom::store::RunStore::open(db_.toStdString());
    loom::ui::report::ReportOptions options;
    options.runs = {fast_, slow_};
    auto report = loom::ui::report::build_report(*store, options);
    QVERIFY(report.ok());
    const QString html_path = dir_.filePath("r.html"), pdf_path = dir_.filePath("r.pdf");
    QVERIFY(loom::ui::report::write_report(*report, html_path).ok());
    QVERIFY(loom::ui::report::write_report(*report, pdf_path).ok());
    QFile html(html_path), pdf(pdf_path);
    QVERIFY(html.open(QIODevice::ReadOnly) && pdf.open(QIODevice::ReadOnly));
    const QByteArray text = html.readAll();
    QVERIFY(!text.contains("image:"));
    QCOMPARE(text.count("src=\"data:image/png;base64,"), 3);
    QVERIFY(pdf.read(5) == "%PDF-");
    QVERIFY(pdf.size() > 20000);  // the pictures are in it
    const loom::Status refused = loom::ui::report::write_report(*report, dir_.filePath("r.txt"));
    QVERIFY(!refused.ok() && refused.error().message.find(".html or .pdf") != std::string::npos);
  }

  // The PDF's pages, as write_report prints them, rendered as pictures: no content wider
  // than the page, nothing inked in the right margin of any page (text inside the page
  // box: "where the step time went" ran off the page), no heading alone at a page's foot.
  // With LOOM_REPORT_PAGES_DIR set, the pages are saved there as PNG files to look at
  // (LOOM_REPORT_LOOK=1 skips the width check, so that a failing layout can be seen).
  void pdfPagesKeepTheirContentInside_data() {
    QTest::addColumn<bool>("comparison");
    QTest::newRow("comparison of two runs") << true;
    QTest::newRow("one run") << false;
  }
  void pdfPagesKeepTheirContentInside() {
    QFETCH(bool, comparison);
    auto store = loom::store::RunStore::open(db_.toStdString());
    loom::ui::report::ReportOptions options;
    options.runs = comparison ? std::vector<std::int64_t>{fast_, slow_} : std::vector<std::int64_t>{slow_};
    auto report = loom::ui::report::build_report(*store, options);
    QVERIFY(report.ok());
    const std::unique_ptr<QTextDocument> doc = loom::ui::report::paged_document(*report);
    const QSizeF page = doc->pageSize();
    if (!qEnvironmentVariableIsSet("LOOM_REPORT_LOOK")) QVERIFY2(doc->documentLayout()->documentSize().width() <= page.width() + 1,
             qPrintable(QString("content %1 wide on a %2 page").arg(doc->documentLayout()->documentSize().width()).arg(page.width())));
    auto page_of = [&](const QTextBlock& b) {  // where the block's first line is drawn
      double top = doc->documentLayout()->blockBoundingRect(b).top();
      if (b.layout()->lineCount() > 0) top += b.layout()->lineAt(0).y();
      return int(top / page.height());
    };
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next()) {
      if (b.blockFormat().headingLevel() == 0 || !b.next().isValid()) continue;
      QVERIFY2(page_of(b.next()) == page_of(b), qPrintable("heading alone at a page foot: " + b.text()));
    }
    const std::vector<QImage> pages = loom::ui::report::render_pages(*doc);
    QVERIFY(pages.size() >= 2);
    const QString keep = qEnvironmentVariable("LOOM_REPORT_PAGES_DIR");
    const int margin = int(15 / 25.4 * 96);
    for (std::size_t i = 0; i < pages.size(); ++i) {
      if (!keep.isEmpty()) pages[i].save(QDir(keep).filePath(QString("%1-page-%2.png").arg(comparison ? "comparison" : "run").arg(i + 1)));
      const QImage& p = pages[i];
      for (int y = 0; y < p.height(); ++y)
        for (int x = p.width() - margin / 2; x < p.width(); ++x)
          QVERIFY2(p.pixel(x, y) == qRgb(255, 255, 255), qPrintable(QString("page %1: ink at %2,%3 in the right margin").arg(i + 1).arg(x).arg(y)));
    }
  }

  void badRequestsAreRefused() {
    auto store = loom::store::RunStore::open(db_.toStdString());
    loom::ui::report::ReportOptions options;
    options.runs = {fast_, 999};
    auto unknown = loom::ui::report::build_report(*store, options);
    QVERIFY(!unknown.ok() && unknown.error().code == loom::ErrorCode::NotFound);
    options.runs = {fast_, slow_, fast_, slow_, fast_, slow_, fast_};
    QVERIFY(!loom::ui::report::build_report(*store, options).ok());
  }

  void cliWritesTheFilesAndRefusesBadInput() {
    const QString html = dir_.filePath("cli.html"), pdf = dir_.filePath("cli.pdf");
    QCOMPARE(cli({"report", QString::number(fast_), QString::number(slow_), "--html", html, "--pdf", pdf, "--db", db_}), 0);
    QVERIFY(QFile::exists(html) && QFile::exists(pdf));
    QVERIFY2(out_.contains("wrote " + html), qPrintable(out_));
    QCOMPARE(cli({"report", "999", "--html", html, "--db", db_}), 2);
    QVERIFY2(err_.contains("999"), qPrintable(err_));
    QCOMPARE(cli({"report", QString::number(fast_), "--db", db_}), 2);
    QVERIFY2(err_.contains("--html FILE or --pdf FILE"), qPrintable(err_));
    QCOMPARE(cli({"report", QString::number(fast_), "--html", dir_.filePath("x.pdf"), "--db", db_}), 2);
    QCOMPARE(cli({"report", QString::number(fast_), "--html", html, "--db", dir_.filePath("none.db")}), 2);
    QVERIFY2(err_.contains("no run store"), qPrintable(err_));
    QCOMPARE(cli({"report", "--help"}), 0);
    QVERIFY(out_.contains("usage: loom-cli report"));
  }

 private:
  int cli(const QStringList& args) {
    QProcess p;
    p.start(LOOM_CLI, args);
    if (!p.waitForFinished(60000)) return -1;
    out_ = QString::fromUtf8(p.readAllStandardOutput());
    err_ = QString::fromUtf8(p.readAllStandardError());
    return p.exitCode();
  }

  QTemporaryDir dir_;
  QString db_, out_, err_;
  qint64 fast_ = 0, slow_ = 0;
};

QTEST_MAIN(TestReport)
#include "test_report.moc"
