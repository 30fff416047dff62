// PlanDocument: undo through whole-plan snapshots. A plan is a few kilobytes, so storing
// before/after copies is cheap and makes undo obviously correct for any edit, however
// many fields it touches (resizing the device list with the data-parallel degree, say).
#include "loom/ui/designer/plan_document.h"

#include <QRegularExpression>
#include <QSaveFile>
#include <QUndoCommand>

#include "loom/core/plan_limits.h"
#include "loom/trace/machine.h"
#include "loom/ui/designer/plan_help.h"

namespace loom::ui {

// One undo step: the plan before and after. Merging keeps the first 'before' and takes
// the newest 'after'; a merged step that ends where it began is dropped by the stack.
class PlanSnapshotCommand : public QUndoCommand {
 public:
  PlanSnapshotCommand(PlanDocument* doc, const QString& text, loom::Plan before, loom::Plan after, int key,
                      int generation)
      : QUndoCommand(text), doc_(doc), before_(std::move(before)), after_(std::move(after)), key_(key),
        generation_(generation) {}

  void undo() override { doc_->setPlan(before_); }
  void redo() override { doc_->setPlan(after_); }
  int id() const override { return key_ == 0 ? -1 : key_; }
  bool mergeWith(const QUndoCommand* other) override {
    auto* next = static_cast<const PlanSnapshotCommand*>(other);
    if (next->key_ != key_ || next->generation_ != generation_) return false;
    after_ = next->after_;
    setText(next->text());  // the newest value names the step: "Change Global batch to 128"
    setObsolete(before_ == after_);
    return true;
  }

 private:
  PlanDocument* doc_;
  loom::Plan before_;
  loom::Plan after_;
  int key_;
  int generation_;
};

PlanDocument::PlanDocument(QObject* parent) : QObject(parent) {
  connect(&undo_, &QUndoStack::cleanChanged, this, [this](bool clean) { emit modifiedChanged(!clean); });
  setPlan(loom::default_plan());
}

void PlanDocument::setPlan(const loom::Plan& plan) {
  plan_ = plan;
  errors_ = loom::validate_plan(plan_);  // includes infer_model's findings
  info_ = loom::infer_model(plan_, nullptr);
  // As loom-cli does before a run: a plan this machine cannot hold is an error here too.
  static const std::int64_t memory = loom::machine::physical_memory_bytes();
  if (errors_.empty()) errors_ = loom::limits::check_memory(plan_, info_, memory);
  emit planChanged();
}

QStringList PlanDocument::errorsAt(const QString& jsonPathPrefix) const {
  const std::string prefix = jsonPathPrefix.toStdString();
  QStringList out;
  for (const loom::PlanError& e : errors_) {
    const bool inside = prefix.empty() || e.path == prefix || e.path.rfind(prefix + "/", 0) == 0;
    if (inside) out << QString::fromStdString(e.reason);
  }
  return out;
}

QStringList PlanDocument::shownErrorsAt(const QString& jsonPathPrefix) const {
  const std::string prefix = jsonPathPrefix.toStdString();
  QStringList out;
  for (const loom::PlanError& e : errors_) {
    const bool inside = prefix.empty() || e.path == prefix || e.path.rfind(prefix + "/", 0) == 0;
    if (inside) out << describePlanError(plan_, e).text;
  }
  return out;
}

QString PlanDocument::runBlockedReason() const {
  if (errors_.empty()) return {};
  const ShownError first = describePlanError(plan_, errors_.front());
  QString text = QStringLiteral("%1: %2").arg(first.place, first.text);
  if (errors_.size() > 1) text += QStringLiteral(" (and %1 more)").arg(errors_.size() - 1);
  return text;
}

void PlanDocument::edit(const QString& description, const std::function<void(loom::Plan&)>& change, int mergeKey) {
  loom::Plan after = plan_;
  change(after);
  loom::assign_default_layer_names(after.model);
  if (after == plan_) return;
  undo_.push(new PlanSnapshotCommand(this, description, plan_, std::move(after), mergeKey, merge_generation_));
}

void PlanDocument::reset(const loom::Plan& plan, const QString& filePath) {
  undo_.clear();  // emits cleanChanged when the old history was modified
  file_path_ = filePath;
  endMerge();
  setPlan(plan);
}

namespace {
// Where a refused file's error is, in the designer's words ("Model › layer 2 › Settings ›
// out") with the JSON path after it for the text editor that will fix it. The plan was
// not read, so a layer is named by its number, not its name.
QString placeInFile(const loom::PlanError& e) {
  static const QRegularExpression layer(QStringLiteral("^/model/layers/(\\d+)(?:/(\\w+))?$"));
  const QString path = QString::fromStdString(e.path);
  QString place = describePlanError(loom::Plan{}, e).place;
  if (const auto m = layer.match(path); m.hasMatch()) {
    place = QObject::tr("Model › layer %1").arg(m.captured(1).toInt() + 1);
    const QString key = m.captured(2);
    if (key == QLatin1String("type")) place += QObject::tr(" › Type");
    else if (key == QLatin1String("stage")) place += QObject::tr(" › Stage");
    else if (!key.isEmpty() && key != QLatin1String("name")) place += QObject::tr(" › Settings › ") + key;
  }
  return QObject::tr("%1 (at %2 in the file)").arg(place, path);
}
}  // namespace

loom::Status PlanDocument::load(const QString& path) {
  loom::PlanResult result = loom::load_plan_file(path.toStdString());
  if (!result.ok()) {
    std::string message = "cannot open plan '" + path.toStdString() + "'";
    bool named_a_field = false;
    if (!result.errors.empty()) {
      const loom::PlanError& e = result.errors.front();
      named_a_field = !e.path.empty();
      const QString reason = describePlanError(loom::Plan{}, e).text;
      message += ": " + (named_a_field ? placeInFile(e).toStdString() + ": " : std::string()) + reason.toStdString();
      if (result.errors.size() > 1) message += " (and " + std::to_string(result.errors.size() - 1) + " more)";
    }
    // The designer holds only valid plans: the file is fixed where it lies.
    return loom::make_error(loom::ErrorCode::InvalidArgument, message,
                            named_a_field ? "fix that value in the file with a text editor, then open it again"
                                          : "fix the file where the message says, with a text editor, then open it again");
  }
  reset(*result.plan, path);
  return {};
}

loom::Status PlanDocument::save(const QString& path) {
  QSaveFile file(path);
  const std::string text = loom::plan_to_json(plan_) + "\n";
  if (!file.open(QIODevice::WriteOnly) || file.write(text.data(), static_cast<qint64>(text.size())) < 0 ||
      !file.commit()) {
    return loom::make_error(loom::ErrorCode::Io, "cannot write plan '" + path.toStdString() + "': " +
                                                     file.errorString().toStdString());
  }
  file_path_ = path;
  undo_.setClean();
  return {};
}

}  // namespace loom::ui
