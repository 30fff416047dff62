// Plans run one after another through the main window (a lesson's runs, a calibration's):
// the sequence asks for each run with runRequested and learns of its end through
// onRunFinished, so the main window starts every run itself and each shows live and is
// stored like any other. The first run that does not complete ends the sequence.
#pragma once

#include <QList>
#include <QObject>
#include <QString>

#include <vector>

#include "loom/core/plan.h"
#include "loom/trace/records.h"

namespace loom::ui {

class RunSequence : public QObject {
  Q_OBJECT

 public:
  struct Item {
    loom::Plan plan;
    QString label;
  };

  explicit RunSequence(QObject* parent = nullptr) : QObject(parent) {}

  // Requests the first run; false when the list is empty or a sequence is active.
  bool start(std::vector<Item> items);
  bool isActive() const { return active_; }
  // Forgets the sequence (the runs already made stay stored); no signal.
  void cancel() { active_ = false; }
  // Ends the sequence with failed(reason): a requested run could not start.
  void abandon(const QString& reason);

 public slots:
  // Every run's end, from the main window; the sequence takes the one it asked for.
  void onRunFinished(qint64 runId, loom::trace::RunStatus status, const QString& error);

 signals:
  void runRequested(const loom::Plan& plan, const QString& label, int index, int count);
  void runCompleted(qint64 runId, int index);
  // Every run completed, in order.
  void completed(const QList<qint64>& runIds);
  // "Run 12 (two replicas) ended failed: …", or the reason given to abandon.
  void failed(const QString& message);

 private:
  void requestNext();

  bool active_ = false;
  std::vector<Item> items_;
  QList<qint64> run_ids_;
};

}  // namespace loom::ui
