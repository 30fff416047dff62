// The What-if model without a display: the knobs re-lay and re-predict the plan exactly
// as the predictor does for the same plan; device speed divides compute; a batch that
// does not split is said, not predicted; hosts like this one use the link set; the
// scaling curve and the layout search come from the same knobs; and the What-if dock
// shows it (offscreen): figures, a scaling chart, searched layouts that open as plans.
#include <QApplication>
#include <QComboBox>
#include <QFile>
#include <QLabel>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "loom/ui/charts/scaling_chart.h"
#include "loom/ui/workbench/what_if.h"
#include "loom/ui/workbench/what_if_panel.h"
#include "predict_fixtures.h"

using loom::ui::WhatIf;

namespace {

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// The tiny plan with 128 samples, its costs and two cores fixed: the same on any machine.
struct Fixture {
  Plan plan = tiny_plan(R"({"devices": )" + devices(1) + "}", "0, 0, 0", 128);
  WhatIf what_if;
  Fixture() {
    what_if.setCores(2);
    what_if.setCalibration(costs_for(plan));
    what_if.setPlan(plan);
  }
  // The dock on the same plan, cores and costs.
  void show_in(loom::ui::WhatIfPanel& panel) const {
    panel.model()->setCores(2);
    panel.model()->setCalibration(costs_for(plan));
    panel.setPlan(plan);
  }
};

double total(const Prediction& p, EventKind kind) {
  double ms = 0;
  for (const PredictedSpan& s : p.spans)
    if (s.kind == kind) ms += s.end_ms - s.start_ms;
  return ms;
}

}  // namespace

class TestWhatIf : public QObject {
  Q_OBJECT

 private slots:
  void knobsRepredictAsThePredictorDoes() {
    Fixture f;
    QVERIFY2(f.what_if.prediction().has_value(), qPrintable(f.what_if.error()));
    const Prediction direct = must(loom::predict::predict_step(f.plan, costs_for(f.plan), {2}));
    QVERIFY(near(f.what_if.prediction()->step_ms, direct.step_ms));
    QSignalSpy predicted(&f.what_if, &WhatIf::predicted);
    WhatIf::Knobs k = f.what_if.knobs();
    k.replicas = 2;
    f.what_if.setKnobs(k);
    QCOMPARE(predicted.count(), 1);
    QCOMPARE(f.what_if.variedPlan()->parallel.data_parallel, 2);
    QCOMPARE(f.what_if.variedPlan()->training.batch, std::int64_t(128));  // the global batch stays
    const Prediction two = must(loom::predict::predict_step(*f.what_if.variedPlan(), costs_for(f.plan), {2}));
    QVERIFY(near(f.what_if.prediction()->step_ms, two.step_ms));
    QVERIFY(total(*f.what_if.prediction(), EventKind::AllReduce) > 0);
    QVERIFY(near(f.what_if.baseline()->step_ms, direct.step_ms));  // the plan as it stands
  }

  // Twice as fast a device: every forward and backward takes half as long.
  void deviceSpeedDividesCompute() {
    Fixture f;
    const double forward = total(*f.what_if.prediction(), EventKind::Forward);
    const double backward = total(*f.what_if.prediction(), EventKind::Backward);
    WhatIf::Knobs k = f.what_if.knobs();
    k.device_speed = 2;
    f.what_if.setKnobs(k);
    QVERIFY(near(total(*f.what_if.prediction(), EventKind::Forward), forward / 2));
    QVERIFY(near(total(*f.what_if.prediction(), EventKind::Backward), backward / 2));
  }

  void batchThatDoesNotSplitIsSaid() {
    Fixture f;
    WhatIf::Knobs k = f.what_if.knobs();
    k.replicas = 3;
    f.what_if.setKnobs(k);
    QVERIFY(!f.what_if.prediction());
    QVERIFY2(f.what_if.error().contains("does not split"), qPrintable(f.what_if.error()));
  }

