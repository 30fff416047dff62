// The live stream: every frame type through encode + FrameDecoder (whole, byte by byte,
// random chunks), malformed input rejected with a message naming the problem, random
// garbage survived, and the client/server over real loopback sockets — including the
// peers that misbehave (wrong secret, garbage, silence, duplicate rank, dropped rank).
#include <QtTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "loom/stream/client.h"
#include "loom/stream/frame.h"
#include "loom/stream/server.h"
#include "loom/test/expect.h"

using loom::ErrorCode;
using loom::Status;
using loom::trace::MetricRecord;
using loom::trace::UpdateRecord;
using loom::trace::Event;
using namespace loom::stream;
using namespace std::chrono_literals;
using loom::testing::must;
using loom::testing::must_ok;

namespace {

// ---- data --------------------------------------------------------------------------

std::vector<Event> make_events(int rank, std::size_t n) {
  std::vector<Event> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    Event& e = v[i];
    const auto k = static_cast<std::int64_t>(i);
    e.start_ns = 1'700'000'000'000'000'000LL + k * 1000 + rank;
    e.end_ns = e.start_ns + 500 + (k % 13);
    e.bytes = (k % 5 == 0) ? (1LL << 40) + k : 0;
    e.step = static_cast<std::int32_t>(k / 100);
    e.layer = static_cast<std::int32_t>(k % 9) - 1;
    e.peer = (k % 3 == 0) ? -1 : 2147483647 - rank;
    e.message = static_cast<std::int32_t>(-k);
    e.microbatch = static_cast<std::int16_t>((k % 40) - 8);
    e.kind = static_cast<loom::trace::EventKind>(k % loom::trace::kEventKindCount);
    e.stream = static_cast<loom::trace::Stream>(k % loom::trace::kStreamCount);
    e.descheduled_us = static_cast<std::int32_t>(k * 7);
  }
  return v;
}

std::vector<MetricRecord> make_metrics(int rank, int n) {
  std::vector<MetricRecord> v;
  for (int i = 0; i < n; ++i)
    v.push_back({rank, std::int64_t(i) - 1, std::int64_t(i) * 1'000'000'007LL, i % 2 ? "loss" : "accuracy/top1 \xc3\xa9",
                 i == 3 ? -0.0 : 1.0 / (i + 3)});
  return v;
}

// Every field distinct and at the edges of its range, so a dropped or swapped field shows.
std::vector<UpdateRecord> make_updates(int server, int n) {
  std::vector<UpdateRecord> v;
  for (int i = 0; i < n; ++i)
    v.push_back({i % 3 == 0 ? 2147483647 : i, server, std::int64_t(i) * 1'000'000'007LL - 5, -(1LL << 40) - i,
                 (1LL << 50) + i, std::int64_t(i) * 3 + 1, 1'700'000'000'000'000'000LL + i});
  return v;
}

bool updates_equal(const std::vector<UpdateRecord>& a, const std::vector<UpdateRecord>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].worker != b[i].worker || a[i].server != b[i].server || a[i].step != b[i].step ||
        a[i].version_read != b[i].version_read || a[i].version_applied != b[i].version_applied ||
        a[i].staleness != b[i].staleness || a[i].t_ns != b[i].t_ns)
      return false;
  return true;
}

Hello sample_hello() {
  Hello h;
  h.secret = std::string(kSecretHexChars, 'a');
  h.run_id = -(1LL << 50);
  h.rank = 3;
  h.world_size = 8;
  h.pid = 123456;
  h.host = "node-17.cluster";
  h.device = std::string("cuda:0\0x", 8);  // embedded NUL survives
  return h;
}

// A GPU rank's identity with every field set and distinct, so a dropped or swapped field shows.
loom::trace::DeviceInfo sample_gpu() {
  loom::trace::DeviceInfo d;
  d.kind = "gpu";
  d.name = "NVIDIA H200";
  d.memory_bytes = 150'011'707'392LL;
  d.logical_cores = 3;
  d.blas_threads = 5;
  d.compute_major = 9;
  d.compute_minor = 1;
  d.driver = "580.159.04";
  d.cuda_driver = "13.1";
  d.cuda_runtime = "13.0";
  d.nccl = "2.28.3";
  return d;
}

// One of every frame type, plus the empty and extreme cases.
std::vector<Frame> sample_frames() {
  std::vector<Frame> f;
  f.push_back(sample_hello());
  f.push_back(Hello{});
  f.push_back(EventBatch{make_events(1, 1000)});
  f.push_back(EventBatch{});
  f.push_back(MetricBatch{make_metrics(2, 7)});
  f.push_back(MetricBatch{});
  f.push_back(UpdateBatch{make_updates(1, 9)});
  f.push_back(UpdateBatch{});
  f.push_back(LogLine{"epoch 1/3 loss 0.4312\n"});
  f.push_back(LogLine{""});
  f.push_back(ClockInfo{-5'000'000'000LL, 7, 1LL << 62, 0, 1234, -1});
  f.push_back(Done{1'000'000, loom::trace::RunStatus::Completed, ""});
  f.push_back(Done{-1, loom::trace::RunStatus::Failed, "out of memory on cuda:0"});
  f.push_back(DeviceReport{sample_gpu()});
  loom::trace::DeviceInfo cpu;
  cpu.kind = "cpu";
  cpu.name = std::string(loom::trace::kMaxDeviceTextBytes, 'c');  // at the bound
  cpu.logical_cores = loom::trace::kMaxDeviceCount;
  cpu.blas_threads = 1;
  cpu.machine = "5b2c8e1a-0d47-4f7e-9a53-2f1e6c0b9d84";
  f.push_back(DeviceReport{cpu});
  return f;
}

std::string encode_frame(const Frame& frame) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, EventBatch>) return encode_events(v.events.data(), v.events.size());
        else if constexpr (std::is_same_v<T, MetricBatch>) return encode_metrics(v.metrics);
        else if constexpr (std::is_same_v<T, UpdateBatch>) return encode_updates(v.updates);
        else return encode(v);
      },
      frame);
}

