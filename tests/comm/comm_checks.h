// Checks of the Communicator contract that every backend must pass, written once and run
// by each backend's test: on threads (test_comm_threads) and across processes under
// mpiexec (test_comm_mpi). A check runs on every rank of a communicator and records what
// went wrong on that rank; it never aborts, so all ranks keep issuing the same collectives.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loom/comm/communicator.h"
#include "loom/comm/unique_id.h"

namespace loom::comm::checks {

struct Failures {
  std::vector<std::string> messages;

  void expect(bool ok, const std::string& what) {
    if (!ok) messages.push_back(what);
  }
  bool expect_ok(const Status& status, const std::string& what) {
    if (!status.ok()) messages.push_back(what + ": " + status.error().describe());
    return status.ok();
  }
};

using CheckFn = void (*)(Communicator&, Failures&);
struct Check {
  const char* name;
  CheckFn fn;
};

// Integer-valued floats: exact in float whatever the summation order, so every backend
// must produce exactly this.
inline float value(int rank, std::int64_t i) { return float(i % 1021) + 3.0f * float(rank); }
inline float expected_sum(int size, std::int64_t i) {
  return float(size) * float(i % 1021) + 3.0f * float(size * (size - 1) / 2);
}

inline std::vector<float> filled(int rank, std::int64_t count) {
  std::vector<float> data(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) data[static_cast<std::size_t>(i)] = value(rank, i);
  return data;
}

inline void expect_sums(const std::vector<float>& data, int size, const std::string& what, Failures& f) {
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (data[i] != expected_sum(size, static_cast<std::int64_t>(i))) {
      f.expect(false, what + ": element " + std::to_string(i) + " is " + std::to_string(data[i]) + ", expected " +
                          std::to_string(expected_sum(size, static_cast<std::int64_t>(i))));
      return;
    }
  }
}

// Bitwise equal to rank 0's copy (checked by broadcasting rank 0's bytes).
inline void expect_same_everywhere(Communicator& c, const void* data, std::int64_t bytes, const std::string& what,
                                   Failures& f) {
  std::vector<char> root(static_cast<std::size_t>(bytes));
  std::memcpy(root.data(), data, root.size());
  if (!f.expect_ok(c.broadcast(root.data(), bytes, 0), what + ": broadcast for comparison")) return;
  f.expect(std::memcmp(root.data(), data, root.size()) == 0, what + ": differs from rank 0's result");
}

inline void rank_and_size(Communicator& c, Failures& f) {
  f.expect(c.size() >= 1 && c.rank() >= 0 && c.rank() < c.size(), "rank out of range");
  // Every rank must hold a distinct rank: the sum of ranks is 0 + 1 + ... + (size-1).
  float sums[2] = {1.0f, float(c.rank())};
  if (!f.expect_ok(c.allreduce_sum(sums, 2), "allreduce of ranks")) return;
  f.expect(sums[0] == float(c.size()), "ranks that answered differ from size()");
  f.expect(sums[1] == float(c.size() * (c.size() - 1) / 2), "ranks are not 0..size-1");
}

inline void allreduce_blocking(Communicator& c, Failures& f) {
  // Odd lengths cross any internal block boundary; 0 must be accepted.
  for (std::int64_t count : {std::int64_t{0}, std::int64_t{1}, std::int64_t{10007}, std::int64_t{300000}}) {
    std::vector<float> data = filled(c.rank(), count);
    const std::string what = "allreduce_sum(" + std::to_string(count) + ")";
    if (!f.expect_ok(c.allreduce_sum(data.data(), count), what)) return;
    expect_sums(data, c.size(), what, f);
    expect_same_everywhere(c, data.data(), count * 4, what, f);
  }
}

inline void iallreduce_in_flight(Communicator& c, Failures& f) {
  const std::int64_t counts[] = {5, 4099, 70000, 1};
  std::vector<std::vector<float>> buffers;
  std::vector<std::unique_ptr<Request>> requests;
  for (std::int64_t count : counts) buffers.push_back(filled(c.rank(), count));
  for (auto& buffer : buffers) requests.push_back(c.iallreduce_sum(buffer.data(), std::int64_t(buffer.size())));
  // Completed in a different order than started: requests are independent.
  for (std::size_t k = requests.size(); k-- > 0;) {
    const std::string what = "iallreduce_sum #" + std::to_string(k);
    if (!f.expect_ok(requests[k]->wait(), what)) continue;
    f.expect(requests[k]->test(), what + ": test() false after wait()");
    expect_sums(buffers[k], c.size(), what, f);
  }
  for (auto& buffer : buffers) expect_same_everywhere(c, buffer.data(), std::int64_t(buffer.size()) * 4, "iallreduce", f);
}

