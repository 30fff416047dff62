// Which run is on screen, in words: the caption over the timeline, the result docks'
// titles and the window title all come from here, so they always name the same run (or
// say that none is shown and which plan is being designed). QtCore only: tested
// without a display.
#pragma once

#include <QString>

#include <optional>
#include <string>
#include <vector>

#include "loom/core/plan.h"
#include "loom/trace/records.h"

namespace loom::ui {

// Every member initialised here, so {id, status, plan} leaves the rest unknown.
struct ShownRun {
  qint64 id = 0;           // 0: no run on screen
  std::optional<loom::trace::RunStatus> status{};  // until known: none
  std::optional<loom::Plan> plan{};  // the plan the run was trained with, once read
  qint64 resumed_from = 0;  // the run this one continues from a checkpoint (0: none)
  bool predicted = false;   // a stored prediction (loom-cli predict --store), not a measurement
  // What its ranks ran on (analysis/device_identity.h devices_named), once they said:
  // "NVIDIA H200", "cpu (AMD EPYC 7B13)"; and in full, a line per kind of device. Empty
  // until known, or never recorded.
  std::string device{};
  std::string device_detail{};
};

// Fills run.device and run.device_detail from the run's rank records.
void setDevices(ShownRun& run, const std::vector<loom::trace::RankRecord>& ranks);

// "run 12", or "" when no run is shown.
QString runLabel(const ShownRun& run);
// One line over the timeline: "Run 12 · plan “gpipe-mlp” · completed · on NVIDIA H200"
// (and "· resumed from run 11" for a run that continues another), with a warning
// when the designer holds another plan or has been edited since ("— not the plan in the
// designer"); without a run: "No run on screen · designing “gpipe-mlp”: press Run".
QString runCaption(const ShownRun& run, const loom::Plan& designer);
// The caption's tooltip: the caption, then the device's whole identity per rank.
QString runCaptionToolTip(const ShownRun& run, const loom::Plan& designer);
// A result dock's title: "Training · run 12", or just "Training".
QString dockTitle(const QString& base, const ShownRun& run);
// "gpipe_mlp.json[*] · run 12 — Loom" (the [*] is Qt's modified marker).
QString windowTitleFor(const QString& planLabel, const ShownRun& run);

}  // namespace loom::ui
