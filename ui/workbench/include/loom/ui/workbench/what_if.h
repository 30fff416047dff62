// What-if: the designer's plan predicted again as the user changes replicas, micro-batches,
// bucket size, device speed and links (docs/prediction.md, "What-if"). QtCore only, so
// it is tested without a display; the What-if dock (WhatIfPanel) shows it.
//
// It predicts on one of three targets: this machine (its cores and measured messages),
// hosts like this one with one rank each joined by the links the user sets, or a cluster
// file. Each change predicts one step at once, synchronously: a step of a 1,024-rank plan
// takes a few milliseconds (bench/bench_predict.cpp), well inside the 100 ms a drag
// allows. Reading the calibration, the scaling curve to 1,024 devices and the layout
// search take longer, so each is also offered as work that owns copies of its inputs,
// which the dock runs off the GUI thread.
#pragma once

#include <QObject>
#include <QString>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "loom/core/plan.h"
#include "loom/predict/calibration.h"
#include "loom/predict/cluster.h"
#include "loom/predict/layouts.h"
#include "loom/predict/predictor.h"

namespace loom::ui {

class WhatIf : public QObject {
  Q_OBJECT

 public:
  enum class Target { ThisMachine, HostsLikeThis, ClusterFile };

  struct Knobs {
    int replicas = 1;
    int microbatches = 1;
    double bucket_mb = 25;
    double device_speed = 1;     // compute costs divided by this
    // Hosts like this one: the link between them. 10 Gb/s and 50 us until a calibration
    // holds a link its runs across hosts measured; that one until the user sets another.
    double bandwidth_gbs = 1.25;
    double latency_us = 50;
  };

  explicit WhatIf(QObject* parent = nullptr);

  // This machine's calibration from the store at dbPath (every stored run of this host is
  // read: 78 runs in 0.23-0.28 s on this project's VM, about 3 ms a run). Safe on any thread.
  static Expected<predict::Calibration> readCalibration(const QString& dbPath);
  void setCalibration(predict::Calibration calibration);
  // Where the link knobs came from: "" (the defaults or the user), else the runs across
  // hosts that measured it, in words.
  QString linkSource() const { return link_source_; }
  // The cores "this machine" has (0: the real count); tests fix it.
  void setCores(int cores);
  // The plan the knobs vary; the knobs start from it.
  void setPlan(const Plan& plan);
  void setKnobs(const Knobs& knobs);
  const Knobs& knobs() const { return knobs_; }
  void setTarget(Target target);
  Target target() const { return target_; }
  // Loads a cluster file and makes it the target; false (and error()) when it is wrong.
  bool loadCluster(const QString& path);
  QString clusterName() const;

  // The plan as the knobs lay it out (nullopt: the batch does not split so).
  const std::optional<Plan>& variedPlan() const { return varied_; }
  const std::optional<predict::Prediction>& prediction() const { return prediction_; }
  // The plan as it stands, for the difference the knobs make.
  const std::optional<predict::Prediction>& baseline() const { return baseline_; }
  QString error() const { return error_; }  // why there is no prediction; "" when there is one
  double lastPredictionMs() const { return last_ms_; }  // wall time of the last re-prediction
  int calibrationRuns() const { return int(calibration_->runs.size()); }
  const predict::Calibration& calibration() const { return *calibration_; }

  // Weak scaling of the varied plan on the target: 1, 2, 4, ... replicas up to `devices`
  // (this machine: its cores x 4 at most). Empty with an error() when it cannot.
  std::vector<predict::ScalePoint> scaling(int devices);

  // The layout search (predict/layouts.h) of the plan on the target, over searchDevices()
  // devices. Empty with an error() when it cannot.
  std::vector<predict::Candidate> search();
  int searchDevices() const;

  // scaling() and search() as work to run on another thread: each owns a copy of the
  // plan, the calibration and the target as they are now, so later knob changes do not
  // reach it. An error when there is nothing to compute (no plan, a batch that does not
  // split).
  using ScalingWork = std::function<Expected<std::vector<predict::ScalePoint>>()>;
  using SearchWork = std::function<Expected<std::vector<predict::Candidate>>()>;
  ScalingWork scalingWork(int devices) const;
  SearchWork searchWork() const;

 signals:
  void predicted();

 private:
  void repredict();
  predict::MachineShape machine() const;

  // Shared with the work in flight, never changed in place: a new calibration replaces it.
  std::shared_ptr<const predict::Calibration> calibration_ = std::make_shared<const predict::Calibration>();
  std::optional<Plan> plan_, varied_;
  Knobs knobs_;
  Target target_ = Target::ThisMachine;
  std::optional<predict::Cluster> file_cluster_;
  predict::Cluster hosts_cluster_;  // HostsLikeThis, rebuilt from the knobs
  std::optional<predict::Prediction> prediction_, baseline_;
  QString error_;
  double last_ms_ = 0;
  int cores_ = 0;
  bool link_set_by_user_ = false;
  QString link_source_;
};

}  // namespace loom::ui
