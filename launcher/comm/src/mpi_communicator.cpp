// The MPI communicator: one rank per process under mpirun. MPI's headers appear only in
// this file. Errors are values: the communicators use MPI_ERRORS_RETURN and every MPI
// error code becomes a loom::Error carrying MPI_Error_string's text.
//
// Thread level: MPI_THREAD_SERIALIZED. Gradient sync may drive communication from a
// thread other than main (a communication thread that progresses requests while compute
// threads run backward); FUNNELED would forbid that. A Communicator is used by one thread
// at a time, so MULTIPLE (and the locking it costs inside Open MPI) is asked for only when
// MpiOptions::thread_multiple says two communicators will be busy at once (hybrid
// parallelism), and allows_concurrent_threads() reports whether MPI granted it.
//
// Waiting: Open MPI's blocking calls poll the transport on a full core for as long as they
// wait, so a rank whose peer is stopped or very slow would burn a core until the hang
// watchdog ends the job. Waits here poll with MPI_Test: back to back for kSpinFor, which
// covers ordinary training waits at full speed, then with a kNap sleep between polls.
// All-reduces are built on such waits too (MpiCommunicator::allreduce_sum); a broadcast
// enters only once every rank has arrived (a barrier waited for that way), so that its own
// spinning lasts as long as the transfer.
//
// Counts: MPI takes int counts, so operations larger than MpiOptions::max_count_per_call
// are split into several calls. Chunks of one message share a tag and MPI does not let
// messages on one (source, tag, communicator) overtake each other, so they arrive in order.
#include <mpi.h>

#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "loom/comm/mpi.h"
#include "loom/core/mpi_allreduce.h"

namespace loom::comm {
namespace {

Error mpi_error(int rc, const std::string& what) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  int error_class = MPI_ERR_OTHER;
  MPI_Error_class(rc, &error_class);
  // Errors in the caller's arguments are distinguished from a failed transport.
  const bool argument = error_class == MPI_ERR_COUNT || error_class == MPI_ERR_RANK ||
                        error_class == MPI_ERR_TAG || error_class == MPI_ERR_ROOT ||
                        error_class == MPI_ERR_TRUNCATE || error_class == MPI_ERR_BUFFER ||
                        error_class == MPI_ERR_ARG || error_class == MPI_ERR_COMM;
  return make_error(argument ? ErrorCode::InvalidArgument : ErrorCode::Io,
                    "mpi: " + what + ": " + std::string(text, static_cast<std::size_t>(length)),
                    argument ? "" : "check that every rank is alive and the network between them works");
}

Status check(int rc, const char* what) { return rc == MPI_SUCCESS ? Status() : Status(mpi_error(rc, what)); }

constexpr auto kSpinFor = std::chrono::milliseconds(50);
constexpr std::int64_t kRingSegment = 1024 * 1024;  // floats per ring message: 4 MiB
constexpr auto kNap = std::chrono::microseconds(500);

// MPI_Wait that stops spinning after kSpinFor (see the top of this file).
int wait_patiently(MPI_Request& request, MPI_Status& status) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    const int rc = MPI_Test(&request, &done, &status);
    if (rc != MPI_SUCCESS || done) return rc;
    if (std::chrono::steady_clock::now() - start >= kSpinFor) std::this_thread::sleep_for(kNap);
  }
}

// Sums `count` floats over the ranks of `comm` in place: a ring all-reduce (reduce-scatter,
// then all-gather; each rank sends 2(P-1)/P of the data, as Open MPI's own ring does)
// built on point-to-point messages waited for patiently, so that a rank whose peer stops
// mid-collective sleeps instead of spinning. Each block is summed on one rank and copied
// to the others, so every rank gets bitwise the same result. Messages go in segments of
// at most `segment` floats, summed as they arrive. For 4, 8, ... ranks: recursive
// doubling instead (doubling()).
class RingAllreduce {
 public:
  RingAllreduce(MPI_Comm comm, std::int64_t segment) : comm_(comm), segment_(segment) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  // `how`: Ring or RecursiveDoubling, as mpi_allreduce_algorithm chose.
  int run(float* data, std::int64_t count, MpiAllreduce how) {
    const int p = size_;
    if (how == MpiAllreduce::RecursiveDoubling) return doubling(data, count);
    int rc = MPI_SUCCESS;
    // Reduce-scatter: in step s, block (rank - s - 1) gains one term; then all-gather: the
    // reduced blocks travel on.
    for (int s = 0; s < p - 1 && rc == MPI_SUCCESS; ++s)
      rc = exchange(data, count, mod(rank_ - s), mod(rank_ - s - 1));
    for (int s = 0; s < p - 1 && rc == MPI_SUCCESS; ++s)
      rc = exchange(data, count, mod(rank_ + 1 - s), mod(rank_ - s), false);
    return rc;
  }

