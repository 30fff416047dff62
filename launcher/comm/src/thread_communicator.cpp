// The in-process communicator: ranks are threads sharing one Group (a mutex, a condition
// variable and the operations in flight). Collectives are numbered per rank in call
// order, which MPI semantics make identical on every rank, so the n-th collective of each
// rank meets in one slot; the last rank to arrive does the work, so nothing needs a
// helper thread and non-blocking operations complete as soon as every rank has posted.
// Point-to-point sends are eager (copied on send), receives match by (source,
// destination, tag) in posting order, as MPI's non-overtaking rule requires.
#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "loom/comm/threads.h"
#include "ready_request.h"

namespace loom::comm {
namespace {

enum class Kind { AllreduceSum, Broadcast, Barrier, Split };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::AllreduceSum: return "allreduce_sum";
    case Kind::Broadcast: return "broadcast";
    case Kind::Barrier: return "barrier";
    case Kind::Split: return "split";
  }
  return "?";
}

struct Group;

// What one rank brings to a collective. A rank whose arguments are invalid still joins
// (with `problem` set) so that every rank gets the error instead of the others hanging.
struct Contribution {
  Kind kind = Kind::Barrier;
  void* data = nullptr;
  std::int64_t count = 0;  // floats for all-reduce, bytes for broadcast
  int root = 0;
  int color = 0;
  int key = 0;
  std::string problem;
};

struct Collective {
  std::vector<Contribution> parts;  // by rank
  int arrived = 0;
  int released = 0;  // ranks that have observed completion; the last one erases the slot
  bool done = false;
  Status status;
  std::vector<std::shared_ptr<Group>> split_group;  // by rank, for Split
  std::vector<int> split_rank;
};

struct RecvState {
  bool done = false;
  Status status;
};

struct PostedRecv {
  void* data;
  std::int64_t bytes;
  std::shared_ptr<RecvState> state;
};

using Route = std::tuple<int, int, int>;  // source, destination, tag

struct Group {
  explicit Group(int n) : size(n) {}
  const int size;
  std::mutex mutex;
  std::condition_variable cv;
  std::map<std::uint64_t, Collective> collectives;  // by sequence number
  // For one route at most one of these is non-empty: a send either meets a posted receive
  // or waits here for one, and vice versa.
  std::map<Route, std::deque<std::vector<std::byte>>> unmatched_sends;
  std::map<Route, std::deque<PostedRecv>> posted_recvs;
};

Status size_mismatch(std::int64_t sent, std::int64_t expected, const Route& route) {
  return make_error(ErrorCode::InvalidArgument,
                    "threads: message from rank " + std::to_string(std::get<0>(route)) + " to rank " +
                        std::to_string(std::get<1>(route)) + " tag " + std::to_string(std::get<2>(route)) +
                        " has " + std::to_string(sent) + " bytes, the receive expected " +
                        std::to_string(expected),
                    "a receive must name the size of the matching send");
}

// Completes a receive from a sent message; returns the receive's status.
Status deliver(const std::byte* msg, std::int64_t bytes, void* dst, std::int64_t dst_bytes, const Route& route) {
  if (bytes != dst_bytes) return size_mismatch(bytes, dst_bytes, route);
  if (bytes > 0) std::memcpy(dst, msg, static_cast<std::size_t>(bytes));
  return Status();
}

class RecvRequest final : public Request {
 public:
  RecvRequest(std::shared_ptr<Group> group, std::shared_ptr<RecvState> state)
      : group_(std::move(group)), state_(std::move(state)) {}
  ~RecvRequest() override { (void)wait(); }  // dropped unwaited: its error was the caller's to read
  bool test() override {
    std::lock_guard lock(group_->mutex);
    return state_->done;
  }
  Status wait() override {
    std::unique_lock lock(group_->mutex);
    group_->cv.wait(lock, [&] { return state_->done; });
    return state_->status;
  }

