// Serving a model (plan section "serve"): rank 0 is an inference server that batches
// requests, ranks 1..C are clients that send them at a chosen rate and time the replies.
//
// A request is one test sample. The server queues requests as they arrive and starts a
// batch when max_batch (B) are queued or when the oldest has waited timeout_ms (T),
// whichever comes first; the batch is the model's forward pass (traced per layer inside
// a Step span whose step is the batch index), after which every request in it gets its
// predicted class. Between batches the server records Idle spans: its idle time on the
// timeline. Clients are open-loop: request k of a client is due at its arrival time
// (constant spacing or a Poisson process at rate/C), whether or not earlier replies came.
// Server and clients pass a barrier first, so the clients' clocks start together (without
// it, ranks leaving setup up to 0.1 s apart stretched the first second of arrivals).
//
// What is measured (metrics, docs/figures.md "Serving"):
//   client ranks: latency_ms (step = request id): reply received - request sent, on the
//                 client's clock, so no clock alignment enters it;
//   server rank:  queue_wait_ms and request_batch (step = request id): arrival to the
//                 start of its batch, and the batch that served it; queue_descheduled_ms:
//                 how much of that wait the server thread spent runnable but without a
//                 core (ranks outnumbering cores), which no batching rule can avoid; batch_size,
//                 batch_compute_ms and batch_correct (step = batch index).
// Request ids are dense over all clients: request k of client c (1-based) is k*C + c-1.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/core/serve_schedule.h"
#include "loom/core/status.h"
#include "loom/data/dataset.h"
#include "loom/engine/message_tags.h"
#include "loom/engine/tensor.h"
#include "loom/trace/recorder.h"
#include "loom/trace/records.h"

namespace loom::engine {


using MetricHook = std::function<void(std::vector<trace::MetricRecord>&&)>;

struct ServeHooks {
  const std::atomic<bool>* stop = nullptr;  // clients stop sending new requests once set
  MetricHook on_metrics;                    // may be empty
};

// The arrivals and the batching rule (loom/core/serve_schedule.h), as the engine's own.
using loom::arrival_times_s;
using loom::batch_due;
using loom::client_request_count;

// Rank 0 of a serving plan. Builds the model (initial weights or serve.weights) at
// construction; serve() returns once every client has said it is done.
class InferenceServer {
 public:
  InferenceServer(const Plan& plan, const ModelInfo& info, const data::Dataset& test, trace::Recorder* recorder,
                  comm::Communicator* comm, kernels::Backend& backend = default_backend());
  ~InferenceServer();
  Status load_weights();  // serve.weights into the model; a no-op when it is empty
  Status serve(const ServeHooks& hooks);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Ranks 1..C of a serving plan.
Status run_client(const Plan& plan, const data::Dataset& test, trace::Recorder* recorder, comm::Communicator* comm,
                  const ServeHooks& hooks);

}  // namespace loom::engine