 private:
  struct Block {
    std::int64_t at, n;
    std::int64_t segments(std::int64_t segment) const { return (n + segment - 1) / segment; }
  };
  using Requests = std::vector<MPI_Request>;

  int mod(int b) const { return ((b % size_) + size_) % size_; }
  Block block(std::int64_t count, int b) const {
    const std::int64_t at = count * b / size_;
    return {at, count * (b + 1) / size_ - at};
  }
  std::int64_t seg_n(const Block& b, std::int64_t i) const { return std::min(segment_, b.n - i * segment_); }
  // Segment i of block b, in a buffer holding the whole data (`data`) or only b (scratch).
  float* seg(float* base, const Block& b, std::int64_t i, bool whole) const {
    return base + (whole ? b.at : 0) + i * segment_;
  }
  void post(Requests& into, bool send, float* at, std::int64_t n, int peer) {
    into.push_back(MPI_REQUEST_NULL);
    note(send ? MPI_Isend(at, int(n), MPI_FLOAT, peer, 0, comm_, &into.back())
              : MPI_Irecv(at, int(n), MPI_FLOAT, peer, 0, comm_, &into.back()));
  }
  void wait(MPI_Request& r) {
    MPI_Status status;
    note(wait_patiently(r, status));
  }
  void note(int rc) {
    if (rc != MPI_SUCCESS && error_ == MPI_SUCCESS) error_ = rc;
  }

  // One ring step: block `out` to the right neighbour, block `in` from the left, added
  // into `data` when `add`, else stored there.
  int exchange(float* data, std::int64_t count, int out, int in, bool add = true) {
    error_ = MPI_SUCCESS;
    const Block o = block(count, out), b = block(count, in);
    float* into = add ? scratch(b.n) : data;
    Requests recvs, sends;
    for (std::int64_t i = 0; i < b.segments(segment_); ++i) post(recvs, false, seg(into, b, i, !add), seg_n(b, i), left());
    for (std::int64_t i = 0; i < o.segments(segment_); ++i) post(sends, true, seg(data, o, i, true), seg_n(o, i), right());
    for (std::int64_t i = 0; i < b.segments(segment_); ++i) {
      wait(recvs[std::size_t(i)]);
      if (add && error_ == MPI_SUCCESS) add_into(seg(data, b, i, true), seg(into, b, i, false), seg_n(b, i));
    }
    for (MPI_Request& r : sends) wait(r);
    return error_;
  }

  // 4, 8, ... ranks: recursive doubling, log2(P) exchanges of the whole buffer with the
  // rank whose index differs in one bit, each side adding the other's sum. Fewer hand-offs
  // than the ring's 2(P-1), which matters when ranks share cores and every hand-off waits
  // for a peer to be scheduled. a + b == b + a in IEEE arithmetic, so the pairs' sums, and
  // in the end every rank's, are bitwise the same. A segment is added into only once its
  // send has completed.
  int doubling(float* data, std::int64_t count) {
    error_ = MPI_SUCCESS;
    const Block all{0, count};
    float* terms = scratch(count);
    for (int mask = 1; mask < size_ && error_ == MPI_SUCCESS; mask <<= 1) {
      const int peer = rank_ ^ mask;
      Requests recvs, sends;
      for (std::int64_t i = 0; i < all.segments(segment_); ++i) post(recvs, false, seg(terms, all, i, false), seg_n(all, i), peer);
      for (std::int64_t i = 0; i < all.segments(segment_); ++i) post(sends, true, seg(data, all, i, true), seg_n(all, i), peer);
      for (std::int64_t i = 0; i < all.segments(segment_); ++i) {
        wait(recvs[std::size_t(i)]);
        wait(sends[std::size_t(i)]);
        if (error_ == MPI_SUCCESS) add_into(seg(data, all, i, true), seg(terms, all, i, false), seg_n(all, i));
      }
    }
    return error_;
  }
  int left() const { return mod(rank_ - 1); }
  int right() const { return mod(rank_ + 1); }

