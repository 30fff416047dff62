// The plan being designed: one loom::Plan with its inferred model and validation errors,
// an undo stack of whole-plan snapshots, and the file it came from. Every designer view
// edits only through PlanDocument::edit, so each change is undoable and every view
// refreshes from planChanged. No widgets: the document and its models test headless.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <QUndoStack>

#include <functional>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/core/status.h"

namespace loom::ui {

class PlanDocument : public QObject {
  Q_OBJECT

 public:
  explicit PlanDocument(QObject* parent = nullptr);  // starts with loom::default_plan()

  const loom::Plan& plan() const { return plan_; }
  const loom::ModelInfo& info() const { return info_; }             // infer_model of plan()
  const std::vector<loom::PlanError>& errors() const { return errors_; }  // validate_plan, incl. inference
  // Reasons of the errors at `jsonPathPrefix` or below it ("/parallel/devices" covers
  // "/parallel/devices/2/host" but "/model/layers/1" does not cover "/model/layers/10").
  QStringList errorsAt(const QString& jsonPathPrefix) const;
  // The same errors in the window's words (describePlanError in plan_help.h): what the
  // designer shows next to a field.
  QStringList shownErrorsAt(const QString& jsonPathPrefix) const;
  // "" when the plan can run, else "<control>: <reason>" of the first error in the
  // window's words ("Strategy › Training › Global batch: ..."), + " (and N more)".
  QString runBlockedReason() const;
  QUndoStack* undoStack() { return &undo_; }

  // Applies `change` to a copy of the plan and pushes it as one undo step. Consecutive
  // edits with the same non-zero mergeKey merge into one step until endMerge(). An edit
  // that changes nothing pushes nothing. Unnamed layers get default names.
  void edit(const QString& description, const std::function<void(loom::Plan&)>& change, int mergeKey = 0);
  // The next edit starts a new undo step even with the same key (mouse released, field left).
  void endMerge() { ++merge_generation_; }

  void reset(const loom::Plan& plan, const QString& filePath = {});  // new/open: clears undo history
  loom::Status load(const QString& path);  // the document is unchanged on failure
  loom::Status save(const QString& path);  // plan_to_json; marks clean; sets filePath
  bool isModified() const { return !undo_.isClean(); }
  QString filePath() const { return file_path_; }

 signals:
  void planChanged();  // after every edit, undo, redo, reset
  void modifiedChanged(bool modified);

 private:
  friend class PlanSnapshotCommand;
  void setPlan(const loom::Plan& plan);  // replaces the plan and recomputes info and errors

  loom::Plan plan_;
  loom::ModelInfo info_;
  std::vector<loom::PlanError> errors_;
  QUndoStack undo_;
  QString file_path_;
  int merge_generation_ = 0;
};

}  // namespace loom::ui