  // Hosts like this one, one rank each: two replicas all-reduce fc2's and fc1's 204 bytes
  // in one bucket over the link set (1 GB/s, 1 ms), as Loom's MPI communicator does a
  // message this small: Open MPI's tree, 1 ms up and 1 ms down with the 204 bytes each
  // way (a ring's 2 steps would carry 102 bytes each).
  void hostsLikeThisUseTheLinkSet() {
    Fixture f;
    WhatIf::Knobs k = f.what_if.knobs();
    k.replicas = 2;
    k.bandwidth_gbs = 1;
    k.latency_us = 1000;
    f.what_if.setKnobs(k);
    f.what_if.setTarget(WhatIf::Target::HostsLikeThis);
    QVERIFY2(f.what_if.prediction().has_value(), qPrintable(f.what_if.error()));
    QVERIFY(near(total(*f.what_if.prediction(), EventKind::AllReduce) / 2, 2.0 + 2 * 204 / 1e6));
  }

  // A calibration holding a link its runs across hosts measured sets the link knobs (and
  // says where they came from) until the user sets the link; after that a new calibration
  // leaves it alone. Hosts like this one then predict over the learnt link: the same
  // 204-byte tree as above at 0.5 GB/s and 300 us, 2 x (0.3 + 204 bytes / 5e5 per ms).
  void linkStartsFromTheLearntOne() {
    Fixture f;
    loom::predict::Calibration cal = costs_for(f.plan);
    cal.links.push_back({"a", "b", {4}, loom::predict::Link{false, 0.5, 300}});
    f.what_if.setCalibration(cal);
    QCOMPARE(f.what_if.knobs().bandwidth_gbs, 0.5);
    QCOMPARE(f.what_if.knobs().latency_us, 300.0);
    QVERIFY2(f.what_if.linkSource().contains("as run 4 measured it"), qPrintable(f.what_if.linkSource()));
    WhatIf::Knobs k = f.what_if.knobs();
    k.replicas = 2;
    f.what_if.setKnobs(k);
    f.what_if.setTarget(WhatIf::Target::HostsLikeThis);
    QVERIFY2(f.what_if.prediction().has_value(), qPrintable(f.what_if.error()));
    QVERIFY(near(total(*f.what_if.prediction(), EventKind::AllReduce) / 2, 2 * (0.3 + 204 / 5e5)));
    QVERIFY(!f.what_if.linkSource().isEmpty());  // the replicas changed, not the link
    k.latency_us = 1000;
    f.what_if.setKnobs(k);
    QVERIFY(f.what_if.linkSource().isEmpty());
    cal.links.front().link.latency_us = 20;
    f.what_if.setCalibration(cal);
    QCOMPARE(f.what_if.knobs().latency_us, 1000.0);
  }

  void scalingAndSearchFollowTheKnobs() {
    Fixture f;
    f.what_if.setTarget(WhatIf::Target::HostsLikeThis);
    const auto curve = f.what_if.scaling(16);
    QVERIFY2(!curve.empty(), qPrintable(f.what_if.error()));
    QCOMPARE(curve.back().devices, 16);
    QCOMPARE(curve.front().efficiency, 1.0);
    QCOMPARE(f.what_if.searchDevices(), 16);
    const auto ranked = f.what_if.search();
    QVERIFY2(ranked.size() > 5, qPrintable(f.what_if.error()));
    QVERIFY(ranked.front().left_out.empty());
  }

