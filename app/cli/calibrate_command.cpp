// `loom-cli calibrate [PLAN] [--steps N]`: short real runs of a plan's model that give
// `predict`, `search` and the What-if dock their costs on this machine when the store has
// no history: the plan as written, one process with every core (at its batch and four
// times it), two replicas (the same; the larger with 1 KB buckets), and a two-stage
// 1F1B pipeline (each where the batch and the layers allow); an asynchronous plan, only
// as written. Each run is a
// measured run like any other, tagged "calibration".
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "loom/predict/calibration.h"
#include "loom/predict/layouts.h"
#include "loom/trace/machine.h"
#include "predict_common.h"

namespace loom::cli {

namespace {

constexpr std::int64_t kDefaultSteps = 60;
// Buckets of 1 KB: every gradient tensor of at least that size is all-reduced alone.
constexpr double kSmallBucketMb = 0.001;

struct Variant {
  std::string what;
  Plan plan;
};

// The layouts whose costs predicting this plan's neighbours needs: 1 and 2 BLAS-thread
// layers at a quarter to four times the batch a rank or micro-batch of the plan has (a
// layer's time per sample falls as the batch grows, so one size does not scale), the loss
// and optimizer at both, stage-to-stage messages, and all-reduces of the whole gradient
// and of 1 KB buckets (each tensor alone), whose sizes set the latency and bandwidth.
std::vector<Variant> variants_of(const Plan& plan) {
  std::vector<Variant> out{{"as planned", plan}};
  // An asynchronous plan's own run measures what predicting it needs at its crowding; its
  // layouts (which with_layout varies as synchronous ones) would not.
  if (plan.parallel.sync.mode != SyncMode::AllReduce) return out;
  const std::int64_t batch = plan.training.batch;
  const auto add = [&](const std::string& what, const predict::LayoutChoice& choice, int threads, std::int64_t batch_of_run) {
    Plan resized = plan;
    resized.training.batch = batch_of_run;
    auto laid = predict::with_layout(resized, choice);
    if (!laid.ok()) return;
    laid->training.threads = threads;
    for (const Variant& v : out)
      if (predict::configuration_of(v.plan) == predict::configuration_of(*laid)) return;  // the plan is one already
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

Status check_calibratable(const Plan& plan) {
  if (plan.serve) return make_error(ErrorCode::InvalidArgument, "serving plans are not predicted yet, so not calibrated");
  for (const DeviceSpec& d : plan.parallel.devices)
    if (d.host != "localhost")
      return make_error(ErrorCode::InvalidArgument, "calibrate runs on this machine: the plan's devices must be on localhost");
  return {};
}

std::optional<std::int64_t> parse_steps(const Args& args) {
  if (!args.steps) return kDefaultSteps;
  char* end = nullptr;
  const long long n = std::strtoll(args.steps->c_str(), &end, 10);
  if (end == args.steps->c_str() || *end != '\0' || n < 10 || n > 100000) return std::nullopt;
  return n;
}

}  // namespace

int cmd_calibrate(const Args& args) {
  auto plan = read_plan_argument(args, true);
  if (!plan) return kInvalidInput;
  const auto steps = parse_steps(args);
  if (!steps) {
    std::fprintf(stderr, "loom-cli: --steps needs a number of steps from 10 to 100000 (got '%s')\n", args.steps->c_str());
    return kInvalidInput;
  }
  if (Status s = check_calibratable(*plan); !s.ok()) {
    print_error(s.error());
    return kInvalidInput;
  }
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  nlohmann::json runs = nlohmann::json::array();
  for (Variant& v : variants_of(*plan)) {
    v.plan.name = plan->name + " (calibration: " + v.what + ")";
    v.plan.training.steps = *steps;
    v.plan.training.eval_every = 0;
    if (!args.json) std::fprintf(stderr, "calibrating: %s, %d rank%s, %lld steps\n", v.what.c_str(), world_size(v.plan),
                                 world_size(v.plan) == 1 ? "" : "s", static_cast<long long>(*steps));
    auto id = run_for_lesson(v.plan, *store);
    if (!id.ok()) {
      print_error(id.error());
      return kFailed;
    }
    if (Status tagged = store->set_tags(*id, {"calibration"}); !tagged.ok()) print_error(tagged.error());
    runs.push_back({{"id", *id}, {"what", v.what}, {"ranks", world_size(v.plan)}});
    if (!args.json) std::printf("  run %lld: %s\n", static_cast<long long>(*id), v.what.c_str());
  }
  auto calibration = predict::calibrate(*store, machine::host_name());
  if (!calibration.ok()) {
    print_error(calibration.error());
    return kFailed;
  }
  auto prediction = predict::predict_step(*plan, *calibration, {machine::cores_available(), nullptr});
  if (args.json) {
    nlohmann::json j = {{"runs", runs}, {"costs", calibration->costs.size()}, {"predicts_plan", prediction.ok()}};
    if (prediction.ok()) j["step_ms"] = prediction->step_ms;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("calibration of '%s': %zu costs from %zu runs; ", machine::host_name().c_str(), calibration->costs.size(),
                calibration->runs.size());
    if (prediction.ok()) std::printf("`loom-cli predict` gives %.3f ms a step for '%s'\n", prediction->step_ms, plan->name.c_str());
    else std::printf("the plan still cannot be predicted: %s\n", prediction.error().message.c_str());
  }
  return kOk;
}

}  // namespace loom::cli
