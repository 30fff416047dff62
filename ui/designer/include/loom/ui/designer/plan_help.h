// What the designer says about a plan, in the window's own words: where a JSON path lives
// among the controls ("Strategy › Training › Global batch", "Devices › rank 2 › Host"),
// each strategy field's name and tooltip (what it is, the formula, what it means for this
// plan), and validation errors rephrased for the control a person touches rather than
// for the JSON file (core's reasons say 'give some layers "stage": 1'; the window says
// "place some layers on stage 1 in Placement"). Pure functions: tested without a display.
#pragma once

#include <QString>
#include <QStringList>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/core/status.h"

namespace loom::ui {

// The strategy form's fields by JSON path, in the order the form shows them; straggler
// fields are "/parallel/stragglers/N/rank" etc. and are not listed here.
const QStringList& strategyFieldPaths();
// "Global batch" for "/training/batch"; "" for a path the form has no field for.
QString strategyFieldName(const QString& path);
// The field's group box ("Training", "Data parallel", "Pipeline", "Sync", "Stragglers").
QString strategyFieldGroup(const QString& path);
// Tooltip for a strategy field: what it is, the formula where there is one, and a line on
// what the current value means for this plan (e.g. the bubble for its p and m). "" for an
// unknown path.
QString strategyFieldHelp(const loom::Plan& plan, const loom::ModelInfo& info, const QString& path);

// Where a JSON path is edited in the window: "Strategy › Pipeline › Stages",
// "Model › fc2 › Settings", "Placement › fc2", "Devices › rank 1 › Host". Paths the
// designer cannot edit name the plan file's section ("Plan file › data").
QString controlForPath(const loom::Plan& plan, const QString& path);

struct ShownError {
  QString place;  // controlForPath of the error
  QString text;   // the reason, with JSON advice turned into advice about controls
};
ShownError describePlanError(const loom::Plan& plan, const loom::PlanError& error);
// A reason alone, rephrased (what describePlanError puts in .text).
QString rephraseReason(const loom::Plan& plan, const QString& reason);

// Why a run cannot be resumed (host::prepare_resume's error), in the window's words: the
// resumed plan's invalid field named by its control, the command-line --replicas and the
// plan file's training.checkpoint_every said as a person in the window meets them.
// `plan`: the run's stored plan, where it parses (for layer names), else nullptr.
QString describeResumeError(const loom::Plan* plan, const loom::Error& error);

}  // namespace loom::ui
