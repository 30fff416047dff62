// What the predictor's tests share: a tiny model (fc1 2 -> 8, relu, fc2 8 -> 3 on
// spirals) with a parallel section spliced in, hand-set costs for it, and span lookups.
#pragma once

#include <QtTest>

#include <string>
#include <vector>

#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/predict/calibration.h"
#include "loom/predict/predictor.h"
#include "loom/test/expect.h"

using loom::Plan;
using loom::predict::Calibration;
using loom::predict::LinearCost;
using loom::predict::PredictedSpan;
using loom::predict::Prediction;
using loom::trace::Event;
using loom::trace::EventKind;
using loom::testing::must;

// fc1 (2 -> 8), act (relu), fc2 (8 -> 3) on spirals; `parallel` is spliced in.
inline Plan tiny_plan(const std::string& parallel, const std::string& stages = "0, 0, 0", std::int64_t batch = 64) {
  std::vector<std::string> s;
  for (char c : stages)
    if (c >= '0' && c <= '9') s.push_back(std::string(1, c));
  const std::string json = R"({"format": "loom-plan/1", "name": "tiny",
    "model": {"input": [2], "layers": [{"type": "linear", "out": 8, "name": "fc1", "stage": )" + s[0] + R"(},
      {"type": "relu", "name": "act", "stage": )" + s[1] + R"(}, {"type": "linear", "out": 3, "name": "fc2", "stage": )" + s[2] + R"(}]},
    "data": {"source": "synthetic", "kind": "spirals", "classes": 3, "train_samples": 640, "test_samples": 128},
    "training": {"batch": )" + std::to_string(batch) + R"(, "steps": 5, "threads": 1, "optimizer": "sgd"},
    "parallel": )" + parallel + "}";
  loom::PlanResult r = loom::parse_plan(json);
  if (!r.ok()) qFatal("plan: %s %s", r.errors.front().path.c_str(), r.errors.front().reason.c_str());
  return *r.plan;
}

inline std::string devices(int n) {
  std::string d = "[";
  for (int i = 0; i < n; ++i) d += std::string(i ? ", " : "") + R"({"kind": "cpu"})";
  return d + "]";
}

inline const loom::LayerInfo& layer(const loom::ModelInfo& m, const std::string& name) {
  for (const auto& l : m.layers)
    if (l.name == name) return l;
  qFatal("no layer %s", name.c_str());
}

inline LinearCost at(double units, double ms) {
  LinearCost c;
  c.points = {{units, ms}};
  return c;
}

// Every cost of the tiny model on "cpu 1t" at 64 samples per chunk (proportional beyond).
inline Calibration costs_for(const Plan& plan, const std::string& device = "cpu 1t") {
  using namespace loom::predict;
  const loom::ModelInfo m = loom::infer_model(plan, nullptr);
  Calibration c;
  const double per_chunk = 64;
  c.costs[forward_key(layer(m, "fc1"), device)] = at(per_chunk, 1.0);
  c.costs[forward_key(layer(m, "act"), device)] = at(per_chunk, 0.5);
  c.costs[forward_key(layer(m, "fc2"), device)] = at(per_chunk, 2.0);
  c.costs[backward_key(layer(m, "fc1"), device)] = at(per_chunk, 3.0);
  c.costs[backward_key(layer(m, "act"), device)] = at(per_chunk, 0.25);
  c.costs[backward_key(layer(m, "fc2"), device)] = at(per_chunk, 1.5);
  c.costs[loss_key(plan, device)] = at(per_chunk, 0.4);
  c.costs[data_key(plan)] = at(per_chunk, 0.6);
  c.costs[optimizer_key(plan, device)] = at(51, 0.3);  // fc1 2x8+8, fc2 8x3+3 parameters
  c.costs[residual_key(false, device)] = at(2, 0.2);   // per step of 2 ops
  c.costs[allreduce_key(2, loom::CommBackend::Mpi)].points = {{96, 2.0}, {192, 2.0}};  // 2 ms, whatever the size
  return c;
}

inline std::vector<PredictedSpan> of(const Prediction& p, int rank, EventKind kind) {
  std::vector<PredictedSpan> out;
  for (const PredictedSpan& s : p.spans)
    if (s.rank == rank && s.kind == kind) out.push_back(s);
  return out;
}

