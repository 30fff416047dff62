// Mutation harness for the PyTorch trace importer: 1,000 mutated versions of the real DDP
// fixture (byte flips, truncations, deleted and duplicated chunks, JSON values replaced by
// other types, damaged gzip) go through the same path as `loom-cli import --kineto`
// (read_trace_text, then parse_kineto_trace). None may crash (run it under the asan
// preset to catch memory errors), every refusal must carry a message naming the file,
// and every accepted one must give well-formed events. Seeded: the same 1,000 each run.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <random>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "loom/analysis/import_kineto.h"

namespace {

constexpr int kMutations = 1000;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string gzip(const std::string& text) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, uLong(text.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = uInt(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A JSON value of another type than most fields hold.
nlohmann::json odd_value(std::mt19937& rng) {
  switch (rng() % 9) {
    case 0: return "text";
    case 1: return -1;
    case 2: return 1e300;
    case 3: return nullptr;
    case 4: return nlohmann::json::array({1, "x"});
    case 5: return nlohmann::json::object({{"k", 1}});
    case 6: return true;
    case 7: return std::uint64_t(18446744073709551615ULL);
    default: return -9.5e18;
  }
}

// Replaces one member of one event (or of its args) with a value of another type.
std::string change_type(const nlohmann::json& doc, std::mt19937& rng) {
  nlohmann::json copy = doc;
  nlohmann::json& events = copy.is_array() ? copy : copy["traceEvents"];
  nlohmann::json& event = events[rng() % events.size()];
  static const char* kKeys[] = {"ph", "name", "cat", "ts", "dur", "pid", "tid", "args"};
  const char* key = kKeys[rng() % std::size(kKeys)];
  if (rng() % 4 == 0) {
    event = odd_value(rng);  // the whole event
  } else if (std::string(key) == "args" && rng() % 2) {
    static const char* kArgs[] = {"In msg nelems", "Out msg nelems", "dtype", "Collective name", "External id"};
    event["args"] = nlohmann::json::object({{kArgs[rng() % std::size(kArgs)], odd_value(rng)}, {"dtype", "Float"}});
    event["name"] = "record_param_comms";
  } else {
    event[key] = odd_value(rng);
  }
  return copy.dump();
}

std::string mutate(const std::string& text, const nlohmann::json& doc, int kind, std::mt19937& rng) {
  std::string m = text;
  const std::size_t at = rng() % m.size();
  const std::size_t len = 1 + rng() % 2000;
  switch (kind) {
    case 0:
      for (int i = 0, n = 1 + int(rng() % 8); i < n; ++i) m[rng() % m.size()] = char(rng() % 256);
      return m;
    case 1: return m.substr(0, at);
    case 2: return m.erase(at, len);
    case 3: return m.insert(at, m.substr(at, len));
    case 4: return change_type(doc, rng);
    default: {  // a damaged gzip file: flipped bytes or truncated
      std::string z = gzip(rng() % 2 ? text : change_type(doc, rng));
      if (rng() % 2) return z.substr(0, rng() % z.size());
      z[10 + rng() % (z.size() - 10)] ^= char(1 + rng() % 255);
      return z;
    }
  }
}

}  // namespace

class ImportKinetoMutation : public QObject {
  Q_OBJECT
 private slots:
  void mutatedTracesNeverCrashAndRefusalsSayWhy() {
    QTemporaryDir dir;
    const std::string text = slurp(std::string(LOOM_SOURCE_DIR) + "/tests/data/kineto/rank0.json");
    QVERIFY(text.size() > 1000);
    const nlohmann::json doc = nlohmann::json::parse(text);
    std::mt19937 rng(20240517);
    int accepted = 0, refused = 0;
    for (int i = 0; i < kMutations; ++i) {
      const int kind = i % 6;
      const std::string file = dir.filePath(QString("mutant_%1.json").arg(i)).toStdString();
      std::ofstream(file, std::ios::binary) << mutate(text, doc, kind, rng);
      // The importer's own path: read (inflating gzip), then parse and validate.
      auto read = loom::kineto::read_trace_text(file);
      auto trace = read.ok() ? loom::kineto::parse_kineto_trace(*read, file, 0) : loom::Expected<loom::kineto::RankTrace>(read.error());
      if (!trace.ok()) {
        ++refused;
        const std::string message = trace.error().describe();
        QVERIFY2(message.find(file) != std::string::npos, ("refusal without the file: " + message).c_str());
        QVERIFY2(message.size() > file.size() + 10, ("refusal without a reason: " + message).c_str());
        continue;
      }
      ++accepted;
      for (const loom::trace::Event& e : trace->events) QVERIFY2(e.end_ns >= e.start_ns && e.bytes >= 0, file.c_str());
      std::remove(file.c_str());
    }
    qInfo("%d mutations: %d accepted, %d refused with a message naming the file", kMutations, accepted, refused);
    QCOMPARE(accepted + refused, kMutations);
  }
};

QTEST_GUILESS_MAIN(ImportKinetoMutation)
#include "test_import_kineto_mutation.moc"
