// A one-rank plan trained in this process (see in_process_transport.h).
#include "loom/host/in_process_transport.h"

#include "loom/core/model_info.h"
#include "loom/data/dataset.h"
#include "loom/device/open_device.h"
#include "loom/engine/rank_setup.h"
#include "loom/engine/rank_body.h"
#include "loom/kernels/cpu.h"
#include "loom/store/store_sink.h"
#include "loom/trace/machine.h"
#include "loom/trace/run_writer.h"

namespace loom::host {
namespace {

JobProgress progress_of(const engine::StepProgress& p) {
  JobProgress progress;
  progress.step = p.step;
  progress.total_steps = p.total_steps;
  progress.loss = p.loss;
  progress.samples_per_s = p.samples_per_s;
  progress.ranks_connected = 1;
  return progress;
}

engine::RankHooks in_process_hooks(const RunContext& run, trace::RunWriter& writer) {
  engine::RankHooks hooks;
  hooks.stop = run.options.stop;
  hooks.checkpoint_dir = store::checkpoint_dir(run.store.path(), run.run_id);
  hooks.resume_step_dir = run.options.resume_step_dir;
  if (run.options.on_progress)
    hooks.on_step = [&run](const engine::StepProgress& p) { run.options.on_progress(progress_of(p)); };
  hooks.on_metrics = [&writer](std::vector<trace::MetricRecord>&& m) { writer.add_metrics(std::move(m)); };
  return hooks;
}

// Trains with a live writer; returns the error that made the run fail, if any. `loaded`
// is when the dataset was read (before the recorder existed): recorded as setup.
Status train_recorded(const RunContext& run, const data::TrainTest& data, std::pair<std::int64_t, std::int64_t> loaded,
                      engine::RankEnd& end) {
  std::vector<PlanError> ignored;
  const ModelInfo info = infer_model(run.plan, &ignored);
  const DeviceSpec device = run.plan.parallel.devices.empty() ? DeviceSpec{} : run.plan.parallel.devices.front();
  trace::Recorder recorder;
  trace::RankRecord rank{0, machine::host_name(), device::device_label(device), 0, 0, trace::now_ns(), 0};
  LOOM_TRY(run.store.upsert_rank(run.run_id, rank));
  // The plan's one device; a gpu that cannot be opened fails the run here, with CUDA's
  // words, and the stored rank says which device it was.
  auto backend = device::open_device(device, run.plan.training.tf32);
  if (!backend.ok())
    return make_error(backend.error().code, "cannot open " + device::device_label(device) + ": " + backend.error().message,
                      backend.error().hint);
  rank.device_info = device::describe_device(device, cpu::blas_threads());  // what it really is
  LOOM_TRY(run.store.upsert_rank(run.run_id, rank));
  store::StoreSink sink(run.store, run.run_id);
  trace::RunWriter writer(sink, 0, recorder);
  trace::record_setup(recorder, trace::SetupPhase::LoadData, loaded.first, loaded.second);
  const engine::RankContext context{run.plan, info, data, recorder, nullptr, **backend, trace::now_ns()};
  end = engine::run_rank_body(context, in_process_hooks(run, writer));
  // A capture the device refused (training.graph): the run went on uncaptured; say so once.
  if (!end.note.empty()) (void)run.store.append_log(run.run_id, end.note + "\n");
  Status written = writer.finish();
  if (!end.ok()) written = make_error(ErrorCode::Io, end.error);
  rank.events_recorded = std::int64_t(recorder.recorded());
  LOOM_TRY(run.store.upsert_rank(run.run_id, rank));
  return written;
}

}  // namespace

RunOutcome InProcessTransport::run(const RunContext& run) {
  const std::int64_t job_start = trace::now_ns();  // the whole job: loading data included
  engine::RankEnd end;
  Status status;
  const std::int64_t load_start = trace::now_ns();
  auto data = data::load_dataset(run.plan.data);
  const std::int64_t load_end = trace::now_ns();
  if (data.ok()) {
    engine::apply_thread_count(run.plan, 1);
    status = train_recorded(run, *data, {load_start, load_end}, end);
  } else {
    status = data.error();
  }
  RunOutcome outcome;
  outcome.status = !status.ok()           ? trace::RunStatus::Failed
                   : end.train.stopped    ? trace::RunStatus::Stopped
                                          : trace::RunStatus::Completed;
  if (!status.ok()) outcome.error = status.error().describe();
  outcome.wall_s = double(trace::now_ns() - job_start) * 1e-9;
  outcome.samples = end.train.samples;
  return outcome;
}

}  // namespace loom::host