bool metrics_equal(const std::vector<MetricRecord>& a, const std::vector<MetricRecord>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].rank != b[i].rank || a[i].step != b[i].step || a[i].t_ns != b[i].t_ns || a[i].name != b[i].name ||
        std::memcmp(&a[i].value, &b[i].value, sizeof(double)) != 0)  // bits, so -0.0 counts
      return false;
  return true;
}

bool events_equal(const std::vector<Event>& a, const std::vector<Event>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(Event)) == 0);
}

bool clocks_equal(const ClockInfo& a, const ClockInfo& b) {
  return a.offset_start_ns == b.offset_start_ns && a.offset_end_ns == b.offset_end_ns &&
         a.sync_start_ns == b.sync_start_ns && a.sync_end_ns == b.sync_end_ns &&
         a.uncertainty_ns == b.uncertainty_ns && a.t0_ns == b.t0_ns;
}

bool hellos_equal(const Hello& a, const Hello& b) {
  return a.secret == b.secret && a.run_id == b.run_id && a.rank == b.rank && a.world_size == b.world_size &&
         a.pid == b.pid && a.host == b.host && a.device == b.device;
}

bool frames_equal(const Frame& a, const Frame& b) {
  if (a.index() != b.index()) return false;
  if (auto* h = std::get_if<Hello>(&a)) return hellos_equal(*h, std::get<Hello>(b));
  if (auto* e = std::get_if<EventBatch>(&a)) return events_equal(e->events, std::get<EventBatch>(b).events);
  if (auto* m = std::get_if<MetricBatch>(&a)) return metrics_equal(m->metrics, std::get<MetricBatch>(b).metrics);
  if (auto* u = std::get_if<UpdateBatch>(&a)) return updates_equal(u->updates, std::get<UpdateBatch>(b).updates);
  if (auto* l = std::get_if<LogLine>(&a)) return l->text == std::get<LogLine>(b).text;
  if (auto* c = std::get_if<ClockInfo>(&a)) return clocks_equal(*c, std::get<ClockInfo>(b));
  if (auto* d = std::get_if<DeviceReport>(&a)) return d->info == std::get<DeviceReport>(b).info;
  const Done& x = std::get<Done>(a);
  const Done& y = std::get<Done>(b);
  return x.events_recorded == y.events_recorded && x.status == y.status && x.error == y.error;
}

// Feeds `bytes` in chunks whose sizes come from `next_chunk`; stops at the first error.
Status feed_chunked(FrameDecoder& d, const std::string& bytes, const std::function<std::size_t()>& next_chunk,
                    std::vector<Frame>& out) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    const std::size_t n = std::min(next_chunk(), bytes.size() - at);
    Status s = d.feed(bytes.data() + at, n, out);
    if (!s.ok()) return s;
    at += n;
  }
  return {};
}

// ---- raw frames for malformed input ------------------------------------------------

void put_le(std::string& s, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}

std::string raw_frame(std::uint16_t type, const std::string& payload, std::uint32_t magic = kMagic,
                      std::uint16_t version = kProtocolVersion, std::uint32_t reserved = 0,
                      std::int64_t declared = -1) {
  std::string s;
  put_le(s, magic, 4);
  put_le(s, version, 2);
  put_le(s, type, 2);
  put_le(s, declared >= 0 ? std::uint64_t(declared) : payload.size(), 4);
  put_le(s, reserved, 4);
  return s + payload;
}

std::string le(std::uint64_t v, int bytes) {
  std::string s;
  put_le(s, v, bytes);
  return s;
}

// ---- sockets -----------------------------------------------------------------------

int raw_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(std::uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) qFatal("raw connect failed");
  return fd;
}

void raw_send(int fd, const std::string& bytes) {
  if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != ssize_t(bytes.size())) qFatal("raw send failed");
}