  static void add_into(float* __restrict sum, const float* __restrict term, std::int64_t n) {
    for (std::int64_t k = 0; k < n; ++k) sum[k] += term[k];
  }
  float* scratch(std::int64_t n) {
    if (std::int64_t(scratch_.size()) < n) scratch_.resize(std::size_t(n));
    return scratch_.data();
  }

  MPI_Comm comm_;
  std::int64_t segment_;
  int rank_ = 0, size_ = 1;
  int error_ = MPI_SUCCESS;  // the first MPI error of the step in progress
  std::vector<float> scratch_;
};

// Returns once every rank of `comm` has called it, waiting patiently.
Status all_arrived(MPI_Comm comm, const char* what) {
  MPI_Request request = MPI_REQUEST_NULL;
  LOOM_TRY(check(MPI_Ibarrier(comm, &request), what));
  MPI_Status status;
  return check(wait_patiently(request, status), what);
}

// A request made of one MPI request per chunk. For a receive, each chunk's expected size
// is kept so that a shorter message than asked for is reported rather than ignored.
class MpiRequest final : public Request {
 public:
  MpiRequest(std::string what, std::vector<MPI_Request> requests, std::vector<int> expected_bytes)
      : what_(std::move(what)), requests_(std::move(requests)), expected_(std::move(expected_bytes)) {}
  explicit MpiRequest(Status failed) : done_(true), result_(std::move(failed)) {}
  // The buffer belongs to MPI until completion; waiting is the only safe way to let go.
  ~MpiRequest() override { (void)wait(); }  // dropped unwaited: its error was the caller's to read

  bool test() override {
    if (done_) return true;
    int flag = 0;
    const int rc = MPI_Testall(count(), requests_.data(), &flag, statuses_.data());
    if (rc == MPI_SUCCESS && !flag) return false;
    int error = rc;
    if (rc == MPI_ERR_IN_STATUS) {
      // The per-request codes say which chunk failed and why.
      for (const MPI_Status& status : statuses_) {
        if (status.MPI_ERROR != MPI_SUCCESS && status.MPI_ERROR != MPI_ERR_PENDING) {
          error = status.MPI_ERROR;
          break;
        }
      }
    }
    if (error != MPI_SUCCESS) wait_each();  // a failure may leave other chunks active
    finish(error);
    return true;
  }
  Status wait() override {
    if (!done_) finish(wait_each());
    return result_;
  }

 private:
  int count() const { return static_cast<int>(requests_.size()); }
  int wait_each();
  void finish(int error);

  std::string what_;
  std::vector<MPI_Request> requests_;
  std::vector<int> expected_;  // bytes per chunk for receives; empty otherwise
  std::vector<MPI_Status> statuses_ = std::vector<MPI_Status>(requests_.size());  // sized once: test() is polled often
  bool done_ = false;
  Status result_;
};

// One request at a time rather than MPI_Waitall: Open MPI 4.1, at any thread level above
// SINGLE, never returns from MPI_Waitall (nor from a blocking MPI_Recv) once a request has
// failed, e.g. with MPI_ERR_TRUNCATE; MPI_Test returns the error. Returns the first error.
int MpiRequest::wait_each() {
  int first_error = MPI_SUCCESS;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    const int rc = wait_patiently(requests_[i], statuses_[i]);
    if (rc != MPI_SUCCESS && first_error == MPI_SUCCESS) first_error = rc;
  }
  return first_error;
}

void MpiRequest::finish(int error) {
  done_ = true;
  if (error != MPI_SUCCESS) {
    result_ = mpi_error(error, what_);
    return;
  }
  for (std::size_t i = 0; i < expected_.size(); ++i) {
    int received = 0;
    MPI_Get_count(&statuses_[i], MPI_BYTE, &received);
    if (received != expected_[i]) {
      result_ = make_error(ErrorCode::InvalidArgument,
                           "mpi: " + what_ + ": received " + std::to_string(received) + " bytes in chunk " +
                               std::to_string(i) + ", expected " + std::to_string(expected_[i]),
                           "a receive must name the size of the matching send");
      return;
    }
  }
}

