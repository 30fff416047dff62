// In-process run of a single-rank plan, recorded live into the run store.
#include "loom/engine/local_run.h"

#include <chrono>
#include <cstdlib>
#include <functional>
#include <new>
#include <string_view>
#include <thread>

#include "loom/analysis/analysis.h"
#include "loom/core/model_info.h"
#include "loom/data/dataset.h"
#include "loom/device/open_device.h"
#include "loom/engine/training_loops.h"
#include "loom/trace/run_writer.h"
#include "loom/kernels/cpu.h"
#include "loom/store/checkpoint_files.h"
#include "loom/store/run_heartbeat.h"
#include "loom/store/space_reserve.h"
#include "loom/store/store_sink.h"
#include "loom/trace/machine.h"
#include "loom/trace/recorder.h"

namespace loom::engine {
namespace {

// Trains with a live writer; returns the error that made the run fail, if any.
// `loaded` is when the dataset was read (before the recorder existed): recorded as setup.
Status train_recorded(const Plan& plan, const data::TrainTest& data, store::RunStore& store, std::int64_t run_id,
                      const LocalRunOptions& options, std::pair<std::int64_t, std::int64_t> loaded,
                      LocalRunOutcome& outcome) {
  std::vector<PlanError> ignored;
  const ModelInfo info = infer_model(plan, &ignored);
  const DeviceSpec device = plan.parallel.devices.empty() ? DeviceSpec{} : plan.parallel.devices.front();
  trace::Recorder recorder;
  trace::RankRecord rank{0, store::this_host_name(), device::device_label(device), 0, 0, trace::now_ns(), 0};
  LOOM_TRY(store.upsert_rank(run_id, rank));
  // The plan's one device; a gpu that cannot be opened fails the run here, with CUDA's
  // words, and the stored rank says which device it was.
  auto backend = device::open_device(device, plan.training.tf32);
  if (!backend.ok())
    return make_error(backend.error().code, "cannot open " + device::device_label(device) + ": " + backend.error().message,
                      backend.error().hint);
  rank.device_info = device::describe_device(device, cpu::blas_threads());  // what it really is
  LOOM_TRY(store.upsert_rank(run_id, rank));
  store::StoreSink sink(store, run_id);
  trace::RunWriter writer(sink, 0, recorder);
  trace::record_setup(recorder, trace::SetupPhase::LoadData, loaded.first, loaded.second);
  const std::int64_t build_start = trace::now_ns();
  const auto trainer = make_training_loop(plan, info, data, training_recorder(recorder), nullptr, **backend);
  if (!options.resume_step_dir.empty()) LOOM_TRY(trainer->resume_from(options.resume_step_dir));
  trace::record_setup(recorder, trace::SetupPhase::BuildModel, build_start);
  TrainerHooks hooks;
  hooks.checkpoint_dir = store::checkpoint_dir(store.path(), run_id);
  hooks.on_step = options.on_step;
  hooks.on_metrics = [&writer](std::vector<trace::MetricRecord>&& m) { writer.add_metrics(std::move(m)); };
  hooks.stop = options.stop;
  outcome.result = trainer->run(hooks);
  // A capture the device refused (training.graph): the run went on uncaptured; say so once.
  if (!outcome.result.graph_note.empty()) (void)store.append_log(run_id, outcome.result.graph_note + "\n");
  // Buffers only grow, so what the backend holds at the end is its peak (docs/figures.md).
  writer.add_metrics(device_memory_metrics(*trainer, 0, outcome.result.last_step - 1));
  Status written = writer.finish();
  if (!outcome.result.error.empty()) written = make_error(ErrorCode::Io, outcome.result.error);
  rank.events_recorded = std::int64_t(recorder.recorded());
  LOOM_TRY(store.upsert_rank(run_id, rank));
  return written;
}

}  // namespace

std::string loom_version() { return LOOM_VERSION; }

trace::Recorder* training_recorder(trace::Recorder& recorder) {
  const char* trace = std::getenv("LOOM_TRACE");
  return trace && std::string_view(trace) == "off" ? nullptr : &recorder;
}

// An exception escaping training (std::bad_alloc from a plan too large for this machine, a
// bug) must end the run as failed with its message, not leave it "running".
static Status catching_exceptions(const std::function<Status()>& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::Internal, "out of memory while training",
                      "make the model or the batch smaller; loom-cli validate estimates the memory a plan needs");
  } catch (const std::exception& e) {
    return make_error(ErrorCode::Internal, std::string("training stopped by an exception: ") + e.what());
  }
}

int apply_thread_count(const Plan& plan, int ranks_on_host) {
  int threads = plan.training.threads;
  if (threads <= 0) {
    const int cores = machine::cores_available();
    threads = std::max(1, cores / std::max(1, ranks_on_host));
  }
  cpu::set_blas_threads(threads);
  return threads;
}

Expected<LocalRunOutcome> run_and_record(const Plan& plan, store::RunStore& store, const LocalRunOptions& options) {
  trace::RunRecord record = store::new_run_record(plan, loom_version());
  record.resumed_from = options.resumed_from;
  auto run_id = store.create_run(record);
  if (!run_id.ok()) return run_id.error();
  const store::RunHeartbeat heartbeat(store.path(), *run_id);
  store::SpaceReserve reserve(store::space_reserve_path(store.path(), *run_id), store::kRunSpaceReserveBytes);
  LocalRunOutcome outcome;
  outcome.run_id = *run_id;
  const std::int64_t job_start = trace::now_ns();  // the whole job: loading data included
  Status status;
  const std::int64_t load_start = trace::now_ns();
  auto data = data::load_dataset(plan.data);
  const std::int64_t load_end = trace::now_ns();
  if (data.ok()) {
    apply_thread_count(plan, 1);
    status = catching_exceptions([&] {
      return train_recorded(plan, *data, store, outcome.run_id, options, {load_start, load_end}, outcome);
    });
  } else {
    status = data.error();
  }
  outcome.status = !status.ok()            ? trace::RunStatus::Failed
                   : outcome.result.stopped ? trace::RunStatus::Stopped
                                            : trace::RunStatus::Completed;
  if (!status.ok()) outcome.error = status.error().describe();
  Status figures = analysis::store_training_figures(store, outcome.run_id);
  if (!figures.ok()) (void)store.append_log(outcome.run_id, "analysis: " + figures.error().describe() + "\n");
  const double job_wall_s = double(trace::now_ns() - job_start) * 1e-9;
  Status finished = store.finish_run(outcome.run_id, outcome.status, job_wall_s, outcome.result.samples, outcome.error);
  if (!finished.ok() && reserve.release())  // a full disk: the room kept for closing the run
    finished = store.finish_run(outcome.run_id, outcome.status, job_wall_s, outcome.result.samples, outcome.error);
  if (!finished.ok()) return finished.error();
  if (outcome.status == trace::RunStatus::Completed) store::remove_checkpoints(store::checkpoint_dir(store.path(), outcome.run_id));
  return outcome;
}

}  // namespace loom::engine
