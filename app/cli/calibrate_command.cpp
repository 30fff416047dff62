// `loom-cli calibrate [PLAN] [--steps N]`: the short real runs of
// loom/predict/calibration_runs.h, which give `predict`, `search` and the What-if dock
// their costs on this machine when the store has no history (and, for a plan on several
// hosts, the links between them); each a measured run like any other, tagged
// "calibration".
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "loom/predict/calibration.h"
#include "loom/predict/calibration_runs.h"
#include "loom/predict/predictor.h"
#include "loom/trace/machine.h"
#include "predict_common.h"

namespace loom::cli {

namespace {

std::optional<std::int64_t> parse_steps(const Args& args) {
  if (!args.steps) return predict::kCalibrationSteps;
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
  auto variants = predict::calibration_runs(*plan, *steps);
  if (!variants.ok()) {
    print_error(variants.error());
    return kInvalidInput;
  }
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  nlohmann::json runs = nlohmann::json::array();
  for (const predict::CalibrationRun& v : *variants) {
    if (!args.json) std::fprintf(stderr, "calibrating: %s, %d rank%s, %lld steps\n", v.what.c_str(), world_size(v.plan),
                                 world_size(v.plan) == 1 ? "" : "s", static_cast<long long>(*steps));
    auto id = run_for_lesson(v.plan, *store);
    if (!id.ok()) {
      print_error(id.error());
      if (v.across_hosts)
        std::fprintf(stderr, "loom-cli: the runs on this machine are stored and calibrate; the run across the plan's hosts "
                             "needs mpirun to reach them (ssh, or OMPI_MCA_plm_rsh_agent: docs/cluster.md)\n");
      return kFailed;
    }
    if (Status tagged = store->set_tags(*id, {predict::kCalibrationTag}); !tagged.ok()) print_error(tagged.error());
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
