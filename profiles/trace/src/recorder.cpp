// Per-thread chunked buffers behind Recorder. Each buffer has exactly one producer (its
// thread) and one consumer (whoever holds the drain mutex); they meet only at two atomics
// per chunk: `written` (how many events of the chunk are published) and `next` (the chunk
// that follows once this one is full). The producer stores with release after writing the
// event, the consumer loads with acquire before reading it, so no lock is needed on the
// hot path. Drained chunks are handed back for reuse so a long run allocates nothing in
// steady state.
#include "loom/trace/recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include <algorithm>

namespace loom::trace {
namespace detail {

struct Chunk {
  explicit Chunk(std::size_t capacity) : events(new Event[capacity]) {}
  std::unique_ptr<Event[]> events;
  std::atomic<std::size_t> written{0};
  std::atomic<Chunk*> next{nullptr};
};

struct ThreadBuffer {
  explicit ThreadBuffer(std::size_t capacity) : capacity(capacity) {
    head = tail = new Chunk(capacity);
  }
  ~ThreadBuffer() {
    for (Chunk* c = head; c != nullptr;) {
      Chunk* next = c->next.load(std::memory_order_relaxed);
      delete c;
      c = next;
    }
    for (Chunk* c : free_chunks) delete c;
  }

  // Producer side: only the owning thread touches these.
  const std::size_t capacity;
  Chunk* tail = nullptr;
  std::size_t tail_index = 0;
  // Written only by the producer, read by recorded(): a single writer needs no RMW.
  std::atomic<std::uint64_t> total{0};

  // Consumer side: only the drainer touches these.
  Chunk* head = nullptr;
  std::size_t head_index = 0;

  // Recycled chunks travel consumer -> producer; a chunk fills rarely, so a mutex is fine.
  std::mutex free_mutex;
  std::vector<Chunk*> free_chunks;
};

namespace {
std::atomic<std::uint64_t> g_next_generation{1};

// A thread's buffers, keyed by recorder generation (never reused, so an entry left by a
// destroyed recorder can never match a new one at the same address). Entry 0 is the most
// recently used, which keeps the common single-recorder case to one comparison.
struct CacheEntry {
  std::uint64_t generation = 0;
  ThreadBuffer* buffer = nullptr;
};
thread_local std::vector<CacheEntry> t_cache;
constexpr std::size_t kMaxCacheEntries = 32;

[[maybe_unused]] Chunk* take_chunk(ThreadBuffer& b) {  // unused when tracing is compiled out
  {
    std::lock_guard lock(b.free_mutex);
    if (!b.free_chunks.empty()) {
      Chunk* c = b.free_chunks.back();
      b.free_chunks.pop_back();
      c->written.store(0, std::memory_order_relaxed);
      c->next.store(nullptr, std::memory_order_relaxed);
      return c;
    }
  }
  return new Chunk(b.capacity);
}

// Consumer: copies what the producer has published and releases finished chunks.
std::size_t drain_buffer(ThreadBuffer& b, std::vector<Event>& out) {
  std::size_t appended = 0;
  for (;;) {
    Chunk* c = b.head;
    std::size_t written = c->written.load(std::memory_order_acquire);
    if (written > b.head_index) {
      out.insert(out.end(), c->events.get() + b.head_index, c->events.get() + written);
      appended += written - b.head_index;
      b.head_index = written;
    }
    if (b.head_index < b.capacity) break;
    Chunk* next = c->next.load(std::memory_order_acquire);
    if (next == nullptr) break;  // full, but the producer has not linked the next chunk yet
    b.head = next;
    b.head_index = 0;
    std::lock_guard lock(b.free_mutex);
    b.free_chunks.push_back(c);
  }
  return appended;
}
}  // namespace
}  // namespace detail

Recorder::Recorder(std::size_t events_per_chunk)
    : chunk_capacity_(std::max<std::size_t>(events_per_chunk, 1)),
      generation_(detail::g_next_generation.fetch_add(1, std::memory_order_relaxed)) {}

Recorder::~Recorder() = default;

detail::ThreadBuffer* Recorder::register_thread() {
  auto buffer = std::make_unique<detail::ThreadBuffer>(chunk_capacity_);
  detail::ThreadBuffer* raw = buffer.get();
  {
    std::lock_guard lock(registry_mutex_);
    buffers_.push_back(std::move(buffer));
  }
  auto& cache = detail::t_cache;
  // Dropping an old entry is safe: if that recorder is still alive, the thread simply
  // registers a second buffer with it next time.
  if (cache.size() >= detail::kMaxCacheEntries) cache.pop_back();
  cache.insert(cache.begin(), {generation_, raw});
  return raw;
}

#if LOOM_TRACING
void Recorder::record(const Event& e) {
  auto& cache = detail::t_cache;
  detail::ThreadBuffer* b = nullptr;
  if (!cache.empty() && cache.front().generation == generation_) {
    b = cache.front().buffer;
  } else {
    auto it = std::find_if(cache.begin(), cache.end(),
                           [this](const detail::CacheEntry& c) { return c.generation == generation_; });
    if (it != cache.end()) {
      std::iter_swap(cache.begin(), it);  // most recent first
      b = cache.front().buffer;
    } else {
      b = register_thread();
    }
  }
  if (b->tail_index == b->capacity) {
    detail::Chunk* fresh = detail::take_chunk(*b);
    b->tail->next.store(fresh, std::memory_order_release);
    b->tail = fresh;
    b->tail_index = 0;
  }
  b->tail->events[b->tail_index] = e;
  ++b->tail_index;
  b->tail->written.store(b->tail_index, std::memory_order_release);
  b->total.store(b->total.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
#endif

std::size_t Recorder::drain(std::vector<Event>& out) {
  std::lock_guard drain_lock(drain_mutex_);
  std::lock_guard lock(registry_mutex_);
  std::size_t appended = 0;
  for (auto& b : buffers_) appended += detail::drain_buffer(*b, out);
  return appended;
}

std::uint64_t Recorder::recorded() const {
  std::lock_guard lock(registry_mutex_);
  std::uint64_t total = 0;
  for (const auto& b : buffers_) total += b->total.load(std::memory_order_relaxed);
  return total;
}

namespace {
// One open schedstat file per thread: opening it costs more than reading it.
struct SchedstatFile {
  int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  ~SchedstatFile() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

std::int64_t thread_run_delay_ns() {
  thread_local SchedstatFile file;
  if (file.fd < 0) return -1;
  char text[96];
  const ssize_t n = ::pread(file.fd, text, sizeof text - 1, 0);
  if (n <= 0) return -1;
  text[n] = '\0';
  char* rest = nullptr;
  std::strtoll(text, &rest, 10);  // time on the CPU
  const long long waited = std::strtoll(rest, nullptr, 10);
  return waited >= 0 ? waited : -1;
}

}  // namespace loom::trace