Status check_buffer(const char* what, const void* data, std::int64_t count) {
  if (count < 0) {
    return make_error(ErrorCode::InvalidArgument, std::string("mpi: ") + what + ": negative count " +
                                                      std::to_string(count));
  }
  if (count > 0 && data == nullptr) return make_error(ErrorCode::InvalidArgument, std::string("mpi: ") + what + ": null buffer");
  return Status();
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, const MpiOptions& options) : comm_(comm), options_(options) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    // At least 1 and at most INT_MAX, whatever the caller asked for.
    options_.max_count_per_call = std::clamp<std::int64_t>(options_.max_count_per_call, 1, INT_MAX);
    // The ring's messages on a communicator of their own never match the caller's.
    MPI_Comm_dup(comm_, &ring_comm_);
    MPI_Comm_set_errhandler(ring_comm_, MPI_ERRORS_RETURN);
    ring_ = std::make_unique<RingAllreduce>(ring_comm_, std::min<std::int64_t>(kRingSegment, options_.max_count_per_call));
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&ring_comm_);
    MPI_Comm_free(&comm_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend_name() const override { return "mpi"; }
  bool allows_concurrent_threads() const override { return options_.thread_multiple; }

  Status allreduce_sum(float* data, std::int64_t count) override;
  std::unique_ptr<Request> iallreduce_sum(float* data, std::int64_t count) override;
  Status broadcast(void* data, std::int64_t bytes, int root) override;
  std::unique_ptr<Request> isend(const void* data, std::int64_t bytes, int peer, int tag) override;
  std::unique_ptr<Request> irecv(void* data, std::int64_t bytes, int peer, int tag) override;
  Status barrier() override { return all_arrived(comm_, "barrier"); }
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  // Calls fn(offset, n) for consecutive chunks of at most max_count_per_call; stops at
  // the first failure.
  template <class Fn>
  Status for_each_chunk(std::int64_t count, Fn&& fn) const {
    for (std::int64_t offset = 0; offset < count; offset += options_.max_count_per_call) {
      const int n = static_cast<int>(std::min(options_.max_count_per_call, count - offset));
      if (Status status = fn(offset, n); !status.ok()) return status;
    }
    return Status();
  }
  Status check_peer(const char* what, const void* data, std::int64_t bytes, int peer) const;

  MPI_Comm comm_;
  MPI_Comm ring_comm_ = MPI_COMM_NULL;
  std::unique_ptr<RingAllreduce> ring_;
  MpiOptions options_;
  int rank_ = 0;
  int size_ = 0;
};

// Open MPI's blocking all-reduce spins for as long as a peer that stopped mid-collective
// stays stopped, whatever barrier comes before it (the peer may stop after arriving).
// Small sums (the per-step loss/accuracy/stop, up to kMpiSmallAllreduceFloats) are the
// non-blocking collective waited for patiently: latency-bound, libnbc costs nothing
// there. Larger ones (gradient buckets) go round the ring above (recursive doubling for
// 4, 8, ... ranks), because libnbc's non-blocking all-reduce reaches only 60-70% of the
// blocking one's bandwidth.
Status MpiCommunicator::allreduce_sum(float* data, std::int64_t count) {
  LOOM_TRY(check_buffer("allreduce_sum", data, count));
  const MpiAllreduce how = mpi_allreduce_algorithm(size_, count);
  if (how == MpiAllreduce::NonBlocking) return iallreduce_sum(data, count)->wait();
  return check(ring_->run(data, count, how), "allreduce_sum");
}

std::unique_ptr<Request> MpiCommunicator::iallreduce_sum(float* data, std::int64_t count) {
  if (Status bad = check_buffer("iallreduce_sum", data, count); !bad.ok()) return std::make_unique<MpiRequest>(bad);
  // Every chunk is in flight at once; nonblocking collectives on one communicator are
  // matched in issue order on every rank.
  std::vector<MPI_Request> requests;
  Status started = for_each_chunk(count, [&](std::int64_t offset, int n) {
    requests.push_back(MPI_REQUEST_NULL);
    return check(MPI_Iallreduce(MPI_IN_PLACE, data + offset, n, MPI_FLOAT, MPI_SUM, comm_, &requests.back()),
                 "iallreduce_sum");
  });
  auto request = std::make_unique<MpiRequest>("iallreduce_sum", std::move(requests), std::vector<int>{});
  if (!started.ok()) {
    (void)request->wait();  // let the chunks already started finish before reporting
    return std::make_unique<MpiRequest>(started);
  }
  return request;
}

Status MpiCommunicator::broadcast(void* data, std::int64_t bytes, int root) {
  LOOM_TRY(check_buffer("broadcast", data, bytes));
  LOOM_TRY(all_arrived(comm_, "broadcast"));
  auto* base = static_cast<char*>(data);
  return for_each_chunk(bytes, [&](std::int64_t offset, int n) {
    return check(MPI_Bcast(base + offset, n, MPI_BYTE, root, comm_), "broadcast");
  });
}