 private:
  std::shared_ptr<Group> group_;
  std::shared_ptr<RecvState> state_;
};

// A rank's handle on a collective slot. `on_done` runs under the group lock once the
// collective is complete, before this rank releases the slot (split reads its result).
class CollectiveRequest final : public Request {
 public:
  using OnDone = std::function<void(const Collective&)>;
  CollectiveRequest(std::shared_ptr<Group> group, std::uint64_t seq, OnDone on_done = {})
      : group_(std::move(group)), seq_(seq), on_done_(std::move(on_done)) {}
  ~CollectiveRequest() override { (void)wait(); }  // as RecvRequest

  bool test() override {
    std::lock_guard lock(group_->mutex);
    if (!released_ && !group_->collectives.at(seq_).done) return false;
    release_locked();
    return true;
  }
  Status wait() override {
    std::unique_lock lock(group_->mutex);
    if (!released_) {
      const Collective& op = group_->collectives.at(seq_);
      group_->cv.wait(lock, [&] { return op.done; });
    }
    release_locked();
    return status_;
  }

 private:
  void release_locked() {
    if (released_) return;
    released_ = true;
    auto it = group_->collectives.find(seq_);
    status_ = it->second.status;
    if (on_done_) on_done_(it->second);
    if (++it->second.released == group_->size) group_->collectives.erase(it);
  }

  std::shared_ptr<Group> group_;
  std::uint64_t seq_;
  OnDone on_done_;
  bool released_ = false;
  Status status_;
};

// Every rank must call the same collective with the same shape; say who did not.
Status check_consistent(const Collective& op) {
  const Contribution& first = op.parts[0];
  for (std::size_t r = 0; r < op.parts.size(); ++r) {
    const Contribution& part = op.parts[r];
    if (!part.problem.empty()) return make_error(ErrorCode::InvalidArgument, part.problem);
    const bool same = part.kind == first.kind &&
                      (first.kind == Kind::Barrier || first.kind == Kind::Split ||
                       (part.count == first.count && part.root == first.root));
    if (!same) {
      return make_error(ErrorCode::InvalidArgument,
                        "threads: collective mismatch: rank 0 called " + std::string(kind_name(first.kind)) +
                            "(count " + std::to_string(first.count) + ", root " + std::to_string(first.root) +
                            ") while rank " + std::to_string(r) + " called " + kind_name(part.kind) + "(count " +
                            std::to_string(part.count) + ", root " + std::to_string(part.root) + ")",
                        "every rank must issue the same collectives in the same order");
    }
  }
  return Status();
}

// Sums in rank order ((x0 + x1) + x2) + ... block by block, so the result is the same on
// every rank and every run, and the block stays in cache while it is summed and copied.
void reduce_sum(const std::vector<Contribution>& parts) {
  constexpr std::int64_t kBlock = 4096;
  const std::int64_t count = parts[0].count;
  float sum[kBlock];
  for (std::int64_t begin = 0; begin < count; begin += kBlock) {
    const std::int64_t n = std::min(kBlock, count - begin);
    const float* first = static_cast<const float*>(parts[0].data) + begin;
    std::copy(first, first + n, sum);
    for (std::size_t r = 1; r < parts.size(); ++r) {
      const float* x = static_cast<const float*>(parts[r].data) + begin;
      for (std::int64_t i = 0; i < n; ++i) sum[i] += x[i];
    }
    for (const Contribution& part : parts) std::copy(sum, sum + n, static_cast<float*>(part.data) + begin);
  }
}

void broadcast_from_root(const std::vector<Contribution>& parts) {
  const Contribution& root = parts[static_cast<std::size_t>(parts[0].root)];
  for (const Contribution& part : parts) {
    if (&part != &root && part.count > 0) std::memcpy(part.data, root.data, static_cast<std::size_t>(part.count));
  }
}