// Records every callback; the test thread waits on it.
class RecordingHandler : public StreamHandler {
 public:
  void on_hello(const Hello& hello) override { record([&] { hellos.push_back(hello); sequence[hello.rank].push_back("hello"); }); }
  void on_events(int rank, std::vector<Event>&& ev) override {
    record([&] {
      sequence[rank].push_back("events:" + std::to_string(ev.size()));
      events[rank].insert(events[rank].end(), ev.begin(), ev.end());
      ++event_frames[rank];
    });
  }
  void on_metrics(int rank, std::vector<MetricRecord>&& m) override {
    record([&] {
      sequence[rank].push_back("metrics:" + std::to_string(m.size()));
      metrics[rank].insert(metrics[rank].end(), m.begin(), m.end());
    });
  }
  void on_updates(int rank, std::vector<UpdateRecord>&& u) override {
    record([&] {
      sequence[rank].push_back("updates:" + std::to_string(u.size()));
      updates[rank].insert(updates[rank].end(), u.begin(), u.end());
    });
  }
  void on_log(int rank, const std::string& text) override { record([&] { sequence[rank].push_back("log:" + text); }); }
  void on_clock(int rank, const ClockInfo& c) override { record([&] { clocks[rank] = c; sequence[rank].push_back("clock"); }); }
  void on_device(int rank, const loom::trace::DeviceInfo& d) override {
    record([&] { devices[rank] = d; sequence[rank].push_back("device:" + d.name); });
  }
  void on_done(int rank, const Done& d) override { record([&] { dones[rank] = d; sequence[rank].push_back("done:" + std::string(loom::trace::to_text(d.status))); }); }
  void on_lost(int rank, const std::string& reason) override { record([&] { lost[rank] = reason; }); }
  void on_rejected(const std::string& peer, const std::string& reason) override {
    record([&] { rejected.emplace_back(peer, reason); });
  }
  void on_tick() override { record([&] { ++ticks; }); }

  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, timeout, pred);
  }
  std::string rejections() {
    std::lock_guard lock(mutex);
    std::string all;
    for (const auto& [peer, reason] : rejected) all += peer + ": " + reason + "\n";
    return all;
  }

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Hello> hellos;
  std::map<int, std::vector<std::string>> sequence;
  std::map<int, std::vector<Event>> events;
  std::map<int, int> event_frames;
  std::map<int, std::vector<MetricRecord>> metrics;
  std::map<int, std::vector<UpdateRecord>> updates;
  std::map<int, ClockInfo> clocks;
  std::map<int, loom::trace::DeviceInfo> devices;
  std::map<int, Done> dones;
  std::map<int, std::string> lost;
  std::vector<std::pair<std::string, std::string>> rejected;
  int ticks = 0;

 private:
  template <class F>
  void record(F f) {
    {
      std::lock_guard lock(mutex);
      f();
    }
    changed.notify_all();
  }
};

// Counts events only, for the throughput check.
class CountingHandler : public StreamHandler {
 public:
  void on_hello(const Hello&) override {}
  void on_events(int, std::vector<Event>&& ev) override { count.fetch_add(std::int64_t(ev.size())); }
  void on_metrics(int, std::vector<MetricRecord>&&) override {}
  void on_updates(int, std::vector<UpdateRecord>&&) override {}
  void on_log(int, const std::string&) override {}
  void on_clock(int, const ClockInfo&) override {}
  void on_device(int, const loom::trace::DeviceInfo&) override {}
  void on_done(int, const Done&) override { done = true; }
  void on_lost(int, const std::string&) override {}
  void on_rejected(const std::string&, const std::string&) override { rejected = true; }
  std::atomic<std::int64_t> count{0};
  std::atomic<bool> done{false}, rejected{false};
};

ServerOptions test_options(int world_size = 2) {
  ServerOptions o;
  o.secret = random_secret();
  o.run_id = 42;
  o.world_size = world_size;
  return o;
}

Hello hello_for(const ServerOptions& o, int rank) {
  Hello h;
  h.secret = o.secret;
  h.run_id = o.run_id;
  h.rank = rank;
  h.world_size = o.world_size;
  h.pid = 1000 + rank;
  h.host = "host" + std::to_string(rank);
  h.device = "cpu";
  return h;
}

std::unique_ptr<StreamServer> must_start(const ServerOptions& o, StreamHandler& h) {
  return must(StreamServer::start(o, h));
}

std::unique_ptr<StreamClient> must_connect(const StreamServer& server, const Hello& hello) {
  return must(StreamClient::connect("127.0.0.1:" + std::to_string(server.port()), hello));
}

}  // namespace

class TestStream : public QObject {
  Q_OBJECT
 private slots:
  void roundTripWhole();
  void roundTripByteByByte();
  void roundTripRandomChunks();
  void malformedIsRejected_data();
  void malformedIsRejected();
  void framesBeforeAnErrorAreDelivered();
  void truncatedFrameStaysBuffered();
  void randomGarbageNeverCrashes();
  void randomSecretIsHex();
  void encoderTruncatesLongStrings();

  void twoRanksDeliverInOrder();
  void badHelloIsRejected_data();
  void badHelloIsRejected();
  void garbageConnectionDoesNotStopServer();
  void firstFrameMustBeHello();
  void malformedFrameFromRankIsRejectedAndLost();
  void disconnectWithoutDoneIsLost();
  void duplicateRankIsRejected();
  void silentConnectionTimesOut();
  void ticksWhileIdle();
  void concurrentSendsDoNotInterleave();
  void sinkSplitsLargeBatches();
  void stopIsPromptAndIdempotent();
  void stopFromHandlerDoesNotDeadlock();
  void startAndConnectErrors();
  void throughput();
};

// ---- protocol ----------------------------------------------------------------------

namespace {
void check_round_trip(const std::function<std::size_t()>& next_chunk) {
  const auto frames = sample_frames();
  std::string bytes;
  for (const auto& f : frames) bytes += encode_frame(f);
  FrameDecoder d;
  std::vector<Frame> out;
  const Status s = feed_chunked(d, bytes, next_chunk, out);
  QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
  QCOMPARE(out.size(), frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) QVERIFY2(frames_equal(frames[i], out[i]), qPrintable(QString("frame %1").arg(i)));
  QCOMPARE(d.buffered(), std::size_t(0));
}
}  // namespace

void TestStream::roundTripWhole() {
  check_round_trip([] { return std::numeric_limits<std::size_t>::max(); });
}

void TestStream::roundTripByteByByte() {
  check_round_trip([] { return std::size_t(1); });
}

void TestStream::roundTripRandomChunks() {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::size_t> size(1, seed % 2 ? 64 : 20000);
    check_round_trip([&] { return size(rng); });
    if (QTest::currentTestFailed()) return;
  }
}

