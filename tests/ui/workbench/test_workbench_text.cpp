// The workbench's words, without a display: the launch log hands out whole lines once and
// the rank's JSON summary as a sentence; the caption, dock titles and window title name
// the run on screen (or the plan being designed) and say when the designer holds another
// plan; the example index parses and finds entries by file.
#include <QtTest>

#include "loom/core/plan.h"
#include "loom/ui/workbench/example_catalog.h"
#include "loom/ui/workbench/launch_log.h"
#include "loom/ui/workbench/run_subject.h"

using namespace loom::ui;

class TestWorkbenchText : public QObject {
  Q_OBJECT

 private slots:
  void logLinesAreWholeAndOnce() {
    LaunchLog log;
    QCOMPARE(log.append("launch: mpirun -n 2"), QString());  // no newline yet: held back
    QCOMPARE(log.append(" loom-rank\nrank 0 conn"), QString("launch: mpirun -n 2 loom-rank\n"));
    QCOMPARE(log.append("ected\n"), QString("rank 0 connected\n"));
    QCOMPARE(log.append("tail without newline"), QString());
    QCOMPARE(log.flush(), QString("tail without newline\n"));
    QCOMPARE(log.flush(), QString());
  }

  void summaryBecomesText() {
    const QString json = R"({"final_loss":0.4224465489387512,"samples_per_s":40545.7552845714,"steps":300,)"
                         R"("stopped":false,"test_accuracy":0.8405,"wall_s":0.9470781770000001,"world_size":4})";
    LaunchLog log;
    const QString out = log.append(json + "\n");
    QVERIFY2(!out.contains('{') && !out.contains("\"final_loss\""), qPrintable(out));
    QVERIFY2(out.startsWith("Summary (rank 0): 4 ranks"), qPrintable(out));
    QVERIFY2(out.contains("300 steps in 0.95 s"), qPrintable(out));
    QVERIFY2(!out.contains("samples/s"), qPrintable(out));  // one figure: the steady one, in the list and status bar
    QVERIFY2(out.contains("final loss 0.4224") && out.contains("test accuracy 84.05%"), qPrintable(out));
    QVERIFY(!out.contains("stopped"));
    // A field the window does not know is still shown; other JSON lines are left alone.
    QVERIFY(LaunchLog::readable(R"({"world_size":2,"samples_per_s":1,"new_field":7})").contains("new_field 7"));
    QCOMPARE(LaunchLog::readable(R"({"other":1})"), QString(R"({"other":1})"));
    QCOMPARE(LaunchLog::readable("rank 1 finished: completed"), QString("rank 1 finished: completed"));
  }

  void captionNamesTheRunOrThePlan() {
    loom::Plan designer = loom::default_plan();
    designer.name = "gpipe-mlp";
    ShownRun none;
    QVERIFY(runCaption(none, designer).startsWith("No run on screen"));
    QVERIFY(runCaption(none, designer).contains("gpipe-mlp"));
    QCOMPARE(dockTitle("Training", none), QString("Training"));
    QCOMPARE(windowTitleFor("gpipe_mlp.json", none), QString("gpipe_mlp.json[*] \u2014 Loom"));

    ShownRun run{12, loom::trace::RunStatus::Completed, designer};
    QCOMPARE(runCaption(run, designer), QString("Run 12 \u00b7 plan \u201cgpipe-mlp\u201d \u00b7 completed"));
    QCOMPARE(dockTitle("Training", run), QString("Training \u00b7 run 12"));
    QCOMPARE(windowTitleFor("gpipe_mlp.json", run), QString("gpipe_mlp.json[*] \u00b7 run 12 \u2014 Loom"));

    loom::Plan edited = designer;
    edited.parallel.microbatches = 4;
    QVERIFY(runCaption(run, edited).contains("changed since this run"));
    loom::Plan other = designer;
    other.name = "mlp-fashion";
    QVERIFY(runCaption(run, other).contains("not the plan in the designer (\u201cmlp-fashion\u201d)"));

    ShownRun prediction{14, loom::trace::RunStatus::Completed, designer};
    prediction.predicted = true;  // a stored prediction never ran: no status, "predicted"
    QCOMPARE(runCaption(prediction, designer), QString("Run 14 \u00b7 plan \u201cgpipe-mlp\u201d \u00b7 predicted, not measured"));

    ShownRun resumed{13, loom::trace::RunStatus::Running, designer, 12};
    QCOMPARE(runCaption(resumed, designer),
             QString("Run 13 \u00b7 plan \u201cgpipe-mlp\u201d \u00b7 running \u00b7 resumed from run 12"));

    // What the run ran on, once its ranks said (written as a rank on an H200 reports it).
    loom::trace::RankRecord rank{0, "gpu-node", "gpu 0"};
    rank.device_info.kind = "gpu";
    rank.device_info.name = "NVIDIA H200";
    rank.device_info.memory_bytes = 150'011'707'392LL;
    rank.device_info.nccl = "2.28.3";
    ShownRun on_gpu = run;
    loom::ui::setDevices(on_gpu, {rank});
    QCOMPARE(runCaption(on_gpu, designer),
             QString("Run 12 \u00b7 plan \u201cgpipe-mlp\u201d \u00b7 completed \u00b7 on NVIDIA H200"));
    QCOMPARE(loom::ui::runCaptionToolTip(on_gpu, designer),
             runCaption(on_gpu, designer) + "\nrank 0: NVIDIA H200, 139.7 GiB, NCCL 2.28.3");
    loom::trace::RankRecord cpu{0, "node", "cpu"};
    cpu.device_info.kind = "cpu";
    cpu.device_info.name = "AMD EPYC 7B13";
    cpu.device_info.blas_threads = 2;
    ShownRun on_cpu = run;
    loom::ui::setDevices(on_cpu, {cpu, [&] { auto r = cpu; r.rank = 1; return r; }()});
    QVERIFY(runCaption(on_cpu, designer).endsWith(QString("completed \u00b7 on cpu (AMD EPYC 7B13)")));
    QVERIFY(loom::ui::runCaptionToolTip(on_cpu, designer).endsWith("\nranks 0-1: cpu, AMD EPYC 7B13, 2 BLAS threads"));
    loom::ui::setDevices(on_gpu, {loom::trace::RankRecord{0, "node", "cpu"}});  // a run before v7
    QCOMPARE(runCaption(on_gpu, designer), runCaption(run, designer));
    QCOMPARE(loom::ui::runCaptionToolTip(on_gpu, designer), runCaption(run, designer));
  }

  void exampleIndexParses() {
    ExampleCatalog catalog(R"({"examples":[{"file":"a.json","title":"A","description":"d","look_at":"l"},)"
                           R"({"file":"b.json","title":"B","description":"","look_at":"l"}]})");
    QCOMPARE(catalog.examples().size(), std::size_t(2));
    QCOMPARE(catalog.find("a.json")->title, QString("A"));
    QCOMPARE(catalog.find("c.json"), nullptr);
    QCOMPARE(catalog.undescribed({"a.json", "b.json", "c.json"}), QStringList({"b.json", "c.json"}));
    QCOMPARE(ExampleCatalog::toolTip(*catalog.find("a.json")), QString("d\nLook at: l"));
    QVERIFY(!ExampleCatalog("not json").error().isEmpty());
  }
};

QTEST_MAIN(TestWorkbenchText)
#include "test_workbench_text.moc"
