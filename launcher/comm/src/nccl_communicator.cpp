// The NCCL communicator (nccl.h). The communicator is created non-blocking
// (config.blocking = 0) so that joining it, too, can be watched and aborted: with a
// blocking ncclCommInitRank a rank whose peer never joins waits forever.
#include "loom/comm/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "loom/comm/unique_id.h"
#include "loom/comm/watchdog.h"
#include "loom/cuda/cuda_error.h"
#include "ready_request.h"

namespace loom::comm {
namespace {

static_assert(kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES, "unique_id.h must match nccl.h");

std::string nccl_hint(ncclResult_t r) {
  switch (r) {
    case ncclUnhandledCudaError: return "a CUDA call inside NCCL failed: check the GPU with nvidia-smi";
    case ncclSystemError: return "a system call or connection failed: check that the hosts reach each other (NCCL_DEBUG=WARN says more)";
    case ncclInvalidUsage: return "the ranks called NCCL differently, or two ranks share a GPU (NCCL_DEBUG=WARN says more)";
    case ncclRemoteError: return "a peer rank failed or disconnected";
    default: return "run with NCCL_DEBUG=WARN for NCCL's own account";
  }
}

Error nccl_error(const char* call, ncclResult_t r, const char* file, int line) {
  return make_error(ErrorCode::Unavailable,
                    std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " + ncclGetErrorString(r),
                    nccl_hint(r));
}

using cuda::cuda_error;

#define LOOM_NCCL_TRY(call)                                                         \
  do {                                                                              \
    const ncclResult_t loom_r_ = (call);                                            \
    if (loom_r_ != ncclSuccess && loom_r_ != ncclInProgress)                        \
      return nccl_error(#call, loom_r_, __FILE__, __LINE__);                        \
  } while (0)

// Device (or managed) memory goes over NCCL; anything else, page-locked staging included,
// is host memory for the wrapped communicator.
bool is_device_memory(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown pointer is host memory; clear the (not sticky) error
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// NCCL's thread-safety rules: operations on independent communicators of one GPU must
// not be issued from several threads at once, ncclCommGetAsyncError is not thread-safe,
// and ncclCommAbort needs that no thread is inside NCCL. Ranks here call NCCL from up to
// three threads (training, gradient communication, pipeline send progress), so every NCCL
// call is made holding this lock. Calls are short: waiting happens between them.
std::mutex& nccl_calls() {
  static std::mutex m;
  return m;
}

// What the communicator and its requests share: a request may finish after the call that
// made it returned, and an abort must be seen by every later operation.
struct NcclState {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  std::chrono::milliseconds timeout{};
  std::mutex events_mutex;
  std::vector<cudaEvent_t> spare_events;  // completed operations' events, for the next ones

  // A healthy communicator is finalized (its pending work flushed; on a non-blocking
  // communicator that completes in the background, so it is waited for, briefly) and then
  // destroyed; one in error, still joining, or not quiescent in time is aborted.
  ~NcclState() {
    (void)cudaSetDevice(device);
    if (comm) {
      std::string failure;
      bool finalized = comm_state(failure) == OpState::Done;
      if (finalized) {
        {
          std::lock_guard lock(nccl_calls());
          const ncclResult_t r = ncclCommFinalize(comm);
          finalized = r == ncclSuccess || r == ncclInProgress;
        }
        if (finalized) {
          WatchedOp op{[&] { return comm_state(failure); }, [&] { return failure; }, [] {}};
          finalized = wait_watched(op, std::min(timeout, std::chrono::milliseconds(10000)), "ncclCommFinalize").ok();
        }
      }
      std::lock_guard lock(nccl_calls());
      (void)(finalized ? ncclCommDestroy(comm) : ncclCommAbort(comm));
    }
    for (cudaEvent_t e : spare_events) (void)cudaEventDestroy(e);
    if (stream) (void)cudaStreamDestroy(stream);
  }
  // The completion events of operations, reused: creating and destroying one per call cost
  // about as much as the call itself where the operation is short (one rank's all-reduce,
  // bench_allreduce_nccl on an H200: Loom 0.56 of raw NCCL with an event made per call).
  Expected<cudaEvent_t> take_event() {
    {
      std::lock_guard lock(events_mutex);
      if (!spare_events.empty()) {
        cudaEvent_t e = spare_events.back();
        spare_events.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    LOOM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void give_back(cudaEvent_t e) {
    std::lock_guard lock(events_mutex);
    spare_events.push_back(e);
  }
  void abort() {
    std::lock_guard lock(nccl_calls());
    if (comm) (void)ncclCommAbort(comm);
    comm = nullptr;
  }
  // The communicator's own state: Running while NCCL still works on a non-blocking call.
  OpState comm_state(std::string& failure) const {
    if (!comm) {
      failure = "the communicator was aborted after an earlier failure";
      return OpState::Failed;
    }
    std::lock_guard lock(nccl_calls());
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    const ncclResult_t state = r != ncclSuccess ? r : async;
    if (state == ncclInProgress) return OpState::Running;
    if (state == ncclSuccess) return OpState::Done;
    failure = std::string(ncclGetErrorString(state)) + ": " + ncclGetLastError(comm) + " (hint: " + nccl_hint(state) + ")";
    return OpState::Failed;
  }
  // Waits until NCCL has taken a non-blocking call (joined, or enqueued an operation).
  Status settle(const std::string& what) {
    std::string failure;
    WatchedOp op{[&] { return comm_state(failure); }, [&] { return failure; }, [this] { abort(); }};
    return wait_watched(op, timeout, what);
  }
};

// An operation on the NCCL stream: done when the event recorded after it has passed.
class NcclRequest final : public Request {
 public:
  NcclRequest(std::shared_ptr<NcclState> state, cudaEvent_t done, std::string what)
      : state_(std::move(state)), done_(done), what_(std::move(what)) {}
  ~NcclRequest() override {
    (void)wait();
    state_->give_back(done_);  // passed (or the communicator is aborted): free for reuse
  }
  bool test() override {
    if (!finished_ && poll() != OpState::Running) (void)wait();
    return finished_;
  }
  Status wait() override {
    if (finished_) return result_;
    WatchedOp op{[this] { return poll(); }, [this] { return failure_; }, [this] { state_->abort(); }};
    result_ = wait_watched(op, state_->timeout, what_);
    finished_ = true;
    return result_;
  }

 private:
  // The communicator's state first: after an error or an abort the event may pass with
  // the operation's result undefined, and that must not read as success.
  OpState poll() {
    if (state_->comm_state(failure_) == OpState::Failed) return OpState::Failed;
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaSuccess) return OpState::Done;
    if (e == cudaErrorNotReady) return OpState::Running;
    failure_ = std::string(cudaGetErrorName(e)) + " " + cudaGetErrorString(e);
    return OpState::Failed;
  }

  std::shared_ptr<NcclState> state_;
  cudaEvent_t done_;
  std::string what_;
  std::string failure_;
  Status result_;
  bool finished_ = false;
};

// ---- point-to-point on device memory -------------------------------------------------
// MPI matches a receive to the sends of its (source, tag) in the order they were sent. A
// Link is a one-way NCCL communicator of two ranks for one (source, destination, tag):
// its two ranks issue its sends and receives in that same order, so matching is MPI's.
// Each link has its own stream, so a send that waits for its receiver (an NCCL send
// blocks its stream until then) never holds up another link: on one communicator, 1F1B's
// crossing activations and gradients would deadlock. A link is made on first use: the
// sender makes the NCCL id and sends it over `control` (a duplicate of the wrapped
// communicator, with the message's tag); both join without blocking. Every step of a
// message (id, joining, submitting, the stream's event) advances whenever any device
// message of the communicator is polled, and nothing here blocks a thread that the peer
// may be waiting for. Both ranks must pass the same kind of memory: a device send meets a
// device receive (a host one would go over MPI and never match), of the same size (NCCL
// cannot tell a mismatch; it hangs until the watchdog aborts the link).
struct P2pOp {
  void* data = nullptr;
  std::int64_t bytes = 0;
  bool submitted = false;  // the NCCL call was made (a non-blocking communicator may still be taking it)
  cudaEvent_t done = nullptr;  // recorded once NCCL has the call
  ~P2pOp() {
    if (done) (void)cudaEventDestroy(done);
  }
};

struct Link {
  bool sender = false;
  int peer = 0;  // the other rank, in the wrapped communicator
  int tag = 0;
  UniqueId id{};
  std::unique_ptr<Request> id_exchange;
  std::shared_ptr<NcclState> state;
  bool joined = false;
  std::deque<std::shared_ptr<P2pOp>> queue;  // not yet recorded on the stream, in call order
  std::string failure;                        // set once: the link is dead
};

class Links {
 public:
  Links(std::unique_ptr<Communicator> control, const NcclOptions& options)
      : control_(std::move(control)), options_(options) {}
  // In (source, destination, tag) order, the same on both ranks of every link: finalizing
  // a link waits for its other rank to finalize it too.
  ~Links() {
    for (auto& [key, link] : links_) link->state.reset();
  }

  // The link for a message to (sender) or from `peer` with `tag`, made on first use.
  std::shared_ptr<Link> link(bool sender, int peer, int tag) {
    std::lock_guard lock(mutex_);
    const int me = control_->rank();
    auto& slot = links_[sender ? std::make_tuple(me, peer, tag) : std::make_tuple(peer, me, tag)];
    if (slot) return slot;
    slot = std::make_shared<Link>();
    slot->sender = sender;
    slot->peer = peer;
    slot->tag = tag;
    if (sender) {
      ncclUniqueId id{};
      const ncclResult_t r = ncclGetUniqueId(&id);
      if (r != ncclSuccess) slot->failure = nccl_error("ncclGetUniqueId", r, __FILE__, __LINE__).describe();
      std::memcpy(slot->id.data(), id.internal, kUniqueIdBytes);
      if (r == ncclSuccess) slot->id_exchange = control_->isend(slot->id.data(), kUniqueIdBytes, peer, tag);
    } else {
      slot->id_exchange = control_->irecv(slot->id.data(), kUniqueIdBytes, peer, tag);
    }
    return slot;
  }
  void enqueue(Link& link, std::shared_ptr<P2pOp> op) {
    std::lock_guard lock(mutex_);
    link.queue.push_back(std::move(op));
  }
  struct Progress {
    std::string failure;         // of the polled message's link
    cudaEvent_t done = nullptr;  // the polled message's event, once recorded
  };
  // Moves every link as far as it can go without blocking, not only the polled one: a
  // rank blocked in a receive must still get its earlier sends to NCCL, or its peer,
  // blocked the same way, would never see them.
  Progress progress(Link& polled, const P2pOp& op) {
    std::lock_guard lock(mutex_);
    for (auto& [key, link] : links_) advance(*link);
    return {polled.failure, op.done};
  }
  void abort(Link& link) {
    std::lock_guard lock(mutex_);
    if (link.state) link.state->abort();
    if (link.failure.empty()) link.failure = "aborted";
  }
  std::chrono::milliseconds timeout() const { return options_.timeout; }

 private:
  void advance(Link& link) {
    if (link.failure.empty() && !link.state) start_joining(link);
    if (link.failure.empty() && link.state && !link.joined) link.joined = link.state->comm_state(link.failure) == OpState::Done;
    while (link.failure.empty() && link.joined && !link.queue.empty() && submit_front(link)) link.queue.pop_front();
  }
  void start_joining(Link& link) {
    if (link.id_exchange) {
      if (!link.id_exchange->test()) return;
      const Status got = link.id_exchange->wait();
      link.id_exchange.reset();
      if (!got.ok()) {
        link.failure = "the NCCL id did not cross: " + got.error().describe();
        return;
      }
    }
    auto state = std::make_shared<NcclState>();
    state->device = options_.device;
    state->timeout = options_.timeout;
    ncclUniqueId id{};
    std::memcpy(id.internal, link.id.data(), kUniqueIdBytes);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    cudaError_t e = cudaSetDevice(state->device);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      link.failure = cuda_error("creating the link's stream (cudaSetDevice, cudaStreamCreateWithFlags)", __FILE__, __LINE__,
                                e).describe();
      return;
    }
    ncclResult_t r;
    {
      std::lock_guard lock(nccl_calls());
      r = ncclCommInitRankConfig(&state->comm, 2, id, link.sender ? 0 : 1, &config);
    }
    if (r != ncclSuccess && r != ncclInProgress)
      link.failure = nccl_error("ncclCommInitRankConfig (a link)", r, __FILE__, __LINE__).describe();
    link.state = std::move(state);
  }
  // Submits the oldest message, then records its event once NCCL has taken it; true when
  // the event is recorded (the next message may go).
  bool submit_front(Link& link) {
    P2pOp& op = *link.queue.front();
    NcclState& s = *link.state;
    (void)cudaSetDevice(s.device);  // this thread's current GPU, for the call and the event
    if (!op.submitted) {
      const int other = link.sender ? 1 : 0;
      ncclResult_t r;
      {
        std::lock_guard lock(nccl_calls());
        r = link.sender ? ncclSend(op.data, std::size_t(op.bytes), ncclChar, other, s.comm, s.stream)
                        : ncclRecv(op.data, std::size_t(op.bytes), ncclChar, other, s.comm, s.stream);
      }
      if (r != ncclSuccess && r != ncclInProgress) {
        link.failure = nccl_error(link.sender ? "ncclSend" : "ncclRecv", r, __FILE__, __LINE__).describe();
        return false;
      }
      op.submitted = true;
    }
    if (s.comm_state(link.failure) != OpState::Done) return false;  // still taking it, or failed
    cudaEvent_t done = nullptr;
    cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(done, s.stream);
    if (e != cudaSuccess) {
      if (done) (void)cudaEventDestroy(done);
      link.failure = cuda_error("recording the message's event (cudaEventCreate, cudaEventRecord)", __FILE__, __LINE__,
                                e).describe();
      return false;
    }
    op.done = done;
    return true;
  }

  std::unique_ptr<Communicator> control_;
  NcclOptions options_;
  std::mutex mutex_;
  std::map<std::tuple<int, int, int>, std::shared_ptr<Link>> links_;  // by (source, destination, tag)
};

// A device message: done when its link has recorded it and the event has passed.
class P2pRequest final : public Request {
 public:
  P2pRequest(std::shared_ptr<Links> links, std::shared_ptr<Link> link, std::shared_ptr<P2pOp> op)
      : links_(std::move(links)), link_(std::move(link)), op_(std::move(op)) {}
  ~P2pRequest() override { (void)wait(); }
  bool test() override {
    if (!finished_ && poll() != OpState::Running) (void)wait();
    return finished_;
  }
  Status wait() override {
    if (finished_) return result_;
    const std::string what = std::string(link_->sender ? "ncclSend to rank " : "ncclRecv from rank ") +
                             std::to_string(link_->peer) + " (tag " + std::to_string(link_->tag) + ", " +
                             std::to_string(op_->bytes) + " bytes)";
    WatchedOp op{[this] { return poll(); }, [this] { return failure_; }, [this] { links_->abort(*link_); }};
    result_ = wait_watched(op, links_->timeout(), what);
    finished_ = true;
    return result_;
  }

 private:
  OpState poll() {
    const Links::Progress now = links_->progress(*link_, *op_);
    failure_ = now.failure;
    if (!failure_.empty()) return OpState::Failed;
    if (!now.done) return OpState::Running;
    const cudaError_t e = cudaEventQuery(now.done);
    if (e == cudaSuccess) return OpState::Done;
    if (e == cudaErrorNotReady) return OpState::Running;
    failure_ = std::string(cudaGetErrorName(e)) + " " + cudaGetErrorString(e);
    return OpState::Failed;
  }

  std::shared_ptr<Links> links_;
  std::shared_ptr<Link> link_;
  std::shared_ptr<P2pOp> op_;
  std::string failure_;
  Status result_;
  bool finished_ = false;
};

Expected<std::shared_ptr<NcclState>> join(Communicator& host, const NcclOptions& options);
Expected<std::unique_ptr<Communicator>> make_nccl_communicator_owning(std::unique_ptr<Communicator> host,
                                                                      const NcclOptions& options);

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& host, std::unique_ptr<Communicator> owned_host, std::shared_ptr<NcclState> state,
                   std::shared_ptr<Links> links, NcclOptions options)
      : host_(host),
        owned_host_(std::move(owned_host)),
        state_(std::move(state)),
        links_(std::move(links)),
        options_(options) {}

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }

  Status allreduce_sum(float* data, std::int64_t count) override { return iallreduce_sum(data, count)->wait(); }
  std::unique_ptr<Request> iallreduce_sum(float* data, std::int64_t count) override {
    if (!is_device_memory(data)) return host_.iallreduce_sum(data, count);
    return launch("ncclAllReduce of " + std::to_string(count) + " floats", [&](ncclComm_t c, cudaStream_t s) {
      return ncclAllReduce(data, data, std::size_t(count), ncclFloat, ncclSum, c, s);
    });
  }
  Status broadcast(void* data, std::int64_t bytes, int root) override {
    if (!is_device_memory(data)) return host_.broadcast(data, bytes, root);
    return launch("ncclBroadcast of " + std::to_string(bytes) + " bytes", [&](ncclComm_t c, cudaStream_t s) {
             return ncclBroadcast(data, data, std::size_t(bytes), ncclChar, root, c, s);
           })->wait();
  }
  std::unique_ptr<Request> isend(const void* data, std::int64_t bytes, int peer, int tag) override {
    if (!is_device_memory(data)) return host_.isend(data, bytes, peer, tag);
    return device_message(true, const_cast<void*>(data), bytes, peer, tag);
  }
  std::unique_ptr<Request> irecv(void* data, std::int64_t bytes, int peer, int tag) override {
    if (!is_device_memory(data)) return host_.irecv(data, bytes, peer, tag);
    return device_message(false, data, bytes, peer, tag);
  }
  Status barrier() override { return host_.barrier(); }

  std::unique_ptr<Communicator> split(int color, int key) override {
    std::unique_ptr<Communicator> group = host_.split(color, key);
    if (!group) return nullptr;
    auto made = make_nccl_communicator_owning(std::move(group), options_);
    if (!made.ok()) {
      std::fprintf(stderr, "loom: NCCL sub-communicator: %s\n", made.error().describe().c_str());
      return nullptr;
    }
    return std::move(*made);
  }

  std::string backend_name() const override { return "nccl"; }
  bool allows_concurrent_threads() const override { return host_.allows_concurrent_threads(); }
  bool accepts_device_memory() const override { return true; }

 private:
  // Enqueues one NCCL call on the communicator's stream (from whichever thread calls: the
  // current device is per thread, so it is set each time) and records its end.
  template <class Enqueue>
  std::unique_ptr<Request> launch(const std::string& what, Enqueue enqueue) {
    auto event = enqueue_and_record(what, enqueue);
    if (!event.ok()) return std::make_unique<ReadyRequest>(event.error());
    return std::make_unique<NcclRequest>(state_, *event, what);
  }
  template <class Enqueue>
  Expected<cudaEvent_t> enqueue_and_record(const std::string& what, Enqueue enqueue) {
    std::string failure;
    if (state_->comm_state(failure) == OpState::Failed) return make_error(ErrorCode::Unavailable, what + ": " + failure);
    LOOM_CUDA_CHECK(cudaSetDevice(state_->device));
    ncclResult_t enqueued;
    {
      std::lock_guard lock(nccl_calls());
      enqueued = enqueue(state_->comm, state_->stream);
    }
    if (enqueued != ncclSuccess && enqueued != ncclInProgress) return nccl_error(what.c_str(), enqueued, __FILE__, __LINE__);
    // A non-blocking communicator answers ncclInProgress while it is still enqueuing, and
    // ncclSuccess once the operation is on the stream: only the first needs a wait.
    if (enqueued == ncclInProgress) LOOM_TRY(state_->settle(what));
    auto done = state_->take_event();
    if (!done.ok()) return done.error();
    const cudaError_t recorded = cudaEventRecord(*done, state_->stream);
    if (recorded != cudaSuccess) {
      state_->give_back(*done);
      return cuda_error("cudaEventRecord", __FILE__, __LINE__, recorded);
    }
    return *done;
  }
  std::unique_ptr<Request> device_message(bool send, void* data, std::int64_t bytes, int peer, int tag) {
    if (peer < 0 || peer >= size() || peer == rank()) {
      return std::make_unique<ReadyRequest>(make_error(ErrorCode::InvalidArgument,
                                                      "device message to or from rank " + std::to_string(peer) +
                                                          ": not another rank of " + std::to_string(size())));
    }
    auto link = links_->link(send, peer, tag);
    auto op = std::make_shared<P2pOp>();
    op->data = data;
    op->bytes = bytes;
    links_->enqueue(*link, op);
    auto request = std::make_unique<P2pRequest>(links_, std::move(link), std::move(op));
    (void)request->test();  // start it: a send is on its way before anyone waits
    return request;
  }

  Communicator& host_;
  std::unique_ptr<Communicator> owned_host_;  // a split's group; null for the top level
  std::shared_ptr<NcclState> state_;
  std::shared_ptr<Links> links_;  // device point-to-point
  NcclOptions options_;
};

// Rank 0 makes the id and says first whether it could, so that a failure there ends
// every rank with a message instead of leaving them waiting for an id.
Status share_nccl_id(Communicator& host, ncclUniqueId& id) {
  int made = 1;
  Status failed;
  if (host.rank() == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      failed = nccl_error("ncclGetUniqueId", r, __FILE__, __LINE__);
      made = 0;
    }
  }
  LOOM_TRY(host.broadcast(&made, sizeof made, 0));
  if (!failed.ok()) return failed;
  if (!made) return make_error(ErrorCode::Unavailable, "rank 0 could not create the NCCL unique id", "see rank 0's error");
  UniqueId bytes{};
  std::memcpy(bytes.data(), id.internal, kUniqueIdBytes);
  LOOM_TRY(share_unique_id(host, bytes, 0));
  std::memcpy(id.internal, bytes.data(), kUniqueIdBytes);
  return {};
}

Expected<std::shared_ptr<NcclState>> join(Communicator& host, const NcclOptions& options) {
  auto state = std::make_shared<NcclState>();
  state->device = options.device;
  state->timeout = options.timeout;
  ncclUniqueId id{};
  LOOM_TRY(share_nccl_id(host, id));
  LOOM_CUDA_CHECK(cudaSetDevice(options.device));
  LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&state->stream, cudaStreamNonBlocking));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t initialized;
  {
    std::lock_guard lock(nccl_calls());
    initialized = ncclCommInitRankConfig(&state->comm, host.size(), id, host.rank(), &config);
  }
  LOOM_NCCL_TRY(initialized);
  LOOM_TRY(state->settle("ncclCommInitRankConfig (rank " + std::to_string(host.rank()) + " joining NCCL)"));
  return state;
}