void TestStream::malformedIsRejected_data() {
  QTest::addColumn<QByteArray>("bytes");
  QTest::addColumn<QString>("expected");
  auto add = [](const char* name, const std::string& bytes, const char* expected) {
    QTest::newRow(name) << QByteArray(bytes.data(), qsizetype(bytes.size())) << QString(expected);
  };
  const std::string log = encode(LogLine{"hi"});
  add("bad magic", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "bad magic");
  add("wrong version", raw_frame(4, le(0, 4), kMagic, 99), "unsupported protocol version 99");
  add("version 1 (no Device frame)", raw_frame(4, le(0, 4), kMagic, 1), "unsupported protocol version 1");
  add("version 2 (no machine in the Device frame)", raw_frame(4, le(0, 4), kMagic, 2), "unsupported protocol version 2");
  add("type 0", raw_frame(0, ""), "unknown frame type 0");
  add("type 9", raw_frame(9, ""), "unknown frame type 9");
  add("oversize payload", raw_frame(2, "", kMagic, kProtocolVersion, 0, kMaxPayloadBytes + 1), "exceeds the limit");
  add("reserved set", raw_frame(4, le(0, 4), kMagic, kProtocolVersion, 9), "reserved header field is 9");
  add("events not multiple of 48", raw_frame(2, le(1, 4) + std::string(47, 'x')), "1 events need 48 bytes");
  add("events count mismatch", raw_frame(2, le(3, 4) + std::string(96, 'x')), "3 events need 144 bytes");
  add("events without count", raw_frame(2, "ab"), "payload ends inside a 32-bit field");
  add("string past end", raw_frame(4, le(100, 4) + "0123456789"), "string length 100 past the end");
  add("string over cap", raw_frame(4, le(kMaxStringBytes + 1, 4)), "exceeds the 1 MiB cap");
  add("trailing bytes", raw_frame(5, std::string(49, '\0')), "1 trailing bytes");
  add("clock too short", raw_frame(5, std::string(40, '\0')), "Clock frame: payload ends inside a 64-bit field");
  add("metrics count lie", raw_frame(3, le(1'000'000, 4) + std::string(40, '\0')), "1000000 metrics cannot fit");
  add("metric name past end", raw_frame(3, le(1, 4) + std::string(28, '\0') + le(5, 4) + "ab"), "string length 5 past the end");
  add("updates count mismatch", raw_frame(7, le(2, 4) + std::string(48, '\0')), "2 updates need 96 bytes");
  add("updates without count", raw_frame(7, "a"), "Updates frame: payload ends inside a 32-bit field");
  add("hello truncated", raw_frame(1, le(2, 4) + "ab" + le(0, 4)), "Hello frame: payload ends inside a 64-bit field");
  add("done string past end", raw_frame(6, le(0, 8) + le(9, 4) + "complete"), "Done frame: string length 9");
  // A rank ends completed, failed or stopped; any other word is not a rank's end.
  add("done status running", raw_frame(6, le(0, 8) + le(7, 4) + "running" + le(0, 4)),
      "Done frame: status 'running' is not completed|failed|stopped");
  add("done status unknown", raw_frame(6, le(0, 8) + le(4, 4) + "done" + le(0, 4)),
      "Done frame: status 'done' is not completed|failed|stopped");
  add("valid then bad magic", log + "XXXXXXXXXXXXXXXXXXXX", "bad magic");
  // Device frames: kind, name, memory, cores, BLAS threads, compute major and minor,
  // then five texts (driver, CUDA driver, CUDA runtime, NCCL, machine).
  auto device = [](const std::string& kind, const std::string& name, std::int64_t memory, std::int32_t cores) {
    std::string p = le(kind.size(), 4) + kind + le(name.size(), 4) + name + le(std::uint64_t(memory), 8);
    p += le(std::uint32_t(cores), 4) + le(1, 4) + le(9, 4) + le(0, 4);
    for (int i = 0; i < 5; ++i) p += le(0, 4);
    return raw_frame(8, p);
  };
  add("device kind unknown", device("tpu", "x", 0, 1), "Device frame: device kind 'tpu' is not cpu|gpu");
  add("device kind empty", device("", "x", 0, 1), "device kind '' is not cpu|gpu");
  add("device name too long", device("gpu", std::string(loom::trace::kMaxDeviceTextBytes + 1, 'n'), 0, 1),
      "device name of 257 bytes exceeds 256");
  add("device cores negative", device("cpu", "x", 0, -1), "device cores -1 outside 0..65536");
  add("device cores absurd", device("cpu", "x", 0, 1 << 20), "device cores 1048576 outside 0..65536");
  add("device memory negative", device("gpu", "x", -5, 1), "device memory of -5 bytes");
  const std::string whole = device("gpu", "x", 0, 1);
  add("device truncated", raw_frame(8, whole.substr(kHeaderBytes, whole.size() - kHeaderBytes - 3)),
      "Device frame: payload ends inside a 32-bit field");
  add("device trailing", raw_frame(8, whole.substr(kHeaderBytes) + "z"), "Device frame: 1 trailing bytes");
}

void TestStream::malformedIsRejected() {
  QFETCH(QByteArray, bytes);
  QFETCH(QString, expected);
  const std::string input(bytes.constData(), std::size_t(bytes.size()));
  for (bool byte_by_byte : {false, true}) {
    FrameDecoder d;
    std::vector<Frame> out;
    const Status s = feed_chunked(d, input, [&] { return byte_by_byte ? std::size_t(1) : input.size(); }, out);
    QVERIFY2(!s.ok(), "malformed input was accepted");
    QVERIFY2(QString::fromStdString(s.error().message).contains(expected), s.error().message.c_str());
    QCOMPARE(s.error().code, ErrorCode::Corrupt);
    // After an error the decoder refuses everything, even a valid frame.
    const std::string good = encode(LogLine{"after"});
    out.clear();
    const Status again = d.feed(good.data(), good.size(), out);
    QVERIFY(!again.ok());
    QVERIFY(out.empty());
    QVERIFY2(QString::fromStdString(again.error().message).contains(expected), again.error().message.c_str());
  }
}