// Groups ranks by color, orders each group by (key, old rank), and makes one new Group
// per color. Ranks with a negative color get no group.
void split_groups(Collective& op) {
  std::map<int, std::vector<std::pair<int, int>>> members;  // color -> (key, rank)
  for (std::size_t r = 0; r < op.parts.size(); ++r) {
    if (op.parts[r].color >= 0) members[op.parts[r].color].emplace_back(op.parts[r].key, static_cast<int>(r));
  }
  op.split_group.assign(op.parts.size(), nullptr);
  op.split_rank.assign(op.parts.size(), -1);
  for (auto& [color, list] : members) {
    std::sort(list.begin(), list.end());
    auto group = std::make_shared<Group>(static_cast<int>(list.size()));
    for (std::size_t i = 0; i < list.size(); ++i) {
      op.split_group[static_cast<std::size_t>(list[i].second)] = group;
      op.split_rank[static_cast<std::size_t>(list[i].second)] = static_cast<int>(i);
    }
  }
}

// Run by the last rank to arrive, outside the lock: the other ranks only read `done`
// under the lock and do not touch their buffers until it is set.
void complete(Group& group, Collective& op) {
  Status status = check_consistent(op);
  if (status.ok()) {
    switch (op.parts[0].kind) {
      case Kind::AllreduceSum: reduce_sum(op.parts); break;
      case Kind::Broadcast: broadcast_from_root(op.parts); break;
      case Kind::Split: split_groups(op); break;
      case Kind::Barrier: break;
    }
  }
  std::lock_guard lock(group.mutex);
  op.status = std::move(status);
  op.done = true;
  group.cv.notify_all();
}

std::string check_buffer(const char* what, const void* data, std::int64_t count) {
  if (count < 0) return std::string("threads: ") + what + ": negative count " + std::to_string(count);
  if (count > 0 && data == nullptr) return std::string("threads: ") + what + ": null buffer";
  return {};
}

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size; }
  std::string backend_name() const override { return "threads"; }
  bool allows_concurrent_threads() const override { return true; }  // every group has its own lock

  Status allreduce_sum(float* data, std::int64_t count) override { return iallreduce_sum(data, count)->wait(); }
  std::unique_ptr<Request> iallreduce_sum(float* data, std::int64_t count) override {
    return start({Kind::AllreduceSum, data, count, 0, 0, 0, check_buffer("allreduce_sum", data, count)});
  }
  Status broadcast(void* data, std::int64_t bytes, int root) override {
    std::string problem = check_buffer("broadcast", data, bytes);
    if (problem.empty() && (root < 0 || root >= size())) problem = "threads: broadcast: bad root " + std::to_string(root);
    return start({Kind::Broadcast, data, bytes, root, 0, 0, std::move(problem)})->wait();
  }
  Status barrier() override { return start({Kind::Barrier, nullptr, 0, 0, 0, 0, {}})->wait(); }
  std::unique_ptr<Communicator> split(int color, int key) override;

  std::unique_ptr<Request> isend(const void* data, std::int64_t bytes, int peer, int tag) override;
  std::unique_ptr<Request> irecv(void* data, std::int64_t bytes, int peer, int tag) override;

 private:
  std::unique_ptr<Request> start(Contribution part, CollectiveRequest::OnDone on_done = {});
  Status check_p2p(const char* what, const void* data, std::int64_t bytes, int peer, int tag) const;

  std::shared_ptr<Group> group_;
  int rank_;
  std::uint64_t next_seq_ = 0;  // this rank's collectives so far on this communicator
};

std::unique_ptr<Request> ThreadCommunicator::start(Contribution part, CollectiveRequest::OnDone on_done) {
  const std::uint64_t seq = next_seq_++;
  Collective* last = nullptr;
  {
    std::lock_guard lock(group_->mutex);
    Collective& op = group_->collectives[seq];
    if (op.parts.empty()) op.parts.resize(static_cast<std::size_t>(group_->size));
    op.parts[static_cast<std::size_t>(rank_)] = std::move(part);
    if (++op.arrived == group_->size) last = &op;  // map nodes are stable; erased only after all release
  }
  if (last != nullptr) complete(*group_, *last);
  return std::make_unique<CollectiveRequest>(group_, seq, std::move(on_done));
}