Status MpiCommunicator::check_peer(const char* what, const void* data, std::int64_t bytes, int peer) const {
  LOOM_TRY(check_buffer(what, data, bytes));
  // MPI would report this too, but with the world's size unnamed; say what the range is.
  if (peer < 0 || peer >= size_) {
    return make_error(ErrorCode::InvalidArgument, std::string("mpi: ") + what + ": peer " + std::to_string(peer) +
                                                      " is not a rank of this communicator (size " +
                                                      std::to_string(size_) + ")");
  }
  return Status();
}

std::unique_ptr<Request> MpiCommunicator::isend(const void* data, std::int64_t bytes, int peer, int tag) {
  if (Status bad = check_peer("isend", data, bytes, peer); !bad.ok()) return std::make_unique<MpiRequest>(bad);
  const char* base = static_cast<const char*>(data);
  std::vector<MPI_Request> requests;
  // A zero-byte message is still a message: the receiver's matching recv must complete.
  const std::int64_t chunks = std::max<std::int64_t>(bytes, 1);
  Status started = for_each_chunk(chunks, [&](std::int64_t offset, int n) {
    requests.push_back(MPI_REQUEST_NULL);
    return check(MPI_Isend(base + offset, bytes == 0 ? 0 : n, MPI_BYTE, peer, tag, comm_, &requests.back()), "isend");
  });
  auto request = std::make_unique<MpiRequest>("isend", std::move(requests), std::vector<int>{});
  if (!started.ok()) {
    (void)request->wait();  // the chunks already started finish before reporting
    return std::make_unique<MpiRequest>(started);
  }
  return request;
}

std::unique_ptr<Request> MpiCommunicator::irecv(void* data, std::int64_t bytes, int peer, int tag) {
  if (Status bad = check_peer("irecv", data, bytes, peer); !bad.ok()) return std::make_unique<MpiRequest>(bad);
  char* base = static_cast<char*>(data);
  std::vector<MPI_Request> requests;
  std::vector<int> expected;
  const std::int64_t chunks = std::max<std::int64_t>(bytes, 1);
  Status started = for_each_chunk(chunks, [&](std::int64_t offset, int n) {
    const int chunk = bytes == 0 ? 0 : n;
    requests.push_back(MPI_REQUEST_NULL);
    expected.push_back(chunk);
    return check(MPI_Irecv(base + offset, chunk, MPI_BYTE, peer, tag, comm_, &requests.back()), "irecv");
  });
  auto request = std::make_unique<MpiRequest>("irecv", std::move(requests), std::move(expected));
  if (!started.ok()) {
    (void)request->wait();  // the chunks already started finish before reporting
    return std::make_unique<MpiRequest>(started);
  }
  return request;
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  MPI_Comm sub = MPI_COMM_NULL;
  if (MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub) != MPI_SUCCESS) return nullptr;
  if (sub == MPI_COMM_NULL) return nullptr;
  // Set explicitly rather than rely on inheritance: errors must stay values here too.
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  return std::make_unique<MpiCommunicator>(sub, options_);
}

}  // namespace

Expected<std::unique_ptr<Communicator>> init_mpi(int* argc, char*** argv, const MpiOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    // Before this succeeds MPI's default handler (abort) applies; nothing can change that.
    const int wanted = options.thread_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
    if (int rc = MPI_Init_thread(argc, argv, wanted, &provided); rc != MPI_SUCCESS) {
      return mpi_error(rc, "MPI_Init_thread");
    }
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    return make_error(ErrorCode::Unavailable, "mpi: the MPI library provides thread level " +
                                                  std::to_string(provided) + ", Loom needs MPI_THREAD_SERIALIZED",
                      "use an MPI built with thread support (Open MPI 4 provides it by default)");
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm world = MPI_COMM_NULL;
  // A duplicate keeps Loom's tags and collectives apart from any other MPI user's.
  if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, &world); rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
  MpiOptions granted = options;
  granted.thread_multiple = provided >= MPI_THREAD_MULTIPLE;  // sub-communicators inherit it
  return std::unique_ptr<Communicator>(std::make_unique<MpiCommunicator>(world, granted));
}

void finalize_mpi() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

void abort_mpi(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort should not return; never continue if it does
}

}  // namespace loom::comm