void TestStream::framesBeforeAnErrorAreDelivered() {
  const std::string bytes = encode(LogLine{"one"}) + encode(LogLine{"two"}) + raw_frame(kLastFrameType + 1, "");
  FrameDecoder d;
  std::vector<Frame> out;
  QVERIFY(!d.feed(bytes.data(), bytes.size(), out).ok());
  QCOMPARE(out.size(), std::size_t(2));
  QCOMPARE(QString::fromStdString(std::get<LogLine>(out[1]).text), QString("two"));
}

void TestStream::truncatedFrameStaysBuffered() {
  const auto events = make_events(0, 10);
  const std::string frame = encode_events(events.data(), events.size());
  for (std::size_t cut : {std::size_t(1), kHeaderBytes - 1, kHeaderBytes, kHeaderBytes + 5, frame.size() - 1}) {
    FrameDecoder d;
    std::vector<Frame> out;
    QVERIFY(d.feed(frame.data(), cut, out).ok());
    QVERIFY(out.empty());
    QCOMPARE(d.buffered(), cut);
    // The rest completes it.
    QVERIFY(d.feed(frame.data() + cut, frame.size() - cut, out).ok());
    QCOMPARE(out.size(), std::size_t(1));
    QVERIFY(events_equal(std::get<EventBatch>(out[0]).events, events));
    QCOMPARE(d.buffered(), std::size_t(0));
  }
}

void TestStream::randomGarbageNeverCrashes() {
  std::mt19937 rng(12345);
  std::string valid;
  for (const auto& f : sample_frames()) valid += encode_frame(f);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string bytes;
    switch (i % 3) {
      case 0:  // pure noise
        bytes.resize(rng() % 300);
        for (char& c : bytes) c = char(rng());
        break;
      case 1:  // a valid stream with a few bytes flipped and a random cut
        bytes = valid.substr(0, rng() % valid.size());
        for (int k = int(rng() % 4); k >= 0 && !bytes.empty(); --k) bytes[rng() % bytes.size()] = char(rng());
        break;
      default:  // a valid header of a random type and length, then noise
        bytes = raw_frame(std::uint16_t(1 + rng() % kLastFrameType), "", kMagic, kProtocolVersion, 0, rng() % 200);
        for (int k = int(rng() % 220); k > 0; --k) bytes.push_back(char(rng() % 4 == 0 ? 0 : rng()));
    }
    FrameDecoder d;
    std::vector<Frame> out;
    std::uniform_int_distribution<std::size_t> chunk(1, 97);
    const Status s = feed_chunked(d, bytes, [&] { return chunk(rng); }, out);
    (s.ok() ? accepted : rejected)++;
    QVERIFY(d.buffered() <= bytes.size());
  }
  qInfo("garbage: %d inputs decoded cleanly or stayed buffered, %d rejected", accepted, rejected);
  QVERIFY(rejected > 2500);  // the noise does reach the error paths
}

void TestStream::randomSecretIsHex() {
  const std::string a = random_secret(), b = random_secret();
  QCOMPARE(a.size(), kSecretHexChars);
  QVERIFY(a != b);
  QVERIFY(std::all_of(a.begin(), a.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(c); }));
}

void TestStream::encoderTruncatesLongStrings() {
  const std::string frame = encode(LogLine{std::string(kMaxStringBytes + 10, 'x')});
  FrameDecoder d;
  std::vector<Frame> out;
  QVERIFY(d.feed(frame.data(), frame.size(), out).ok());
  QCOMPARE(std::get<LogLine>(out.at(0)).text.size(), std::size_t(kMaxStringBytes));
  // A device's texts and counts are cut to the decoder's bounds, never refused by it.
  loom::trace::DeviceInfo big = sample_gpu();
  big.name = std::string(3 * loom::trace::kMaxDeviceTextBytes, 'g');
  big.nccl = std::string(loom::trace::kMaxDeviceTextBytes + 1, '2');
  big.logical_cores = loom::trace::kMaxDeviceCount + 7;
  big.memory_bytes = -1;
  const std::string device = encode(DeviceReport{big});
  out.clear();
  QVERIFY(d.feed(device.data(), device.size(), out).ok());
  const loom::trace::DeviceInfo& got = std::get<DeviceReport>(out.at(0)).info;
  QCOMPARE(got.name.size(), loom::trace::kMaxDeviceTextBytes);
  QCOMPARE(got.nccl.size(), loom::trace::kMaxDeviceTextBytes);
  QCOMPARE(got.logical_cores, loom::trace::kMaxDeviceCount);
  QCOMPARE(got.memory_bytes, std::int64_t(0));
  QCOMPARE(QString::fromStdString(got.driver), QString("580.159.04"));
}

// ---- sockets -----------------------------------------------------------------------