// `host` is `owned` when not null (a split's group), else borrowed.
Expected<std::unique_ptr<Communicator>> make_over(Communicator& host, std::unique_ptr<Communicator> owned,
                                                  const NcclOptions& options) {
  // Collective, like the join, and first: it needs no GPU, so a rank whose GPU fails in
  // the join below cannot leave the others waiting in it.
  std::unique_ptr<Communicator> control = host.split(0, host.rank());
  if (!control) return make_error(ErrorCode::Unavailable, "could not duplicate the communicator for NCCL's link ids");
  auto state = join(host, options);
  if (!state.ok()) return state.error();
  auto links = std::make_shared<Links>(std::move(control), options);
  return std::unique_ptr<Communicator>(
      std::make_unique<NcclCommunicator>(host, std::move(owned), std::move(*state), std::move(links), options));
}

Expected<std::unique_ptr<Communicator>> make_nccl_communicator_owning(std::unique_ptr<Communicator> host,
                                                                      const NcclOptions& options) {
  Communicator& borrowed = *host;
  return make_over(borrowed, std::move(host), options);
}

}  // namespace

std::string nccl_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess || code <= 0) return {};
  // NCCL_VERSION(X,Y,Z) is X*10000 + Y*100 + Z since 2.9, X*1000 + Y*100 + Z before.
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

Expected<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& host, const NcclOptions& options) {
  return make_over(host, nullptr, options);
}

}  // namespace loom::comm