inline void broadcast_each_root(Communicator& c, Failures& f) {
  for (std::int64_t bytes : {std::int64_t{13}, std::int64_t{1} << 20}) {
    for (int root = 0; root < c.size(); ++root) {
      std::vector<unsigned char> data(static_cast<std::size_t>(bytes), 0xEE);
      if (c.rank() == root) {
        for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7 + root);
      }
      const std::string what = "broadcast(" + std::to_string(bytes) + " bytes, root " + std::to_string(root) + ")";
      if (!f.expect_ok(c.broadcast(data.data(), bytes, root), what)) return;
      for (std::size_t i = 0; i < data.size(); ++i) {
        if (data[i] != static_cast<unsigned char>(i * 7 + root)) {
          f.expect(false, what + ": byte " + std::to_string(i) + " wrong");
          break;
        }
      }
    }
  }
}

// Pairs (0,1), (2,3), ... bounce a counter; each round uses its own tag. A rank without a
// partner (odd size) talks to itself through isend + recv.
// NCCL's bootstrap (unique_id.h): the last rank's id reaches every rank; a root outside
// the communicator is refused on every rank, before anything is sent.
inline void unique_id_from_last_rank(Communicator& c, Failures& f) {
  const int root = c.size() - 1;
  loom::comm::UniqueId id{};
  if (c.rank() == root)
    for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<char>(i * 3 + 1);
  if (!f.expect_ok(loom::comm::share_unique_id(c, id, root), "share_unique_id")) return;
  for (std::size_t i = 0; i < id.size(); ++i) {
    if (id[i] != static_cast<char>(i * 3 + 1)) {
      f.expect(false, "unique id byte " + std::to_string(i) + " wrong on rank " + std::to_string(c.rank()));
      return;
    }
  }
  f.expect(!loom::comm::share_unique_id(c, id, c.size()).ok(), "a root beyond the ranks is refused");
}

inline void ping_pong(Communicator& c, Failures& f) {
  const int partner = (c.rank() ^ 1) < c.size() ? (c.rank() ^ 1) : c.rank();
  const bool starts = c.rank() <= partner;
  std::int64_t counter = 0;
  for (int round = 0; round < 20; ++round) {
    const int tag = 100 + round;
    if (partner == c.rank()) {
      auto sent = c.isend(&round, sizeof round, partner, tag);
      int back = -1;
      f.expect_ok(c.recv(&back, sizeof back, partner, tag), "self recv");
      f.expect_ok(sent->wait(), "self isend");
      f.expect(back == round, "self message corrupted");
      continue;
    }
    if (starts == (round % 2 == 0)) {
      ++counter;
      if (!f.expect_ok(c.send(&counter, sizeof counter, partner, tag), "ping-pong send")) return;
    } else {
      if (!f.expect_ok(c.recv(&counter, sizeof counter, partner, tag), "ping-pong recv")) return;
      f.expect(counter == round + 1, "ping-pong counter " + std::to_string(counter) + " in round " + std::to_string(round));
    }
  }
}

// Messages on different tags are matched by tag, not arrival; messages on one tag in the
// order they were sent.
inline void tag_matching(Communicator& c, Failures& f) {
  const int next = (c.rank() + 1) % c.size();
  const int prev = (c.rank() + c.size() - 1) % c.size();
  const int a = 1000 + c.rank(), b = 2000 + c.rank();
  const int fifo[3] = {7, 8, 9};
  std::vector<std::unique_ptr<Request>> sends;
  sends.push_back(c.isend(&a, sizeof a, next, 1));
  sends.push_back(c.isend(&b, sizeof b, next, 2));
  for (const int& x : fifo) sends.push_back(c.isend(&x, sizeof x, next, 3));
  int got_b = 0, got_a = 0;
  f.expect_ok(c.recv(&got_b, sizeof got_b, prev, 2), "recv tag 2");
  f.expect_ok(c.recv(&got_a, sizeof got_a, prev, 1), "recv tag 1");
  f.expect(got_a == 1000 + prev && got_b == 2000 + prev, "messages matched to the wrong tag");
  // Two receives posted before their messages are needed: they match in posting order.
  int got[3] = {};
  auto r0 = c.irecv(&got[0], sizeof(int), prev, 3);
  auto r1 = c.irecv(&got[1], sizeof(int), prev, 3);
  f.expect_ok(c.recv(&got[2], sizeof(int), prev, 3), "fifo recv 3");
  f.expect_ok(r1->wait(), "fifo recv 2");
  f.expect_ok(r0->wait(), "fifo recv 1");
  f.expect(got[0] == 7 && got[1] == 8 && got[2] == 9, "same-tag messages out of order");
  for (auto& s : sends) f.expect_ok(s->wait(), "isend");
}

