// The default plan (an MLP on real Fashion-MNIST) reaches at least 85% test accuracy
// within its 3 epochs. This is the slow test of the suite (seconds on two cores).
#include <QtTest>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/data/dataset.h"
#include "loom/engine/rank_setup.h"
#include "loom/engine/data_parallel_trainer.h"

using namespace loom;

class AccuracyTest : public QObject {
  Q_OBJECT
 private slots:
  void defaultPlanReaches85PercentIn3Epochs() {
    const Plan plan = default_plan();
    QCOMPARE(plan.training.epochs, 3);
    auto data = data::load_dataset(plan.data);
    QVERIFY2(data.ok(), data.ok() ? "" : data.error().describe().c_str());
    std::vector<PlanError> errors;
    const ModelInfo info = infer_model(plan, &errors);
    QVERIFY(errors.empty());
    engine::apply_thread_count(plan, 1);
    engine::Trainer trainer(plan, info, *data, nullptr);
    QElapsedTimer timer;
    timer.start();
    const engine::TrainResult result = trainer.run({});
    qInfo("default MLP: %lld steps, test accuracy %.4f, %.1f s", static_cast<long long>(result.steps),
          result.test.accuracy, double(timer.elapsed()) / 1000.0);
    QCOMPARE(result.steps, 3 * (60000 / plan.training.batch));
    QVERIFY2(result.test.accuracy >= 0.85, qPrintable(QString("accuracy %1").arg(result.test.accuracy)));
  }
};

QTEST_GUILESS_MAIN(AccuracyTest)
#include "test_accuracy.moc"
