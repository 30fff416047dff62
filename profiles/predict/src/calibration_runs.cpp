#include "loom/predict/calibration_runs.h"

#include "loom/predict/calibration.h"
#include "loom/predict/layouts.h"

namespace loom::predict {

namespace {

// Buckets of 1 KB: every gradient tensor of at least that size is all-reduced alone.
constexpr double kSmallBucketMb = 0.001;

// The layouts whose costs predicting this plan's neighbours needs: 1 and 2 BLAS-thread
// layers at a quarter to four times the batch a rank or micro-batch of the plan has (a
// layer's time per sample falls as the batch grows, so one size does not scale), the loss
// and optimizer at both, stage-to-stage messages, and all-reduces of the whole gradient
// and of 1 KB buckets (each tensor alone), whose sizes set the latency and bandwidth.
std::vector<CalibrationRun> variants_of(const Plan& plan) {
  std::vector<CalibrationRun> out{{"as planned", plan}};
  // An asynchronous plan's own run measures what predicting it needs at its crowding; its
  // layouts (which with_layout varies as synchronous ones) would not.
  if (plan.parallel.sync.mode != SyncMode::AllReduce) return out;
  const std::int64_t batch = plan.training.batch;
  const auto add = [&](const std::string& what, const LayoutChoice& choice, int threads, std::int64_t batch_of_run) {
    Plan resized = plan;
    resized.training.batch = batch_of_run;
    auto laid = with_layout(resized, choice);
    if (!laid.ok()) return;
    laid->training.threads = threads;
    for (const CalibrationRun& v : out)
      if (configuration_of(v.plan) == configuration_of(*laid)) return;  // the plan is one already
    out.push_back({what, std::move(*laid)});
  };
  const double bucket = plan.parallel.bucket_mb;
  add("one process", {1, 1, 1, Schedule::OneFOneB, bucket}, 0, batch);
  add("one process, 4x the batch", {1, 1, 1, Schedule::OneFOneB, bucket}, 0, 4 * batch);
  add("two replicas", {2, 1, 1, Schedule::OneFOneB, bucket}, 1, batch);
  add("two replicas, 4x the batch, 1 KB buckets", {2, 1, 1, Schedule::OneFOneB, kSmallBucketMb}, 1, 4 * batch);
  add("two-stage 1F1B, 4 micro-batches", {1, 2, 4, Schedule::OneFOneB, bucket}, 1, batch);
  return out;
}

bool names_other_hosts(const Plan& plan) {
  for (const DeviceSpec& d : plan.parallel.devices)
    if (d.host != "localhost") return true;
  return false;
}

// The runs for a plan across hosts: its layouts on this machine, each said so, then the
// plan as written, whose set-up measures the links between its hosts.
std::vector<CalibrationRun> across_hosts(const Plan& plan) {
  Plan here = plan;
  for (DeviceSpec& d : here.parallel.devices) d.host = "localhost";
  std::vector<CalibrationRun> out = variants_of(here);
  for (CalibrationRun& run : out) run.what += ", on this machine";
  out.push_back({"as planned, across its hosts", plan, true});
  return out;
}

}  // namespace

Status check_calibratable(const Plan& plan) {
  if (plan.serve) return make_error(ErrorCode::InvalidArgument, "serving plans are not predicted yet, so not calibrated");
  return {};
}

Expected<std::vector<CalibrationRun>> calibration_runs(const Plan& plan, std::int64_t steps) {
  if (Status s = check_calibratable(plan); !s.ok()) return s.error();
  std::vector<CalibrationRun> runs = names_other_hosts(plan) ? across_hosts(plan) : variants_of(plan);
  for (CalibrationRun& run : runs) {
    run.plan.name = plan.name + " (calibration: " + run.what + ")";
    run.plan.training.steps = steps;
    run.plan.training.eval_every = 0;
  }
  return runs;
}

}  // namespace loom::predict