void TestStream::twoRanksDeliverInOrder() {
  RecordingHandler h;
  const ServerOptions o = test_options(2);
  auto server = must_start(o, h);
  std::map<int, std::vector<Event>> sent_events;
  std::map<int, std::vector<MetricRecord>> sent_metrics;
  for (int r = 0; r < 2; ++r) {
    sent_events[r] = make_events(r, 150);
    sent_metrics[r] = make_metrics(r, 5);
  }
  auto run_rank = [&](int r) {
    auto client = must_connect(*server, hello_for(o, r));
    StreamSink sink(*client);
    const auto& ev = sent_events[r];
    must_ok(sink.write_events(r, ev.data(), 100));
    must_ok(sink.write_metrics(sent_metrics[r]));
    must_ok(sink.write_updates(make_updates(r, 4)));
    must_ok(sink.write_updates({}));  // nothing to send: no frame
    must_ok(sink.write_log("hello from rank " + std::to_string(r)));
    must_ok(sink.write_events(r, ev.data() + 100, 50));
    must_ok(sink.write_clock(ClockInfo{r * 10, r * 20, 1, 2, 3, 4}));
    loom::trace::DeviceInfo device = sample_gpu();
    device.name += " #" + std::to_string(r);
    must_ok(sink.write_device(device));
    must_ok(sink.write_done(Done{150, loom::trace::RunStatus::Completed, ""}));
  };
  std::thread t0(run_rank, 0), t1(run_rank, 1);
  t0.join();
  t1.join();
  QVERIFY(h.wait([&] { return h.dones.size() == 2; }));
  std::this_thread::sleep_for(100ms);  // a clean close after Done must not become on_lost
  std::lock_guard lock(h.mutex);
  QCOMPARE(h.hellos.size(), std::size_t(2));
  QVERIFY(h.lost.empty());
  QVERIFY2(h.rejected.empty(), h.rejected.empty() ? "" : h.rejected[0].second.c_str());
  QCOMPARE(server->ranks_connected(), 2);
  for (int r = 0; r < 2; ++r) {
    const std::vector<std::string> expected = {"hello", "events:100", "metrics:5", "updates:4", "log:hello from rank " + std::to_string(r),
                                               "events:50", "clock", "device:NVIDIA H200 #" + std::to_string(r),
                                               "done:completed"};
    QVERIFY(h.sequence[r] == expected);
    QVERIFY(events_equal(h.events[r], sent_events[r]));
    QVERIFY(metrics_equal(h.metrics[r], sent_metrics[r]));
    QVERIFY(updates_equal(h.updates[r], make_updates(r, 4)));
    QVERIFY(clocks_equal(h.clocks[r], ClockInfo{r * 10, r * 20, 1, 2, 3, 4}));
    QCOMPARE(h.dones[r].events_recorded, std::int64_t(150));
    QCOMPARE(h.devices[r].memory_bytes, sample_gpu().memory_bytes);
  }
  const auto& hello1 = h.hellos[0].rank == 1 ? h.hellos[0] : h.hellos[1];
  QVERIFY(hellos_equal(hello1, hello_for(o, 1)));
}

void TestStream::badHelloIsRejected_data() {
  QTest::addColumn<int>("which");
  QTest::addColumn<QString>("expected");
  QTest::newRow("wrong secret") << 0 << "wrong secret";
  QTest::newRow("short secret") << 1 << "wrong secret";
  QTest::newRow("wrong run id") << 2 << "run id 43";
  QTest::newRow("wrong world size") << 3 << "world size 3";
  QTest::newRow("rank too high") << 4 << "rank 2 outside 0..1";
  QTest::newRow("negative rank") << 5 << "rank -1 outside";
}

void TestStream::badHelloIsRejected() {
  QFETCH(int, which);
  QFETCH(QString, expected);
  RecordingHandler h;
  const ServerOptions o = test_options(2);
  auto server = must_start(o, h);
  Hello bad = hello_for(o, 0);
  switch (which) {
    case 0: bad.secret[10] = bad.secret[10] == 'a' ? 'b' : 'a'; break;
    case 1: bad.secret.pop_back(); break;
    case 2: bad.run_id = 43; break;
    case 3: bad.world_size = 3; break;
    case 4: bad.rank = 2; break;
    default: bad.rank = -1;
  }
  auto client = must_connect(*server, bad);  // the server says nothing back; it closes
  QVERIFY(h.wait([&] { return !h.rejected.empty(); }));
  const std::string all = h.rejections();
  QVERIFY2(QString::fromStdString(all).contains(expected), all.c_str());
  std::lock_guard lock(h.mutex);
  QVERIFY(h.hellos.empty());
  QVERIFY(h.lost.empty());
  QCOMPARE(server->ranks_connected(), 0);
}

