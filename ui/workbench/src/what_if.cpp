// WhatIf (see what_if.h): the knobs applied to the plan, and the prediction redone.
#include "loom/ui/workbench/what_if.h"

#include <QElapsedTimer>

#include <algorithm>

#include "loom/store/run_store.h"
#include "loom/trace/machine.h"

namespace loom::ui {

namespace {

QString text_of(const Error& error) {
  QString text = QString::fromStdString(error.message);
  if (!error.hint.empty()) text += QStringLiteral(" (") + QString::fromStdString(error.hint) + QStringLiteral(")");
  return text;
}

int ranks_of(const Plan& plan) { return std::max(1, plan.parallel.data_parallel) * std::max(1, plan.parallel.stages); }

// Hosts like this machine, one rank each, joined by one link.
predict::Cluster hosts_like_this(int hosts, double bandwidth_gbs, double latency_us) {
  predict::Cluster c;
  c.name = "hosts like this one";
  c.hosts = std::max(1, hosts);
  c.devices_per_host = 1;
  c.between_hosts = {false, bandwidth_gbs, latency_us};
  return c;
}

}  // namespace

WhatIf::WhatIf(QObject* parent) : QObject(parent) {}

Expected<predict::Calibration> WhatIf::readCalibration(const QString& dbPath) {
  auto store = store::RunStore::open(dbPath.toStdString());
  if (!store.ok()) return store.error();
  return predict::calibrate(*store, machine::host_name());
}

void WhatIf::setCalibration(predict::Calibration calibration) {
  calibration_ = std::make_shared<const predict::Calibration>(std::move(calibration));
  std::string why;
  if (!link_set_by_user_)
    if (const auto learnt = predict::median_link(calibration_->links, &why)) {
      knobs_.bandwidth_gbs = learnt->bandwidth_gbs;
      knobs_.latency_us = learnt->latency_us;
      link_source_ = QString::fromStdString(why);
    }
  repredict();
}

void WhatIf::setCores(int cores) {
  cores_ = cores;
  repredict();
}

void WhatIf::setPlan(const Plan& plan) {
  plan_ = plan;
  knobs_.replicas = std::max(1, plan.parallel.data_parallel);
  knobs_.microbatches = std::max(1, plan.parallel.microbatches);
  knobs_.bucket_mb = plan.parallel.bucket_mb;
  repredict();
}

void WhatIf::setKnobs(const Knobs& knobs) {
  if (knobs.bandwidth_gbs != knobs_.bandwidth_gbs || knobs.latency_us != knobs_.latency_us) {
    link_set_by_user_ = true;
    link_source_.clear();
  }
  knobs_ = knobs;
  repredict();
}

void WhatIf::setTarget(Target target) {
  if (target == Target::ClusterFile && !file_cluster_) return;  // loadCluster first
  target_ = target;
  repredict();
}

bool WhatIf::loadCluster(const QString& path) {
  auto cluster = predict::load_cluster(path.toStdString());
  if (!cluster.ok()) {
    error_ = text_of(cluster.error());
    emit predicted();
    return false;
  }
  file_cluster_ = std::move(*cluster);
  setTarget(Target::ClusterFile);
  return true;
}

QString WhatIf::clusterName() const { return file_cluster_ ? QString::fromStdString(file_cluster_->name) : QString(); }

predict::MachineShape WhatIf::machine() const {
  const predict::Cluster* cluster = target_ == Target::ClusterFile    ? &*file_cluster_
                                    : target_ == Target::HostsLikeThis ? &hosts_cluster_
                                                                       : nullptr;
  return {cores_ > 0 ? cores_ : machine::cores_available(), cluster, knobs_.device_speed};
}

void WhatIf::repredict() {
  QElapsedTimer clock;
  clock.start();
  prediction_.reset();
  baseline_.reset();
  varied_.reset();
  error_.clear();
  if (plan_) {
    const ParallelSpec& p = plan_->parallel;
    auto laid = predict::with_layout(*plan_, {knobs_.replicas, std::max(1, p.stages), knobs_.microbatches, p.schedule, knobs_.bucket_mb});
    if (laid.ok()) varied_ = std::move(*laid);
    else error_ = text_of(laid.error());
    hosts_cluster_ = hosts_like_this(std::max(ranks_of(*plan_), varied_ ? ranks_of(*varied_) : 1), knobs_.bandwidth_gbs, knobs_.latency_us);
    predict::MachineShape as_is = machine();
    as_is.device_speed = 1;
    if (auto base = predict::predict_step(*plan_, *calibration_, as_is); base.ok()) baseline_ = std::move(*base);
    if (varied_) {
      auto prediction = predict::predict_step(*varied_, *calibration_, machine());
      if (prediction.ok()) prediction_ = std::move(*prediction);
      else error_ = text_of(prediction.error());
    }
  }
  last_ms_ = double(clock.nsecsElapsed()) / 1e6;
  emit predicted();
}

std::vector<predict::ScalePoint> WhatIf::scaling(int devices) {
  if (!varied_) return {};  // error() says why already
  auto curve = scalingWork(devices)();
  if (!curve.ok()) {
    error_ = text_of(curve.error());
    return {};
  }
  return std::move(*curve);
}

WhatIf::ScalingWork WhatIf::scalingWork(int devices) const {
  if (!varied_) return [] { return Expected<std::vector<predict::ScalePoint>>(make_error(ErrorCode::InvalidArgument, "no layout to scale")); };
  predict::MachineShape shape = machine();
  std::optional<predict::Cluster> cluster;
  if (target_ == Target::ThisMachine) devices = std::min(devices, std::max(1, shape.cores) * 4);
  if (target_ == Target::ClusterFile) {
    devices = std::min(devices, file_cluster_->devices());
    cluster = *file_cluster_;
  }
  if (target_ == Target::HostsLikeThis) cluster = hosts_like_this(devices, knobs_.bandwidth_gbs, knobs_.latency_us);
  return [plan = *varied_, calibration = calibration_, shape, cluster = std::move(cluster), devices]() mutable {
    shape.cluster = cluster ? &*cluster : nullptr;
    return predict::scaling_curve(plan, *calibration, shape, devices);
  };
}

// A cluster file: all its devices. Otherwise the varied plan's ranks, and at least this
// machine's cores (this machine) or 16 hosts (hosts like this one), so there is a choice.
int WhatIf::searchDevices() const {
  if (target_ == Target::ClusterFile) return file_cluster_->devices();
  const int ranks = varied_ ? ranks_of(*varied_) : plan_ ? ranks_of(*plan_) : 1;
  return std::max(ranks, target_ == Target::HostsLikeThis ? 16 : std::max(1, machine().cores));
}

std::vector<predict::Candidate> WhatIf::search() {
  if (!plan_) return {};
  auto ranked = searchWork()();
  if (!ranked.ok()) {
    error_ = text_of(ranked.error());
    return {};
  }
  return std::move(*ranked);
}

WhatIf::SearchWork WhatIf::searchWork() const {
  if (!plan_) return [] { return Expected<std::vector<predict::Candidate>>(make_error(ErrorCode::InvalidArgument, "no plan to search")); };
  predict::SearchSpace space;
  space.devices = searchDevices();
  predict::MachineShape shape = machine();
  std::optional<predict::Cluster> cluster;
  if (target_ == Target::ClusterFile) cluster = *file_cluster_;
  if (target_ == Target::HostsLikeThis) cluster = hosts_like_this(space.devices, knobs_.bandwidth_gbs, knobs_.latency_us);
  return [plan = *plan_, calibration = calibration_, shape, cluster = std::move(cluster), space]() mutable {
    shape.cluster = cluster ? &*cluster : nullptr;
    return predict::search_layouts(plan, *calibration, shape, space);
  };
}

}  // namespace loom::ui