// Non-blocking ring with 1 MiB messages (several chunks when the MPI chunk size is low).
inline void ring_nonblocking(Communicator& c, Failures& f) {
  const std::int64_t n = 1 << 18;
  const int next = (c.rank() + 1) % c.size();
  const int prev = (c.rank() + c.size() - 1) % c.size();
  std::vector<float> out = filled(c.rank(), n), in(static_cast<std::size_t>(n), -1.0f);
  auto r = c.irecv(in.data(), n * 4, prev, 5);
  auto s = c.isend(out.data(), n * 4, next, 5);
  f.expect_ok(r->wait(), "ring irecv");
  f.expect_ok(s->wait(), "ring isend");
  f.expect(in == filled(prev, n), "ring payload wrong");
}

// Rank r arrives r * 30 ms late, so nobody may leave before the last rank has arrived.
inline void barrier_waits_for_all(Communicator& c, Failures& f) {
  using namespace std::chrono;
  f.expect_ok(c.barrier(), "first barrier");
  const auto start = steady_clock::now();
  std::this_thread::sleep_for(milliseconds(30 * c.rank()));
  f.expect_ok(c.barrier(), "second barrier");
  const auto waited = duration_cast<milliseconds>(steady_clock::now() - start).count();
  f.expect(waited >= 30 * (c.size() - 1) - 10,
           "left the barrier after " + std::to_string(waited) + " ms, before the last rank arrived");
}

// CPU time of the calling thread, in seconds.
inline double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// A rank that waits long for a late peer (a stopped or very slow one) must not spend a
// core on it: in an all-reduce, a receive and a barrier, the ranks that wait 0.6 s for the
// last one use under a third of that in CPU time (a spinning wait uses all of it).
inline void waits_do_not_spin(Communicator& c, Failures& f) {
  using namespace std::chrono;
  const int last = c.size() - 1;
  auto wait = [&](const char* what, auto&& op) {
    f.expect_ok(c.barrier(), std::string("barrier before ") + what);
    const auto start = steady_clock::now();
    const double cpu_start = thread_cpu_s();
    if (c.rank() == last) std::this_thread::sleep_for(milliseconds(600));
    f.expect_ok(op(), what);
    const double wall = duration<double>(steady_clock::now() - start).count();
    const double cpu = thread_cpu_s() - cpu_start;
    if (c.rank() != last && c.size() > 1)
      f.expect(cpu < wall / 3, std::string(what) + ": waited " + std::to_string(wall) + " s using " +
                                   std::to_string(cpu) + " s of CPU");
  };
  float x = 1.0f;
  wait("allreduce", [&] { return c.allreduce_sum(&x, 1); });
  wait("barrier", [&] { return c.barrier(); });
  char byte = 0;
  wait("recv", [&] {
    if (c.rank() == last) {
      Status sent;
      for (int r = 0; r < last; ++r)
        if (Status s = c.send(&byte, 1, r, 77); !s.ok()) sent = s;
      return sent;
    }
    return c.recv(&byte, 1, last, 77);
  });
}

inline void split_even_odd(Communicator& c, Failures& f) {
  auto sub = c.split(c.rank() % 2, c.rank());
  if (sub == nullptr) return f.expect(false, "split(even/odd) returned nullptr");
  const int members = (c.size() + 1 - c.rank() % 2) / 2;
  f.expect(sub->size() == members, "even/odd group size " + std::to_string(sub->size()));
  f.expect(sub->rank() == c.rank() / 2, "even/odd group rank " + std::to_string(sub->rank()));
  float sum = float(c.rank());  // sum of the world ranks of the same parity
  f.expect_ok(sub->allreduce_sum(&sum, 1), "allreduce in sub-group");
  float expected = 0;
  for (int r = c.rank() % 2; r < c.size(); r += 2) expected += float(r);
  f.expect(sum == expected, "sub-group sum " + std::to_string(sum) + ", expected " + std::to_string(expected));
  std::vector<float> data = filled(sub->rank(), 5000);
  f.expect_ok(sub->allreduce_sum(data.data(), 5000), "large allreduce in sub-group");
  expect_sums(data, sub->size(), "sub-group allreduce", f);
  expect_same_everywhere(*sub, data.data(), 5000 * 4, "sub-group allreduce", f);

  // The key orders the new ranks; a negative color leaves a rank out.
  auto reversed = c.split(0, -c.rank());
  f.expect(reversed && reversed->rank() == c.size() - 1 - c.rank(), "split key does not order ranks");
  auto without_zero = c.split(c.rank() == 0 ? -1 : 0, c.rank());
  f.expect((c.rank() == 0) == (without_zero == nullptr), "negative color must give nullptr, and only it");
  if (without_zero) f.expect(without_zero->size() == c.size() - 1, "split without rank 0 has the wrong size");
}