std::unique_ptr<Communicator> ThreadCommunicator::split(int color, int key) {
  std::shared_ptr<Group> group;
  int new_rank = -1;
  auto request = start({Kind::Split, nullptr, 0, 0, color, key, {}}, [&](const Collective& op) {
    if (!op.status.ok()) return;
    group = op.split_group[static_cast<std::size_t>(rank_)];
    new_rank = op.split_rank[static_cast<std::size_t>(rank_)];
  });
  if (!request->wait().ok() || group == nullptr) return nullptr;
  return std::make_unique<ThreadCommunicator>(std::move(group), new_rank);
}

Status ThreadCommunicator::check_p2p(const char* what, const void* data, std::int64_t bytes, int peer,
                                     int tag) const {
  std::string problem = check_buffer(what, data, bytes);
  if (!problem.empty()) return make_error(ErrorCode::InvalidArgument, problem);
  if (peer < 0 || peer >= size()) {
    return make_error(ErrorCode::InvalidArgument, std::string("threads: ") + what + ": peer " + std::to_string(peer) +
                                                      " is not a rank of this communicator (size " +
                                                      std::to_string(size()) + ")");
  }
  if (tag < 0) return make_error(ErrorCode::InvalidArgument, std::string("threads: ") + what + ": negative tag");
  return Status();
}

std::unique_ptr<Request> ThreadCommunicator::isend(const void* data, std::int64_t bytes, int peer, int tag) {
  if (Status bad = check_p2p("isend", data, bytes, peer, tag); !bad.ok()) return std::make_unique<ReadyRequest>(bad);
  const Route route{rank_, peer, tag};
  const auto* src = static_cast<const std::byte*>(data);
  std::lock_guard lock(group_->mutex);
  auto posted = group_->posted_recvs.find(route);
  if (posted != group_->posted_recvs.end()) {
    PostedRecv receive = posted->second.front();
    posted->second.pop_front();
    if (posted->second.empty()) group_->posted_recvs.erase(posted);
    receive.state->status = deliver(src, bytes, receive.data, receive.bytes, route);
    receive.state->done = true;
    group_->cv.notify_all();
  } else {
    group_->unmatched_sends[route].emplace_back(src, src + bytes);
  }
  // Eager: the data is copied, so the send is complete (a size error belongs to the receiver).
  return std::make_unique<ReadyRequest>(Status());
}

std::unique_ptr<Request> ThreadCommunicator::irecv(void* data, std::int64_t bytes, int peer, int tag) {
  if (Status bad = check_p2p("irecv", data, bytes, peer, tag); !bad.ok()) return std::make_unique<ReadyRequest>(bad);
  const Route route{peer, rank_, tag};
  std::lock_guard lock(group_->mutex);
  auto sent = group_->unmatched_sends.find(route);
  if (sent == group_->unmatched_sends.end()) {
    auto state = std::make_shared<RecvState>();
    group_->posted_recvs[route].push_back({data, bytes, state});
    return std::make_unique<RecvRequest>(group_, std::move(state));
  }
  std::vector<std::byte> message = std::move(sent->second.front());
  sent->second.pop_front();
  if (sent->second.empty()) group_->unmatched_sends.erase(sent);
  return std::make_unique<ReadyRequest>(
      deliver(message.data(), static_cast<std::int64_t>(message.size()), data, bytes, route));
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_thread_group(int size) {
  std::vector<std::unique_ptr<Communicator>> ranks;
  if (size < 1) return ranks;
  auto group = std::make_shared<Group>(size);
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<ThreadCommunicator>(group, r));
  return ranks;
}

}  // namespace loom::comm
