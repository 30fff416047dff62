// What each piece of a step costs the predictor, from one of two sources: this machine's
// calibration (keys, see calibration.h), or a cluster file's roofline device and links.
// The predictor asks in layers, samples, parameters and bytes and never sees which source
// answered. Costs the calibration lacks are collected, not failed on at the first, so one
// error can name all of them.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/predict/calibration.h"
#include "loom/predict/cluster.h"

namespace loom::predict {

class StepCosts {
 public:
  // device: the calibration's device tag for this plan's ranks; stretch: how far their
  // compute is stretched by ranks outnumbering cores. cluster: null for this machine.
  // speed: a what-if factor every compute cost is divided by (1: as calibrated).
  // threads_per_rank: the BLAS threads each rank gets, for finding the plan's configuration.
  StepCosts(const Plan& plan, const Calibration& calibration, const Cluster* cluster, std::string device, double stretch,
            std::vector<std::string>& notes, double speed = 1.0, int threads_per_rank = 0);

  double forward(const LayerInfo& layer, double samples) { return forward_at_speed(layer, samples) / speed_; }
  double backward(const LayerInfo& layer, double samples) { return backward_at_speed(layer, samples) / speed_; }
  double data(double samples) { return data_at_speed(samples) / speed_; }  // loading a micro-batch's inputs or labels
  double loss(double samples) { return loss_at_speed(samples) / speed_; }
  double optimizer(double params) { return optimizer_at_speed(params) / speed_; }
  double outer_step(double params) { return outer_step_at_speed(params) / speed_; }  // local SGD's
  // A bucket's all-reduce over these ranks; a message between two ranks.
  double allreduce(const std::vector<int>& ranks, double bytes);
  double send(int from, int to, double bytes);
  // What of a message holds its link, so that the next in the same direction waits: its
  // bytes over a cluster link's bandwidth; 0 for a calibrated message on this machine.
  double send_wire(int from, int to, double bytes) const;
  // A parameter server taking a pushed gradient: calibrated apart where measured, else a send.
  double push_receive(int from, int to, double bytes);
  // Time measured steps had beyond their spans, per step, for `ops` ops per rank.
  double residual(double ops);
  // The engine's meeting of every rank once a step (loss, correct answers and stop votes:
  // three floats) where these ranks span a cluster's links; 0 on one machine, where the
  // residual holds its microseconds.
  double step_meeting(const std::vector<int>& ranks);

  const std::set<std::string>& missing() const { return missing_; }

 private:
  // Calibrated costs by key (see find()): measured under this plan's crowding, under the
  // nearest other crowding, or unshared (then stretched by the crowding).
  enum class Source { Exact, OtherCrowding, Unshared };
  struct Found {
    const LinearCost* cost = nullptr;
    Source source = Source::Exact;
    std::string key;        // the key measured
    double crowding = 1.0;  // OtherCrowding: the crowding it was measured under
  };
  Found find(const std::string& key) const;
  Found nearest_crowding(const std::string& key) const;
  double cost(const std::string& key, double units, double stretch);
  double layer(const std::string& key, const LayerInfo& layer, double samples);
  double allreduce_calibrated(int replicas, double bytes);
  std::optional<double> crowded_allreduce(int replicas, double bytes);
  struct Sized {
    double work = 0, ms = 0;
  };
  std::vector<Sized> nearest_of_kind(const std::string& key, double work, double samples) const;
  static double work_exponent(const Sized& a, const Sized& b);
  void note(const std::string& text);

  double forward_at_speed(const LayerInfo& layer, double samples);
  double backward_at_speed(const LayerInfo& layer, double samples);
  double data_at_speed(double samples);
  double loss_at_speed(double samples);
  double optimizer_at_speed(double params);
  double outer_step_at_speed(double params);

  bool roofline() const { return cluster_ && !cluster_->device.calibrated; }
  bool mpi() const { return plan_.parallel.backend == CommBackend::Mpi; }
  double linked_allreduce_ms(const std::vector<int>& ranks, double bytes, std::string* algorithm) const;
  double roofline_ms(double flops, double bytes, int kernels) const;

  const Plan& plan_;
  const Calibration& cal_;
  const std::map<std::string, LinearCost>* own_ = nullptr;  // this configuration's (by_configuration), if measured
  const Cluster* cluster_;
  std::string device_;
  double stretch_;
  double speed_;
  std::vector<std::string>& notes_;
  std::set<std::string> missing_, noted_;
};

}  // namespace loom::predict