  // The dock, offscreen: moving a knob re-predicts the figures and the chart; Search
  // fills the layouts, and Open hands the designer a plan laid out as the row says.
  void dockShowsFiguresChartAndLayouts() {
    Fixture f;
    loom::ui::WhatIfPanel panel;
    f.show_in(panel);
    panel.resize(1200, 260);
    panel.show();
    QVERIFY2(panel.figuresLabel()->text().contains("Step"), qPrintable(panel.figuresLabel()->text()));
    QVERIFY2(panel.figuresLabel()->text().contains("slowest rank: ") && panel.figuresLabel()->text().contains(" ms compute"),
             qPrintable(panel.figuresLabel()->text()));
    // How the figures were made, as rich text (Qt wraps only that): one paragraph a note.
    const QString about = panel.figuresLabel()->toolTip();
    QVERIFY2(Qt::mightBeRichText(about) && about.startsWith("<p>Changes in brackets"), qPrintable(about));
    panel.targetBox()->setCurrentIndex(1);
    emit panel.targetBox()->activated(1);
    QTRY_VERIFY(panel.scalingChart()->pointCount() >= 5);  // 1, 2, 4, 8, 16 ... hosts, off the GUI thread
    const QString before = panel.figuresLabel()->text();
    panel.speedSlider()->setValue(4);  // x2
    QVERIFY(panel.figuresLabel()->text() != before);  // at once
    QSignalSpy searched(&panel, &loom::ui::WhatIfPanel::searchShown);
    panel.searchLayouts();
    QTRY_COMPARE(searched.count(), 1);
    QVERIFY(panel.searchTable()->rowCount() >= 2);
    QSignalSpy open(&panel, &loom::ui::WhatIfPanel::openPlanRequested);
    auto* button = qobject_cast<QPushButton*>(panel.searchTable()->cellWidget(1, 5));
    QVERIFY(button);
    button->click();
    QCOMPARE(open.count(), 1);
    const Plan opened = open.at(0).at(0).value<loom::Plan>();
    QVERIFY(loom::validate_plan(opened).empty());
    QVERIFY(panel.searchTable()->item(1, 0)->text().startsWith(QString::number(opened.parallel.data_parallel) + " replica"));
    panel.replicasBox()->setValue(2);  // other knobs: the search is stale and cleared
    QCOMPARE(panel.searchTable()->rowCount(), 0);
  }

  // A search still running when a knob moves was for the old knobs: its result is dropped.
  // So is a scaling curve the knobs have moved past: only the last one is shown.
  void staleWorkIsDropped() {
    Fixture f;
    loom::ui::WhatIfPanel panel;
    f.show_in(panel);
    QTRY_VERIFY(!panel.working());
    QSignalSpy searched(&panel, &loom::ui::WhatIfPanel::searchShown);
    QSignalSpy scaled(&panel, &loom::ui::WhatIfPanel::scalingShown);
    panel.searchLayouts();
    panel.replicasBox()->setValue(2);  // before the search's result can arrive
    panel.replicasBox()->setValue(4);
    QTRY_VERIFY(!panel.working());
    QCOMPARE(searched.count(), 0);
    QCOMPARE(panel.searchTable()->rowCount(), 0);
    QCOMPARE(scaled.count(), 1);  // two knob changes, one curve: for 4 replicas
    QCOMPARE(panel.scalingChart()->pointCount(), int(panel.model()->scaling(1024).size()));
  }

  // Reading the calibration runs off the GUI thread; a store that cannot be read is said
  // beside the figures, which keep the calibration they had.
  void calibrationIsReadOffTheGuiThread() {
    Fixture f;
    loom::ui::WhatIfPanel panel;
    f.show_in(panel);
    panel.show();
    QTemporaryDir dir;
    QFile broken(dir.filePath("runs.db"));  // not a run store
    QVERIFY(broken.open(QIODevice::WriteOnly) && broken.write(QByteArray(4096, 'x')) == 4096);
    broken.close();
    QSignalSpy calibrated(&panel, &loom::ui::WhatIfPanel::calibrationShown);
    panel.storeChanged(broken.fileName());
    QVERIFY(panel.working());  // returned before the store was read
    QTRY_COMPARE(calibrated.count(), 1);
    QVERIFY2(panel.figuresLabel()->text().contains("could not be read"), qPrintable(panel.figuresLabel()->text()));
    QVERIFY(panel.figuresLabel()->text().contains("Step"));
  }
};

QTEST_MAIN(TestWhatIf)
#include "test_what_if.moc"
