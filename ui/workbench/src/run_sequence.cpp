#include "loom/ui/workbench/run_sequence.h"

namespace loom::ui {

bool RunSequence::start(std::vector<Item> items) {
  if (active_ || items.empty()) return false;
  items_ = std::move(items);
  run_ids_.clear();
  active_ = true;
  requestNext();
  return true;
}

void RunSequence::abandon(const QString& reason) {
  active_ = false;
  emit failed(reason);
}

void RunSequence::requestNext() {
  const int index = int(run_ids_.size());
  const Item& item = items_[std::size_t(index)];
  emit runRequested(item.plan, item.label, index, int(items_.size()));
}

void RunSequence::onRunFinished(qint64 runId, loom::trace::RunStatus status, const QString& error) {
  if (!active_) return;  // not ours
  const int index = int(run_ids_.size());
  if (status != trace::RunStatus::Completed) {
    active_ = false;
    emit failed(tr("Run %1 (%2) ended %3%4")
                    .arg(runId)
                    .arg(items_[std::size_t(index)].label, QString::fromUtf8(trace::to_text(status)),
                         error.isEmpty() ? QString() : ": " + error));
    return;
  }
  run_ids_.append(runId);
  emit runCompleted(runId, index);
  if (run_ids_.size() < qsizetype(items_.size())) return requestNext();
  active_ = false;
  emit completed(run_ids_);
}

}  // namespace loom::ui