void TestStream::garbageConnectionDoesNotStopServer() {
  RecordingHandler h;
  const ServerOptions o = test_options(1);
  auto server = must_start(o, h);
  const int fd = raw_connect(server->port());
  raw_send(fd, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
  QVERIFY(h.wait([&] { return !h.rejected.empty(); }));
  QVERIFY2(QString::fromStdString(h.rejections()).contains("bad magic"), h.rejections().c_str());
  ::close(fd);
  auto client = must_connect(*server, hello_for(o, 0));
  must_ok(StreamSink(*client).write_done(Done{0, loom::trace::RunStatus::Completed, ""}));
  QVERIFY(h.wait([&] { return h.dones.count(0) == 1; }));
  std::lock_guard lock(h.mutex);
  QCOMPARE(h.rejected.size(), std::size_t(1));
}

void TestStream::firstFrameMustBeHello() {
  RecordingHandler h;
  auto server = must_start(test_options(1), h);
  const int fd = raw_connect(server->port());
  raw_send(fd, encode(LogLine{"sneaky"}));
  QVERIFY(h.wait([&] { return !h.rejected.empty(); }));
  QVERIFY2(QString::fromStdString(h.rejections()).contains("first frame is Log, expected Hello"), h.rejections().c_str());
  ::close(fd);
  std::lock_guard lock(h.mutex);
  QVERIFY(h.sequence.empty());
}

void TestStream::malformedFrameFromRankIsRejectedAndLost() {
  RecordingHandler h;
  const ServerOptions o = test_options(2);
  auto server = must_start(o, h);
  const int fd = raw_connect(server->port());
  raw_send(fd, encode(hello_for(o, 1)) + encode(LogLine{"ok"}) + raw_frame(2, le(2, 4) + std::string(50, 'x')));
  QVERIFY(h.wait([&] { return h.lost.count(1) == 1; }));
  ::close(fd);
  std::lock_guard lock(h.mutex);
  QCOMPARE(h.rejected.size(), std::size_t(1));
  QVERIFY(QString::fromStdString(h.rejected[0].second).contains("2 events need 96 bytes"));
  QVERIFY(QString::fromStdString(h.rejected[0].first).contains("rank 1"));
  QVERIFY((h.sequence[1] == std::vector<std::string>{"hello", "log:ok"}));
}

void TestStream::disconnectWithoutDoneIsLost() {
  RecordingHandler h;
  const ServerOptions o = test_options(2);
  auto server = must_start(o, h);
  auto client = must_connect(*server, hello_for(o, 1));
  const auto events = make_events(1, 10);
  must_ok(StreamSink(*client).write_events(1, events.data(), events.size()));
  QVERIFY(h.wait([&] { return h.events[1].size() == 10; }));
  QElapsedTimer timer;
  timer.start();
  client->close();
  QVERIFY(h.wait([&] { return h.lost.count(1) == 1; }, 1000ms));
  qInfo("on_lost after %lld ms", static_cast<long long>(timer.elapsed()));
  QVERIFY(timer.elapsed() < 1000);
  std::lock_guard lock(h.mutex);
  QVERIFY2(QString::fromStdString(h.lost[1]).contains("before Done"), h.lost[1].c_str());
  QVERIFY(h.rejected.empty());
  QVERIFY(h.dones.empty());
}

void TestStream::duplicateRankIsRejected() {
  RecordingHandler h;
  const ServerOptions o = test_options(2);
  auto server = must_start(o, h);
  auto first = must_connect(*server, hello_for(o, 0));
  QVERIFY(h.wait([&] { return h.hellos.size() == 1; }));
  auto second = must_connect(*server, hello_for(o, 0));
  QVERIFY(h.wait([&] { return !h.rejected.empty(); }));
  QVERIFY2(QString::fromStdString(h.rejections()).contains("rank 0 already connected"), h.rejections().c_str());
  // The first connection is unaffected.
  must_ok(StreamSink(*first).write_done(Done{0, loom::trace::RunStatus::Completed, ""}));
  QVERIFY(h.wait([&] { return h.dones.count(0) == 1; }));
  std::lock_guard lock(h.mutex);
  QCOMPARE(h.hellos.size(), std::size_t(1));
  QVERIFY(h.lost.empty());
  QCOMPARE(server->ranks_connected(), 1);
}

void TestStream::silentConnectionTimesOut() {
  RecordingHandler h;
  ServerOptions o = test_options(1);
  o.hello_timeout = 200ms;
  auto server = must_start(o, h);
  const int fd = raw_connect(server->port());
  raw_send(fd, std::string(encode(hello_for(o, 0))).substr(0, 20));  // a Hello that never completes
  QVERIFY(h.wait([&] { return !h.rejected.empty(); }, 2000ms));
  QVERIFY2(QString::fromStdString(h.rejections()).contains("no Hello within 200 ms"), h.rejections().c_str());
  // The server closed it: the next read sees EOF.
  char byte;
  QCOMPARE(::recv(fd, &byte, 1, 0), ssize_t(0));
  ::close(fd);
}

void TestStream::ticksWhileIdle() {
  RecordingHandler h;
  auto server = must_start(test_options(1), h);
  QVERIFY(h.wait([&] { return h.ticks >= 4; }, 2000ms));  // 50 ms period: ~200 ms
}

void TestStream::concurrentSendsDoNotInterleave() {
  RecordingHandler h;
  const ServerOptions o = test_options(1);
  auto server = must_start(o, h);
  auto client = must_connect(*server, hello_for(o, 0));
  StreamSink sink(*client);
  constexpr int kPerThread = 2000;
  auto spam = [&](int which) {
    const auto events = make_events(which, 37);
    for (int i = 0; i < kPerThread; ++i)
      must_ok(which == 0 ? sink.write_log(std::string(100 + i % 50, 'a')) : sink.write_events(0, events.data(), events.size()));
  };
  std::thread a(spam, 0), b(spam, 1);
  a.join();
  b.join();
  must_ok(sink.write_done(Done{0, loom::trace::RunStatus::Completed, ""}));
  QVERIFY(h.wait([&] { return h.dones.count(0) == 1; }));
  std::lock_guard lock(h.mutex);
  QVERIFY2(h.rejected.empty(), h.rejected.empty() ? "" : h.rejected[0].second.c_str());
  QCOMPARE(h.sequence[0].size(), std::size_t(2 + 2 * kPerThread));
  QCOMPARE(h.events[0].size(), std::size_t(37 * kPerThread));
}

void TestStream::sinkSplitsLargeBatches() {
  RecordingHandler h;
  const ServerOptions o = test_options(1);
  auto server = must_start(o, h);
  auto client = must_connect(*server, hello_for(o, 0));
  StreamSink sink(*client);
  const auto events = make_events(0, kMaxEventsPerFrame + 10);
  must_ok(sink.write_events(0, events.data(), events.size()));
  // Metrics whose names add up past the payload limit: 20 names of 1 MiB.
  std::vector<MetricRecord> metrics(20);
  for (int i = 0; i < 20; ++i) metrics[std::size_t(i)] = {0, i, i, std::string(kMaxStringBytes, char('a' + i)), double(i)};
  must_ok(sink.write_metrics(metrics));
  const auto updates = make_updates(0, int(kMaxUpdatesPerFrame) + 3);
  must_ok(sink.write_updates(updates));
  must_ok(sink.write_done(Done{std::int64_t(events.size()), loom::trace::RunStatus::Completed, ""}));
  QVERIFY(h.wait([&] { return h.dones.count(0) == 1; }, 20s));
  std::lock_guard lock(h.mutex);
  QVERIFY2(h.rejected.empty(), h.rejected.empty() ? "" : h.rejected[0].second.c_str());
  QCOMPARE(h.event_frames[0], 2);
  QVERIFY(events_equal(h.events[0], events));
  QVERIFY(metrics_equal(h.metrics[0], metrics));
  QVERIFY(updates_equal(h.updates[0], updates));
  QCOMPARE(std::count(h.sequence[0].begin(), h.sequence[0].end(), "updates:" + std::to_string(kMaxUpdatesPerFrame)),
           std::ptrdiff_t(1));
  QCOMPARE(h.sequence[0].back(), std::string("done:completed"));
  QVERIFY(h.sequence[0].size() >= 8);  // hello, 2 event frames, >= 2 metric frames, 2 update frames, done
}

void TestStream::stopIsPromptAndIdempotent() {
  RecordingHandler h;
  const ServerOptions o = test_options(2);
  auto server = must_start(o, h);
  auto client = must_connect(*server, hello_for(o, 0));
  const int silent = raw_connect(server->port());
  QVERIFY(h.wait([&] { return h.hellos.size() == 1; }));
  QElapsedTimer timer;
  timer.start();
  server->stop();
  qInfo("stop() took %lld ms", static_cast<long long>(timer.elapsed()));
  QVERIFY(timer.elapsed() < 500);
  server->stop();
  // The server closed the connections: the rank's sends fail soon (EPIPE/ECONNRESET), not hang.
  Status s;
  for (int i = 0; i < 100 && s.ok(); ++i) {
    s = StreamSink(*client).write_log("anyone there?");
    std::this_thread::sleep_for(5ms);
  }
  QVERIFY(!s.ok());
  QCOMPARE(s.error().code, ErrorCode::Io);
  ::close(silent);
}

void TestStream::stopFromHandlerDoesNotDeadlock() {
  // A host that stops streaming when the last rank is done, from inside the callback.
  struct StoppingHandler : RecordingHandler {
    StreamServer* server = nullptr;
    void on_done(int rank, const Done& d) override {
      RecordingHandler::on_done(rank, d);
      server->stop();
    }
  } h;
  const ServerOptions o = test_options(1);
  auto server = must_start(o, h);
  h.server = server.get();
  auto client = must_connect(*server, hello_for(o, 0));
  must_ok(StreamSink(*client).write_done(Done{0, loom::trace::RunStatus::Stopped, ""}));
  QVERIFY(h.wait([&] { return h.dones.count(0) == 1; }));
  QElapsedTimer timer;
  timer.start();
  server.reset();  // joins the thread that asked to stop
  QVERIFY(timer.elapsed() < 500);
}

void TestStream::startAndConnectErrors() {
  RecordingHandler h;
  ServerOptions o = test_options(1);
  o.secret = "short";
  auto bad = StreamServer::start(o, h);
  QVERIFY(!bad.ok());
  QCOMPARE(bad.error().code, ErrorCode::InvalidArgument);

  o = test_options(1);
  auto server = must_start(o, h);
  ServerOptions same_port = o;
  same_port.port = server->port();
  auto busy = StreamServer::start(same_port, h);
  QVERIFY(!busy.ok());
  QCOMPARE(busy.error().code, ErrorCode::Unavailable);

  const int port = server->port();
  server.reset();  // nothing listens there now
  auto refused = StreamClient::connect("127.0.0.1:" + std::to_string(port), hello_for(o, 0), 2000ms);
  QVERIFY(!refused.ok());
  QCOMPARE(refused.error().code, ErrorCode::Unavailable);
  auto no_port = StreamClient::connect("localhost", hello_for(o, 0));
  QVERIFY(!no_port.ok());
  QCOMPARE(no_port.error().code, ErrorCode::InvalidArgument);
}

void TestStream::throughput() {
  CountingHandler h;
  const ServerOptions o = test_options(1);
  auto server = must_start(o, h);
  auto client = must_connect(*server, hello_for(o, 0));
  StreamSink sink(*client);
  constexpr std::size_t kTotal = 1'000'000, kBatch = 10'000;  // ~100 ms of a busy rank per batch
  const auto events = make_events(0, kBatch);
  QElapsedTimer timer;
  timer.start();
  for (std::size_t sent = 0; sent < kTotal; sent += kBatch) must_ok(sink.write_events(0, events.data(), kBatch));
  must_ok(sink.write_done(Done{std::int64_t(kTotal), loom::trace::RunStatus::Completed, ""}));
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!h.done && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  const double seconds = double(timer.nsecsElapsed()) / 1e9;
  QVERIFY(h.done);
  QVERIFY(!h.rejected);
  QCOMPARE(h.count.load(), std::int64_t(kTotal));
  qInfo("throughput: %zu events in %.3f s over loopback = %.2f M events/s (%.0f MB/s)", kTotal, seconds,
        double(kTotal) / seconds / 1e6, double(kTotal * sizeof(Event)) / seconds / 1e6);
}

QTEST_GUILESS_MAIN(TestStream)
#include "test_stream.moc"
