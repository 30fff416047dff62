// The four kinds of work a rank's role gives it (see rank_body.h), and the factory that
// picks one; like training_loops.cpp, the only place above the strategies it names.
#include <memory>

#include "loom/engine/rank_setup.h"
#include "loom/engine/parameter_server.h"
#include "loom/engine/rank_body.h"
#include "loom/engine/serving.h"
#include "loom/engine/training_loops.h"

namespace loom::engine {
namespace {

// A worker, a pipeline stage or the one process of a one-rank plan: the training loop the
// plan calls for.
class TrainingWork final : public RankWork {
 public:
  Status build(const RankContext& c, const RankHooks& /*hooks*/) override {
    loop_ = make_training_loop(c.plan, c.info, c.data, training_recorder(c.recorder), c.comm, c.backend);
    return {};
  }
  Status resume(const std::string& step_dir) override { return loop_->resume_from(step_dir); }

  RankEnd run(const RankContext& c, const RankHooks& hooks) override {
    // The steps the run will take, for the host's progress (store_feeder.cpp).
    if (hooks.on_metrics && c.rank() == 0)
      hooks.on_metrics({{0, -1, c.started_ns, "total_steps", double(loop_->total_steps())}});
    TrainerHooks trainer_hooks;
    trainer_hooks.stop = hooks.stop;
    trainer_hooks.checkpoint_dir = hooks.checkpoint_dir;
    trainer_hooks.on_step = hooks.on_step;
    trainer_hooks.on_metrics = hooks.on_metrics;
    RankEnd end;
    end.train = loop_->run(trainer_hooks);
    end.note = end.train.graph_note;
    // Buffers only grow, so what the backend holds at the end is its peak (docs/figures.md).
    if (hooks.on_metrics) hooks.on_metrics(device_memory_metrics(*loop_, c.rank(), end.train.last_step - 1));
    if (!end.train.error.empty()) {
      end.error = end.train.error;
      return end;
    }
    end.status = end.train.stopped ? trace::RunStatus::Stopped : trace::RunStatus::Completed;
    end.exit_code = 0;
    return end;
  }

  // Collective: a pipeline's parameters are spread over its stages.
  Status finish(const RankContext& c, const RankHooks& hooks) override {
    if (hooks.dump_params.empty()) return {};
    auto params = loop_->gather_params();
    if (!params.ok()) return params.error();
    return c.rank() == 0 ? save_params(hooks.dump_params, *params) : Status{};
  }

 private:
  std::unique_ptr<TrainingLoop> loop_;
};

// A parameter server: serves its shard until every worker is done.
class ParameterServerWork final : public RankWork {
 public:
  Status build(const RankContext& c, const RankHooks& hooks) override {
    server_ = std::make_unique<ParameterServer>(c.plan, c.info, training_recorder(c.recorder), c.comm, c.backend);
    server_->set_checkpoints(hooks.checkpoint_dir, compute_total_steps(c.plan, c.data.train.count()));
    return {};
  }
  Status resume(const std::string& step_dir) override { return server_->resume_from(step_dir); }

  RankEnd run(const RankContext& /*c*/, const RankHooks& hooks) override {
    RankEnd end;
    Status served = server_->serve(hooks.on_updates);
    if (!served.ok()) {
      end.error = served.error().describe();
      return end;
    }
    end.status = trace::RunStatus::Completed;
    end.exit_code = 0;
    return end;
  }

  // The workers' rank 0 gathers the final parameters from the servers.
  Status finish(const RankContext& /*c*/, const RankHooks& hooks) override {
    return hooks.dump_params.empty() ? Status{} : server_->send_final_params();
  }

 private:
  std::unique_ptr<ParameterServer> server_;
};

// How a serving rank ended: stopped when asked to, else completed.
RankEnd served(const Status& status, const RankHooks& hooks) {
  RankEnd end;
  if (!status.ok()) {
    end.error = status.error().describe();
    return end;
  }
  end.status = hooks.stop && hooks.stop->load() ? trace::RunStatus::Stopped : trace::RunStatus::Completed;
  end.exit_code = 0;
  return end;
}

ServeHooks serve_hooks(const RankHooks& hooks) {
  ServeHooks serve;
  serve.stop = hooks.stop;
  serve.on_metrics = hooks.on_metrics;
  return serve;
}

// Serving's rank 0: answers the clients' requests with the model (serve.weights loaded).
class InferenceServerWork final : public RankWork {
 public:
  Status build(const RankContext& c, const RankHooks& /*hooks*/) override {
    server_ = std::make_unique<InferenceServer>(c.plan, c.info, c.data.test, &c.recorder, c.comm, c.backend);
    return server_->load_weights();
  }
  RankEnd run(const RankContext& /*c*/, const RankHooks& hooks) override {
    return served(server_->serve(serve_hooks(hooks)), hooks);
  }

 private:
  std::unique_ptr<InferenceServer> server_;
};

// Serving's other ranks: send requests on the plan's arrival schedule.
class ServingClientWork final : public RankWork {
 public:
  Status build(const RankContext& /*c*/, const RankHooks& /*hooks*/) override { return {}; }
  bool builds_model() const override { return false; }
  RankEnd run(const RankContext& c, const RankHooks& hooks) override {
    return served(run_client(c.plan, c.data.test, &c.recorder, c.comm, serve_hooks(hooks)), hooks);
  }
};

}  // namespace

std::unique_ptr<RankWork> make_rank_work(const RankContext& context) {
  switch (rank_role(context.plan, context.rank()).kind) {
    case RankKind::Server: return std::make_unique<ParameterServerWork>();
    case RankKind::InferenceServer: return std::make_unique<InferenceServerWork>();
    case RankKind::Client: return std::make_unique<ServingClientWork>();
    case RankKind::Worker:
    case RankKind::Unused: break;
  }
  return std::make_unique<TrainingWork>();
}

}  // namespace loom::engine