// Misuse comes back as an error value; the communicator still works afterwards.
inline void errors_are_values(Communicator& c, Failures& f) {
  char byte = 0;
  f.expect(!c.send(&byte, 1, c.size(), 0).ok(), "send to a rank outside the communicator succeeded");
  f.expect(!c.isend(&byte, 1, -1, 0)->wait().ok(), "isend to rank -1 succeeded");
  const std::int64_t eight = 0x0102030405060708;
  std::int32_t four = 0;
  auto s = c.isend(&eight, 8, c.rank(), 9);
  f.expect(!c.recv(&four, 4, c.rank(), 9).ok(), "receiving 8 bytes into 4 succeeded");
  (void)s->wait();  // the send to itself completes or fails with the receive
  std::int64_t big = 0;
  s = c.isend(&four, 4, c.rank(), 9);
  f.expect(!c.recv(&big, 8, c.rank(), 9).ok(), "receiving 4 bytes as 8 succeeded");
  (void)s->wait();
  f.expect_ok(c.barrier(), "barrier after errors");
}

// The overlap pattern gradient sync relies on: start an all-reduce of 8M floats, compute
// while polling test(), then wait(). test() alone must drive it to completion (MPI's
// collectives only progress inside MPI calls).
inline void iallreduce_overlaps_compute(Communicator& c, Failures& f) {
  using namespace std::chrono;
  const std::int64_t n = 8 << 20;
  std::vector<float> data = filled(c.rank(), n);
  std::vector<float> work(1 << 16, 1.0f);
  const auto start = steady_clock::now();
  auto request = c.iallreduce_sum(data.data(), n);
  double compute = 0;
  int polls = 0;
  bool done = false;
  while (!done && steady_clock::now() - start < seconds(60)) {
    for (float& w : work) compute += std::sqrt(w += 1.0f);  // stands in for backward
    ++polls;
    done = request->test();
  }
  f.expect(done, "test() did not complete the all-reduce within 60 s of polling");
  f.expect_ok(request->wait(), "iallreduce wait");
  f.expect(compute > 0, "compute did not run");
  expect_sums(data, c.size(), "overlapped iallreduce", f);
  expect_same_everywhere(c, data.data(), n * 4, "overlapped iallreduce", f);
  // For the report only: the same all-reduce, blocking, as a reference for how much the
  // polling rate slows a non-blocking one down.
  const double overlapped_ms = duration<double, std::milli>(steady_clock::now() - start).count();
  const auto blocking_start = steady_clock::now();
  f.expect_ok(c.allreduce_sum(data.data(), n), "reference blocking allreduce");
  const double blocking_ms = duration<double, std::milli>(steady_clock::now() - blocking_start).count();
  if (c.rank() == 0) {
    std::printf("  overlap: 8M floats on %d ranks: non-blocking done after %d polls, %.1f ms; blocking %.1f ms\n",
                c.size(), polls, overlapped_ms, blocking_ms);
  }
}

inline std::vector<Check> all_checks() {
  return {{"rank_and_size", rank_and_size},
          {"allreduce_blocking", allreduce_blocking},
          {"iallreduce_in_flight", iallreduce_in_flight},
          {"broadcast_each_root", broadcast_each_root},
          {"unique_id_from_last_rank", unique_id_from_last_rank},
          {"ping_pong", ping_pong},
          {"tag_matching", tag_matching},
          {"ring_nonblocking", ring_nonblocking},
          {"barrier_waits_for_all", barrier_waits_for_all},
          {"waits_do_not_spin", waits_do_not_spin},
          {"split_even_odd", split_even_odd},
          {"errors_are_values", errors_are_values},
          {"iallreduce_overlaps_compute", iallreduce_overlaps_compute}};
}

}  // namespace loom::comm::checks
