// PyTorch profiler traces (Chrome-trace JSON from Kineto or the legacy profiler) into
// Loom events. A trace has thousands of nested operator spans per step; Loom keeps one
// span per phase: the operators directly under a ProfilerStep (or at the top of a
// thread) become Forward/Backward/Loss/Optimizer/DataLoad spans by kKinetoMapping,
// collectives become communication spans with their bytes, and the ProfilerStep spans
// become Step spans. Everything is validated before anything is returned.
#include "loom/analysis/import_kineto.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "loom/core/plan_limits.h"

namespace loom::kineto {

using nlohmann::json;
using trace::Event;
using trace::EventKind;
using trace::Stream;

namespace {

// ---- The mapping table: the one place that says what a PyTorch event becomes. ----------

// What an operator span is to the importer before it becomes an Event.
enum class Role : std::uint8_t {
  Step,        // ProfilerStep#N: a Loom Step span, step N
  Phase,       // a top-level operator: a compute-side span of `kind`
  Collective,  // issues a collective (c10d::*, record_param_comms): kind from its name
  CommWork,    // does a collective's work (gloo:*, nccl:* outermost on its thread)
};

enum class Match : std::uint8_t { Prefix, Contains };

struct MappingRule {
  Match match;
  std::string_view pattern;
  Role role;
  EventKind kind;  // for Phase; collectives take theirs from the collective's name
};

// First match wins; an operator no rule matches is a Phase whose kind is its step's
// current phase (Forward until the step's first Backward span on that thread, Backward
// after). Documented in docs/manual.md, "Importing PyTorch traces".
constexpr MappingRule kKinetoMapping[] = {
    {Match::Prefix, "ProfilerStep#", Role::Step, EventKind::Step},
    {Match::Prefix, "record_param_comms", Role::Collective, EventKind::AllReduce},
    {Match::Prefix, "c10d::", Role::Collective, EventKind::AllReduce},
    {Match::Prefix, "nccl:", Role::CommWork, EventKind::AllReduce},
    {Match::Prefix, "gloo:", Role::CommWork, EventKind::AllReduce},
    {Match::Prefix, "enumerate(DataLoader)#", Role::Phase, EventKind::DataLoad},
    {Match::Prefix, "Optimizer.step#", Role::Phase, EventKind::Optimizer},
    {Match::Prefix, "Optimizer.zero_grad#", Role::Phase, EventKind::Optimizer},
    {Match::Prefix, "autograd::engine::evaluate_function:", Role::Phase, EventKind::Backward},
    {Match::Contains, "Backward", Role::Phase, EventKind::Backward},
    {Match::Contains, "backward", Role::Phase, EventKind::Backward},
    {Match::Contains, "loss", Role::Phase, EventKind::Loss},
    {Match::Prefix, "DistributedDataParallel.forward", Role::Phase, EventKind::Forward},
};

const MappingRule* rule_for(std::string_view name) {
  for (const MappingRule& r : kKinetoMapping) {
    const bool hit = r.match == Match::Prefix ? name.starts_with(r.pattern) : name.find(r.pattern) != std::string_view::npos;
    if (hit) return &r;
  }
  return nullptr;
}

// A collective's Loom kind from its name ("allreduce", "all_reduce", "broadcast", ...).
// Loom has no all-gather or reduce-scatter kind: those count as all-reduce.
EventKind collective_kind(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (lower.find("broadcast") != std::string::npos) return EventKind::Broadcast;
  if (lower.find("barrier") != std::string::npos) return EventKind::Barrier;
  if (lower.find("recv") != std::string::npos) return EventKind::Recv;
  if (lower.find("send") != std::string::npos) return EventKind::Send;
  return EventKind::AllReduce;
}

// Bytes per element of the dtypes record_param_comms names; 0 = unknown.
std::int64_t dtype_bytes(std::string_view dtype) {
  static constexpr std::pair<std::string_view, int> kSizes[] = {
      {"Float", 4}, {"float", 4}, {"Double", 8}, {"double", 8}, {"Half", 2}, {"half", 2}, {"BFloat16", 2},
      {"Long", 8},  {"long", 8},  {"Int", 4},    {"int", 4},    {"Short", 2}, {"Char", 1}, {"Byte", 1},
      {"Bool", 1},  {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}, {"ComplexFloat", 8}, {"ComplexDouble", 16}};
  for (const auto& [name, size] : kSizes)
    if (dtype == name) return size;
  return 0;
}

// ---- Reading: gzip or plain text, JSON with errors naming the file. ----------------------

constexpr std::size_t kMaxTraceBytes = std::size_t(1) << 31;  // 2 GiB of JSON text
constexpr int kMaxTraceDepth = 64;                            // Kineto nests 4 or 5 deep
constexpr double kMaxAbsTsUs = 4e15;   // microseconds: year 2096 since the epoch
constexpr double kMaxDurUs = 1e12;     // 11.6 days
constexpr std::int64_t kMaxBaseNs = 4'000'000'000'000'000'000;
constexpr double kMaxNelems = 1e15;

Error bad(const std::string& file, const std::string& what, ErrorCode code = ErrorCode::InvalidArgument) {
  return make_error(code, file + ": " + what, "pass PyTorch profiler traces (export_chrome_trace / tensorboard_trace_handler)");
}

Expected<std::string> inflate_gzip(const std::string& data, const std::string& file) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return bad(file, "cannot start zlib", ErrorCode::Internal);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  std::array<char, 1 << 16> buffer{};
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buffer.data());
    z.avail_out = static_cast<uInt>(buffer.size());
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.append(buffer.data(), buffer.size() - z.avail_out);
    if (out.size() > kMaxTraceBytes) rc = Z_MEM_ERROR;
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) break;  // input ended mid-stream
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END)
    return bad(file, rc == Z_MEM_ERROR ? "inflates to more than 2 GiB" : "the gzip stream is damaged or truncated",
               ErrorCode::Corrupt);
  return out;
}

}  // namespace

Expected<std::string> read_trace_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::NotFound, path + ": cannot open the file", "check the path");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::Io, path + ": reading failed");
  std::string data = std::move(text).str();
  if (data.size() >= 2 && std::uint8_t(data[0]) == 0x1f && std::uint8_t(data[1]) == 0x8b) return inflate_gzip(data, path);
  if (data.size() > kMaxTraceBytes) return bad(path, "is larger than 2 GiB");
  return data;
}

std::optional<int> rank_from_file_name(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  auto digits_at = [&](std::size_t pos) -> std::optional<int> {
    std::size_t end = pos;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end])) && end - pos < 6) ++end;
    if (end == pos) return std::nullopt;
    const int rank = std::stoi(name.substr(pos, end - pos));
    return rank <= kMaxImportRank ? std::optional<int>(rank) : std::nullopt;
  };
  for (std::size_t at = name.find("rank"); at != std::string::npos; at = name.find("rank", at + 1)) {
    std::size_t pos = at + 4;
    if (pos < name.size() && (name[pos] == '_' || name[pos] == '-')) ++pos;
    if (auto rank = digits_at(pos)) return rank;
  }
  // "..._1.json", "...-1.pt.trace.json.gz": digits right before the first extension.
  const std::size_t dot = name.find('.');
  std::size_t begin = dot == std::string::npos ? name.size() : dot;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(name[begin - 1]))) --begin;
  if (begin > 0 && begin < dot && (name[begin - 1] == '_' || name[begin - 1] == '-')) return digits_at(begin);
  return std::nullopt;
}

namespace {

// ---- One file's events, checked, before they become Loom events. ----------------------

enum class Device : std::uint8_t { Cpu, GpuKernel, GpuCollective, GpuMemcpy, GpuMemset };

struct Span {
  std::int64_t start = 0, end = 0;
  std::string_view name;
  std::string thread;  // "pid/tid" for CPU spans
  Device device = Device::Cpu;
  const json* args = nullptr;  // null when absent
  std::size_t index = 0;       // in traceEvents, for messages
};

struct Header {
  std::optional<int> rank, world_size;
  std::string backend;
  std::int64_t base_ns = 0;
  bool has_base = false;
};

std::string where(std::size_t index, std::string_view name = {}) {
  std::string w = "traceEvents[" + std::to_string(index) + "]";
  if (!name.empty()) w += " (" + std::string(name.substr(0, 80)) + ")";
  return w;
}

Expected<json> parse_json(const std::string& text, const std::string& file) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return bad(file, "is empty", ErrorCode::Corrupt);
  if (limits::json_depth(text, kMaxTraceDepth + 1) > kMaxTraceDepth)
    return bad(file, "nests JSON deeper than " + std::to_string(kMaxTraceDepth) + " levels: not a profiler trace");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // e.what() names the byte where parsing stopped: truncated files end there.
    return bad(file, std::string("is not valid JSON (truncated or damaged?): ") + e.what(), ErrorCode::Corrupt);
  }
}

// An optional integer member of an object in [lo, hi].
Expected<std::optional<std::int64_t>> int_member(const json& object, const char* key, std::int64_t lo, std::int64_t hi,
                                                 const std::string& file, const std::string& context) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<std::int64_t>();
  std::int64_t value = 0;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() && it->get<std::uint64_t>() > std::uint64_t(hi)) value = hi + 1;
    else value = it->get<std::int64_t>();
  } else if (it->is_number_float() && std::isfinite(it->get<double>()) && it->get<double>() == std::floor(it->get<double>()) &&
             std::fabs(it->get<double>()) < 9e18) {
    value = static_cast<std::int64_t>(it->get<double>());
  } else {
    return bad(file, context + ": '" + key + "' is not an integer");
  }
  if (value < lo || value > hi)
    return bad(file, context + ": '" + key + "' = " + std::to_string(value) + " is outside " + std::to_string(lo) +
                         ".." + std::to_string(hi));
  return std::optional<std::int64_t>(value);
}

Expected<Header> read_header(const json& doc, const std::string& file) {
  Header h;
  if (!doc.is_object()) return h;
  if (auto info = doc.find("distributedInfo"); info != doc.end() && !info->is_null()) {
    if (!info->is_object()) return bad(file, "distributedInfo is not an object");
    auto rank = int_member(*info, "rank", 0, kMaxImportRank, file, "distributedInfo");
    if (!rank.ok()) return rank.error();
    auto world = int_member(*info, "world_size", 1, kMaxImportRank + 1, file, "distributedInfo");
    if (!world.ok()) return world.error();
    if (*rank) h.rank = int(**rank);
    if (*world) h.world_size = int(**world);
    if (auto b = info->find("backend"); b != info->end() && b->is_string()) h.backend = b->get<std::string>();
  }
  auto base = int_member(doc, "baseTimeNanoseconds", 0, kMaxBaseNs, file, "the trace");
  if (!base.ok()) return base.error();
  if (*base) {
    h.base_ns = **base;
    h.has_base = true;
  }
  return h;
}

// "pid" or "tid": numbers and strings ("CPU functions", "stream 7") both occur.
Expected<std::string> id_text(const json& event, const char* key, const std::string& file, std::size_t index) {
  const auto it = event.find(key);
  if (it == event.end() || it->is_null()) return std::string("-");
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->is_number_unsigned() ? std::int64_t(it->get<std::uint64_t>() & 0x7fffffffffffffff) : it->get<std::int64_t>());
  if (it->is_number_float() && std::isfinite(it->get<double>())) return std::to_string(std::llround(std::clamp(it->get<double>(), -9e18, 9e18)));
  return bad(file, where(index) + ": '" + key + "' is neither a number nor a string");
}

Expected<double> number_member(const json& event, const char* key, double lo, double hi, const std::string& file,
                               std::size_t index, std::string_view name) {
  const auto it = event.find(key);
  if (it == event.end() || !it->is_number()) return bad(file, where(index, name) + ": '" + key + "' is missing or not a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    return bad(file, where(index, name) + ": '" + key + "' = " + std::to_string(v) + " is out of range");
  return v;
}

Device device_of(std::string_view cat, std::string_view name) {
  if (cat == "kernel") {
    return name.find("nccl") != std::string_view::npos ? Device::GpuCollective : Device::GpuKernel;
  }
  if (cat == "gpu_memcpy") return Device::GpuMemcpy;
  if (cat == "gpu_memset") return Device::GpuMemset;
  return Device::Cpu;
}

// Categories that duplicate CPU-side spans or are not work: counted, not imported.
bool ignored_category(std::string_view cat) {
  return cat == "gpu_user_annotation" || cat == "cuda_runtime" || cat == "cuda_driver" || cat == "python_function" ||
         cat == "Trace" || cat == "overhead" || cat == "cpu_instant_event" || cat == "ac2g" || cat == "Runtime" ||
         cat == "Memcpy" || cat == "Memset";
}

// One "X" event as a Span; nullopt for events that are read but not imported.
Expected<std::optional<Span>> read_span(const json& event, std::size_t index, const std::string& file) {
  if (!event.is_object()) return bad(file, where(index) + " is not an object");
  const auto ph = event.find("ph");
  if (ph == event.end() || !ph->is_string()) return bad(file, where(index) + ": 'ph' is missing or not a string");
  std::string_view name, cat;
  if (auto n = event.find("name"); n != event.end() && !n->is_null()) {
    if (!n->is_string()) return bad(file, where(index) + ": 'name' is not a string");
    name = n->get_ref<const std::string&>();
  }
  if (auto c = event.find("cat"); c != event.end() && !c->is_null()) {
    if (!c->is_string()) return bad(file, where(index, name) + ": 'cat' is not a string");
    cat = c->get_ref<const std::string&>();
  }
  auto pid = id_text(event, "pid", file, index);
  if (!pid.ok()) return pid.error();
  auto tid = id_text(event, "tid", file, index);
  if (!tid.ok()) return tid.error();
  if (ph->get_ref<const std::string&>() != "X" || ignored_category(cat)) return std::optional<Span>();
  auto ts = number_member(event, "ts", -kMaxAbsTsUs, kMaxAbsTsUs, file, index, name);
  if (!ts.ok()) return ts.error();
  auto dur = number_member(event, "dur", 0, kMaxDurUs, file, index, name);
  if (!dur.ok()) return dur.error();
  const auto args = event.find("args");
  if (args != event.end() && !args->is_null() && !args->is_object())
    return bad(file, where(index, name) + ": 'args' is not an object");
  Span s;
  s.start = std::llround(*ts * 1000.0);  // baseTimeNanoseconds is added by the caller
  s.end = s.start + std::llround(*dur * 1000.0);
  s.name = name;
  s.thread = *pid + "/" + *tid;
  s.device = device_of(cat, name);
  s.args = args != event.end() && args->is_object() ? &*args : nullptr;
  s.index = index;
  return std::optional<Span>(std::move(s));
}

// ---- Building Loom events from the spans of one file. ----------------------------------

// A collective nest (an outermost collective span and what it contains) or a GPU collective.
struct Collective {
  std::int64_t start = 0, end = 0, bytes = 0;
  EventKind kind = EventKind::AllReduce;
  bool issue = true;  // issued (c10d, record_param_comms) rather than the work (gloo:, nccl:, kernel)
  bool kind_from_args = false;
};

// A layer's pass as the trace names it (see layer_label): where it ran, and its layer.
struct LayerSlice {
  std::int64_t start = 0, end = 0;
  EventKind kind = EventKind::Forward;
  std::int32_t layer = -1;
  bool leaf = true;  // contains no other labelled range: the innermost label wins
};

struct Builder {
  const std::string& file;
  bool gpu = false;
  std::vector<Event> events;
  std::vector<std::string> layer_names;  // by layer id, in order of first appearance
  std::vector<Collective> collectives;
  std::vector<std::pair<std::int64_t, std::int64_t>> steps;  // sorted [start, end) with index into step_numbers
  std::vector<std::int32_t> step_numbers;
  std::unordered_map<std::int64_t, EventKind> external_kind;  // "External id" -> phase of its operator
  std::int64_t ignored = 0;

  std::int32_t step_at(std::int64_t t) const {
    auto it = std::upper_bound(steps.begin(), steps.end(), std::make_pair(t, INT64_MAX));
    if (it == steps.begin()) return -1;
    --it;
    return t < it->second ? step_numbers[std::size_t(it - steps.begin())] : -1;
  }
};

Expected<std::int32_t> step_number(std::string_view name, const std::string& file, std::size_t index) {
  const std::string_view digits = name.substr(std::strlen("ProfilerStep#"));
  if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return bad(file, where(index, name) + ": a ProfilerStep without a step number");
  return std::int32_t(std::stol(std::string(digits)));
}

Status collect_steps(const std::vector<Span>& spans, Builder& b) {
  std::vector<std::pair<std::pair<std::int64_t, std::int64_t>, std::int32_t>> found;
  for (const Span& s : spans) {
    if (s.device != Device::Cpu || !s.name.starts_with("ProfilerStep#")) continue;
    auto n = step_number(s.name, b.file, s.index);
    if (!n.ok()) return n.error();
    found.push_back({{s.start, s.end}, *n});
    Event e;
    e.start_ns = s.start;
    e.end_ns = s.end;
    e.step = *n;
    e.kind = EventKind::Step;
    e.stream = Stream::Host;
    b.events.push_back(e);
  }
  std::sort(found.begin(), found.end());
  for (const auto& [range, n] : found) {
    b.steps.push_back(range);
    b.step_numbers.push_back(n);
  }
  return {};
}

// Bytes and kind from record_param_comms' args; an arg of the wrong type is refused.
Status read_collective_args(const Span& s, Collective& c, const std::string& file) {
  if (!s.args) return {};
  const std::string context = where(s.index, s.name);
  if (auto n = s.args->find("Collective name"); n != s.args->end() && n->is_string()) {
    c.kind = collective_kind(n->get_ref<const std::string&>());
    c.kind_from_args = true;
  }
  std::int64_t nelems = 0;
  for (const char* key : {"In msg nelems", "Out msg nelems"}) {
    auto v = int_member(*s.args, key, 0, std::int64_t(kMaxNelems), file, context);
    if (!v.ok()) return v.error();
    if (*v) nelems = std::max(nelems, **v);
  }
  if (auto d = s.args->find("dtype"); d != s.args->end() && d->is_string() && nelems > 0)
    c.bytes = std::max(c.bytes, nelems * dtype_bytes(d->get_ref<const std::string&>()));
  return {};
}

void add_phase(const Span& s, EventKind kind, Builder& b) {
  Event e;
  e.start_ns = s.start;
  e.end_ns = s.end;
  e.step = b.step_at(s.start);
  e.kind = kind;
  e.stream = b.gpu ? Stream::Host : Stream::Compute;  // with a GPU, the CPU side only launches
  b.events.push_back(e);
}

struct Open {
  std::int64_t end;
  const MappingRule* rule;
  int collective = -1;    // index into b.collectives of the nest this span is in
  EventKind phase;        // the phase of its top-level operator
  bool top = false;       // a top-level operator, or a step
  bool step = false;
};

std::int64_t external_id(const Span& s) {
  if (!s.args) return -1;
  const auto it = s.args->find("External id");
  return it != s.args->end() && it->is_number_integer() ? it->get<std::int64_t>() : -1;
}

// A range the trace names as a layer's pass the way Loom names its own spans: "forward
// NAME" or "backward NAME" (record_function ranges a user opens around each layer; PyTorch's
// operators never start so). NAME is the layer, up to 128 bytes.
std::optional<std::pair<EventKind, std::string>> layer_label(std::string_view name) {
  for (const auto& [prefix, kind] : {std::pair{std::string_view("forward "), EventKind::Forward},
                                     std::pair{std::string_view("backward "), EventKind::Backward}}) {
    if (!name.starts_with(prefix)) continue;
    const std::string_view layer = name.substr(prefix.size());
    if (layer.empty() || layer.size() > 128 || layer.front() == ' ') return std::nullopt;
    return std::pair{kind, std::string(layer)};
  }
  return std::nullopt;
}

std::int32_t layer_id(const std::string& name, Builder& b) {
  const auto it = std::find(b.layer_names.begin(), b.layer_names.end(), name);
  if (it != b.layer_names.end()) return std::int32_t(it - b.layer_names.begin());
  b.layer_names.push_back(name);
  return std::int32_t(b.layer_names.size() - 1);
}

// Cuts one forward or backward phase span at the innermost labelled ranges inside it: the
// labelled parts become that layer's pass, the rest stays the whole pass's (layer -1). The
// parts tile the span, so every figure summed over spans is unchanged.
void split_at_layers(const Event& e, const std::vector<LayerSlice>& leaves, std::vector<Event>& out) {
  auto piece = [&](std::int64_t start, std::int64_t end, EventKind kind, std::int32_t layer) {
    if (end <= start) return;
    Event p = e;
    p.start_ns = start, p.end_ns = end, p.kind = kind, p.layer = layer;
    out.push_back(p);
  };
  if (e.kind != EventKind::Forward && e.kind != EventKind::Backward) return out.push_back(e);
  auto it = std::lower_bound(leaves.begin(), leaves.end(), e.start_ns,
                             [](const LayerSlice& l, std::int64_t t) { return l.end <= t; });
  std::int64_t cursor = e.start_ns;
  for (; it != leaves.end() && it->start < e.end_ns; ++it) {
    const std::int64_t from = std::max(it->start, cursor), to = std::min(it->end, e.end_ns);
    piece(cursor, from, e.kind, e.layer);
    piece(from, to, it->kind, it->layer);
    cursor = std::max(cursor, to);
  }
  piece(cursor, e.end_ns, e.kind, e.layer);
}

// Applies a thread's labelled ranges to the phase spans it produced (events[first, end)).
void apply_layer_labels(const std::vector<LayerSlice>& slices, std::size_t first, Builder& b) {
  std::vector<LayerSlice> leaves;
  std::copy_if(slices.begin(), slices.end(), std::back_inserter(leaves), [](const LayerSlice& l) { return l.leaf; });
  if (leaves.empty()) return;
  std::vector<Event> split;
  for (std::size_t i = first; i < b.events.size(); ++i) split_at_layers(b.events[i], leaves, split);
  b.events.resize(first);
  b.events.insert(b.events.end(), split.begin(), split.end());
}

// One CPU thread's spans, sorted by start (outer first): nesting from a stack.
Status walk_thread(const std::vector<const Span*>& spans, Builder& b) {
  std::vector<Open> stack;
  std::int32_t phase_step = INT32_MIN;
  bool in_backward = false;
  const std::size_t first_event = b.events.size();
  std::vector<LayerSlice> slices;        // in start order, outer first, as the spans come
  std::vector<std::size_t> open_slices;  // indices of the labelled ranges around the current span
  for (const Span* s : spans) {
    while (!stack.empty() && stack.back().end <= s->start) stack.pop_back();
    while (!open_slices.empty() && slices[open_slices.back()].end <= s->start) open_slices.pop_back();
    if (const auto label = layer_label(s->name); label && b.step_at(s->start) >= 0) {
      if (!open_slices.empty()) slices[open_slices.back()].leaf = false;
      slices.push_back({s->start, s->end, label->first, layer_id(label->second, b)});
      open_slices.push_back(slices.size() - 1);
    }
    const Open* parent = stack.empty() ? nullptr : &stack.back();
    const MappingRule* rule = rule_for(s->name);
    Open open{s->end, rule, parent ? parent->collective : -1, parent ? parent->phase : EventKind::Forward};
    const bool collective = rule && (rule->role == Role::Collective || rule->role == Role::CommWork);
    if (rule && rule->role == Role::Step) {
      open.step = open.top = true;
    } else if (collective && open.collective < 0) {
      Collective c{s->start, s->end, 0, collective_kind(s->name.substr(s->name.find(':') + 1)), rule->role == Role::Collective};
      LOOM_TRY(read_collective_args(*s, c, b.file));
      open.collective = int(b.collectives.size());
      b.collectives.push_back(c);
    } else if (collective) {
      Collective& nest = b.collectives[std::size_t(open.collective)];  // the nest's args, if the outer one had none
      Collective inner{};
      LOOM_TRY(read_collective_args(*s, inner, b.file));
      nest.bytes = std::max(nest.bytes, inner.bytes);
      if (inner.kind_from_args && !nest.kind_from_args) nest.kind = inner.kind;
    } else if (!parent || parent->step) {
      const std::int32_t step = b.step_at(s->start);
      if (step != phase_step) phase_step = step, in_backward = false;
      EventKind kind = rule ? rule->kind : (in_backward ? EventKind::Backward : EventKind::Forward);
      in_backward = in_backward || kind == EventKind::Backward;
      add_phase(*s, kind, b);
      open.phase = kind;
      open.top = true;
    }
    if (const std::int64_t ext = external_id(*s); ext >= 0) b.external_kind[ext] = open.phase;
    // A child that outlives its parent (rounding in legacy exports) is cut to it.
    if (parent && open.end > parent->end) open.end = parent->end;
    stack.push_back(open);
  }
  apply_layer_labels(slices, first_event, b);
  return {};
}

void add_gpu_span(const Span& s, Builder& b) {
  if (s.device == Device::GpuCollective) {
    Collective c{s.start, s.end, 0, collective_kind(s.name), false};
    b.collectives.push_back(c);
    return;
  }
  Event e;
  e.start_ns = s.start;
  e.end_ns = s.end;
  e.step = b.step_at(s.start);
  if (s.device == Device::GpuMemcpy) {
    e.kind = EventKind::DataLoad;  // copies move data, they do not compute
    e.stream = Stream::Comm;
  } else {
    const auto it = b.external_kind.find(external_id(s));
    e.kind = it != b.external_kind.end() ? it->second : EventKind::Forward;
    e.stream = Stream::Compute;
  }
  b.events.push_back(e);
}

// Pairs each collective's issue (c10d::allreduce_) with its work (gloo:all_reduce on the
// gloo thread, or the NCCL kernel), first in first out per kind as a process group runs
// them, into one span from issue to completion; unpaired ones stay as they are.
void add_collectives(Builder& b) {
  std::sort(b.collectives.begin(), b.collectives.end(), [](const Collective& x, const Collective& y) { return x.start < y.start; });
  std::map<EventKind, std::deque<std::size_t>> issued;
  std::vector<bool> merged(b.collectives.size(), false);
  for (std::size_t i = 0; i < b.collectives.size(); ++i) {
    Collective& c = b.collectives[i];
    if (c.issue) {
      issued[c.kind].push_back(i);
      continue;
    }
    auto& queue = issued[c.kind];
    if (queue.empty()) continue;
    Collective& issue = b.collectives[queue.front()];
    queue.pop_front();
    issue.end = std::max(issue.end, c.end);
    issue.bytes = std::max(issue.bytes, c.bytes);
    merged[i] = true;
  }
  for (std::size_t i = 0; i < b.collectives.size(); ++i) {
    if (merged[i]) continue;
    const Collective& c = b.collectives[i];
    Event e;
    e.start_ns = c.start;
    e.end_ns = c.end;
    e.bytes = c.bytes;
    e.step = b.step_at(c.start);
    e.kind = c.kind;
    e.stream = Stream::Comm;
    b.events.push_back(e);
  }
}

Expected<const json*> event_list(const json& doc, const std::string& file) {
  if (doc.is_array()) return &doc;
  if (!doc.is_object()) return bad(file, "is neither a trace object nor a list of trace events");
  const auto it = doc.find("traceEvents");
  if (it == doc.end()) return bad(file, "has no traceEvents (is it a PyTorch profiler trace?)");
  if (!it->is_array()) return bad(file, "traceEvents is not a list");
  return &*it;
}

// CUDA's version number (12040) as text ("12.4"); "" when absent or not a positive integer.
std::string cuda_version_member(const json& doc, const char* key) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_number_integer()) return {};
  const std::int64_t v = it->get<std::int64_t>();
  if (v <= 0 || v > 1'000'000) return {};
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// The device id of the rank's first GPU span: Kineto writes it as the span's pid.
std::optional<std::int64_t> gpu_of(const std::vector<Span>& spans) {
  for (const Span& s : spans) {
    if (s.device == Device::Cpu) continue;
    const std::string pid = s.thread.substr(0, s.thread.find('/'));
    if (pid.empty() || pid.size() > 6 || pid.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoll(pid);
  }
  return std::nullopt;
}

// The deviceProperties entry of the GPU the rank used (its id, or the only entry), as a
// device identity. Metadata, not events: an entry of an unexpected shape is skipped, never
// a reason to refuse the trace.
trace::DeviceInfo device_of_trace(const json& doc, const std::vector<Span>& spans) {
  const auto props = doc.is_object() ? doc.find("deviceProperties") : doc.end();
  if (!doc.is_object() || props == doc.end() || !props->is_array() || props->empty()) return {};
  const std::optional<std::int64_t> gpu = gpu_of(spans);
  if (!gpu) return {};
  const json* entry = nullptr;
  for (const json& p : *props)
    if (p.is_object() && p.contains("id") && p["id"].is_number_integer() && p["id"].get<std::int64_t>() == *gpu) entry = &p;
  if (!entry && props->size() == 1 && props->front().is_object()) entry = &props->front();
  if (!entry) return {};
  const auto name = entry->find("name"), memory = entry->find("totalGlobalMem");
  json info = {{"kind", "gpu"},
               {"name", name != entry->end() ? *name : json()},
               {"memory_bytes", memory != entry->end() ? *memory : json()},
               {"cuda_runtime", cuda_version_member(doc, "cuda_runtime_version")},
               {"cuda_driver", cuda_version_member(doc, "cuda_driver_version")}};
  const auto major = entry->find("computeMajor"), minor = entry->find("computeMinor");
  if (major != entry->end() && minor != entry->end() && major->is_number_integer() && minor->is_number_integer())
    info["compute_capability"] = std::to_string(major->get<std::int64_t>()) + "." + std::to_string(minor->get<std::int64_t>());
  return trace::device_info_from_json(info);  // checks and bounds every field
}

}  // namespace

Expected<RankTrace> parse_kineto_trace(const std::string& text, const std::string& file, std::optional<int> rank_hint) {
  auto doc = parse_json(text, file);
  if (!doc.ok()) return doc.error();
  auto list = event_list(*doc, file);
  if (!list.ok()) return list.error();
  auto header = read_header(*doc, file);
  if (!header.ok()) return header.error();
  if ((*list)->empty()) return bad(file, "has no trace events");

  std::vector<Span> spans;
  for (std::size_t i = 0; i < (*list)->size(); ++i) {
    auto span = read_span((**list)[i], i, file);
    if (!span.ok()) return span.error();
    if (*span) spans.push_back(std::move(**span));
  }
  // Kineto's ts is relative to baseTimeNanoseconds when the trace has one.
  for (Span& s : spans) s.start += header->base_ns, s.end += header->base_ns;

  RankTrace out;
  out.file = file;
  out.trace_events = std::int64_t((*list)->size());
  if (!header->rank && !rank_hint)
    return bad(file, "does not say its rank (no distributedInfo)", ErrorCode::InvalidArgument);
  out.rank = header->rank ? *header->rank : *rank_hint;
  out.world_size = header->world_size.value_or(0);
  out.backend = header->backend;
  const std::int64_t first = spans.empty() ? 0 : std::min_element(spans.begin(), spans.end(), [](auto& a, auto& b) { return a.start < b.start; })->start;
  out.absolute_clock = header->has_base || first > std::int64_t(1e17);  // 1973 in ns since the epoch
  out.has_gpu = std::any_of(spans.begin(), spans.end(), [](const Span& s) { return s.device != Device::Cpu; });
  out.device = device_of_trace(*doc, spans);

  Builder b{file, out.has_gpu, {}, {}, {}, {}, {}, {}, 0};
  LOOM_TRY(collect_steps(spans, b));
  std::map<std::string, std::vector<const Span*>> threads;
  for (const Span& s : spans)
    if (s.device == Device::Cpu) threads[s.thread].push_back(&s);
  for (auto& [thread, list_of] : threads) {
    std::stable_sort(list_of.begin(), list_of.end(), [](const Span* x, const Span* y) {
      return x->start != y->start ? x->start < y->start : x->end > y->end;
    });
    LOOM_TRY(walk_thread(list_of, b));
  }
  for (const Span& s : spans)
    if (s.device != Device::Cpu) add_gpu_span(s, b);
  add_collectives(b);
  for (const Event& e : b.events) {
    out.steps += e.kind == EventKind::Step;
    if (e.stream == Stream::Comm && trace::is_communication(e.kind)) {
      ++out.collectives;
      out.collective_bytes += e.bytes;
    }
  }
  out.ignored = out.trace_events - std::int64_t(spans.size());
  out.layer_names = std::move(b.layer_names);
  out.events = std::move(b.events);
  std::stable_sort(out.events.begin(), out.events.end(), [](const Event& x, const Event& y) { return x.start_ns < y.start_ns; });
  return out;
}

namespace {

std::string base_name(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Ends of rank r's collectives, in order: a collective completes at about the same moment
// on every rank, so the differences of these ends estimate the clock offset.
std::vector<std::int64_t> collective_ends(const RankTrace& t) {
  std::vector<std::int64_t> ends;
  for (const Event& e : t.events)
    if (e.stream == Stream::Comm && trace::is_communication(e.kind)) ends.push_back(e.end_ns);
  std::sort(ends.begin(), ends.end());
  return ends;
}

// Files whose times count from their own profiler's start (legacy exports) share no
// clock: each rank's offset to rank 0 is the median difference of matching collective
// ends, and its uncertainty half their spread. Ranks with no collectives keep offset 0.
void align_on_collectives(const std::vector<RankTrace>& traces, std::vector<trace::RankRecord>& ranks) {
  const std::vector<std::int64_t> reference = collective_ends(traces.front());
  for (std::size_t i = 1; i < traces.size(); ++i) {
    const std::vector<std::int64_t> ends = collective_ends(traces[i]);
    std::vector<std::int64_t> diffs;
    for (std::size_t k = 0; k < std::min(ends.size(), reference.size()); ++k) diffs.push_back(ends[k] - reference[k]);
    if (diffs.empty()) continue;
    std::sort(diffs.begin(), diffs.end());
    ranks[i].offset_ns = diffs[diffs.size() / 2];
    ranks[i].uncertainty_ns = (diffs.back() - diffs.front()) / 2;
  }
}

Status check_ranks(const std::vector<RankTrace>& traces) {
  for (std::size_t i = 1; i < traces.size(); ++i) {
    if (traces[i].rank == traces[i - 1].rank)
      return bad(traces[i].file, "is rank " + std::to_string(traces[i].rank) + ", as is " + traces[i - 1].file);
    if (traces[i].absolute_clock != traces[0].absolute_clock)
      return bad(traces[i].file, std::string("counts time ") + (traces[i].absolute_clock ? "since the epoch" : "from its profiler's start") +
                                     " but " + traces[0].file + " does not: their clocks cannot be matched");
  }
  return {};
}

// One list of layer names for the run, in order of first appearance over the ranks; each
// rank's events renumbered into it.
std::vector<std::string> unify_layer_names(std::vector<RankTrace>& traces) {
  std::vector<std::string> names;
  for (RankTrace& t : traces) {
    std::vector<std::int32_t> to_run;
    for (const std::string& name : t.layer_names) {
      const auto it = std::find(names.begin(), names.end(), name);
      to_run.push_back(std::int32_t(it - names.begin()));
      if (it == names.end()) names.push_back(name);
    }
    for (Event& e : t.events)
      if (e.layer >= 0) e.layer = to_run[std::size_t(e.layer)];
  }
  return names;
}

std::string plan_of(const std::vector<RankTrace>& traces, int world, const std::vector<std::string>& layers) {
  json files = json::array();
  std::string backend;
  for (const RankTrace& t : traces) {
    files.push_back(base_name(t.file));
    if (backend.empty()) backend = t.backend;
  }
  return json{{"imported", "kineto"}, {"files", files}, {"world_size", world}, {"backend", backend},
              {"clock", traces.front().absolute_clock ? "shared (times since the epoch)" : "per file, aligned on collective ends"},
              {"device", std::any_of(traces.begin(), traces.end(), [](const RankTrace& t) { return t.has_gpu; }) ? "gpu" : "cpu"},
              {"layers", layers}}
      .dump();
}

std::string log_of(const std::vector<RankTrace>& traces) {
  std::string log;
  for (const RankTrace& t : traces) {
    log += "imported " + t.file + " as rank " + std::to_string(t.rank) + ": " + std::to_string(t.trace_events) +
           " trace events, " + std::to_string(t.steps) + " steps, " + std::to_string(t.collectives) + " collectives (" +
           (t.collective_bytes > 0 ? std::to_string(t.collective_bytes) + " bytes" : "bytes not in the trace") + "), " +
           std::to_string(t.events.size()) + " Loom spans; " + std::to_string(t.ignored) + " entries not imported (metadata, instants, flows, launches)\n";
  }
  return log;
}

// Every file read and parsed, its rank from --rank, its name or (one file) 0, in rank order.
Expected<std::vector<RankTrace>> read_rank_traces(const std::vector<std::string>& paths, const ImportOptions& options) {
  std::vector<RankTrace> traces;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    auto text = read_trace_text(paths[i]);
    if (!text.ok()) return text.error();
    std::optional<int> hint = paths.size() == 1 && options.rank ? options.rank : rank_from_file_name(paths[i]);
    if (!hint && paths.size() == 1) hint = 0;  // one file that does not say: rank 0
    auto trace = parse_kineto_trace(*text, paths[i], hint);
    if (!trace.ok()) {
      Error e = trace.error();
      if (!hint) e.hint = "name the files rank0.json, rank1.json, ... or import one file with --rank N";
      return e;
    }
    traces.push_back(std::move(trace).value());
  }
  std::sort(traces.begin(), traces.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  LOOM_TRY(check_ranks(traces));
  return traces;
}

std::vector<trace::RankRecord> rank_records(const std::vector<RankTrace>& traces) {
  std::vector<trace::RankRecord> ranks;
  for (const RankTrace& t : traces) {
    trace::RankRecord r;
    r.rank = t.rank;
    r.device = t.has_gpu ? "gpu" : "cpu";
    r.host = "imported";
    r.events_recorded = std::int64_t(t.events.size());
    r.device_info = t.device;
    ranks.push_back(r);
  }
  return ranks;
}

}  // namespace

Expected<ImportedRun> import_kineto_files(const std::vector<std::string>& paths, const ImportOptions& options) {
  if (paths.empty()) return make_error(ErrorCode::InvalidArgument, "no trace files to import", "name one file per rank");
  auto read = read_rank_traces(paths, options);
  if (!read.ok()) return read.error();
  std::vector<RankTrace> traces = std::move(read).value();
  ImportedRun run;
  int world = traces.back().rank + 1;
  for (const RankTrace& t : traces) world = std::max(world, t.world_size);
  std::vector<trace::RankRecord> ranks = rank_records(traces);
  if (!traces.front().absolute_clock) align_on_collectives(traces, ranks);
  // Shared clock: start the run at 0 so times read as seconds into the trace.
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    for (const Event& e : traces[i].events) {
      first = std::min(first, e.start_ns - ranks[i].offset_ns);
      last = std::max(last, e.end_ns - ranks[i].offset_ns);
    }
  }
  const bool any = first <= last;
  const std::int64_t shift = traces.front().absolute_clock && any ? first : 0;
  run.run.name = !options.name.empty() ? options.name : "pytorch " + base_name(traces.front().file);
  run.run.status = trace::RunStatus::Completed;
  run.run.world_size = world;
  run.run.plan_json = plan_of(traces, world, unify_layer_names(traces));
  run.run.host = "imported";
  run.run.version = "loom import --kineto";
  run.run.wall_s = any ? double(last - first) / 1e9 : 0.0;
  if (traces.front().absolute_clock && any) run.run.started_unix_ms = first / 1'000'000;
  run.run.ended_unix_ms = run.run.started_unix_ms ? run.run.started_unix_ms + std::int64_t(run.run.wall_s * 1000) : 0;
  run.run.log = log_of(traces);
  for (RankTrace& t : traces) {
    for (Event& e : t.events) e.start_ns -= shift, e.end_ns -= shift;
    run.events.emplace_back(t.rank, std::move(t.events));
    t.events.clear();
  }
  run.ranks = std::move(ranks);
  run.traces = std::move(traces);
  return run;
}

Expected<std::int64_t> store_imported_run(store::RunStore& store, const ImportedRun& run) {
  return store.import_run(run.run, run.ranks, run.events, run.metrics);
}

bool is_imported_plan(const std::string& plan_json) {
  const json plan = json::parse(plan_json, nullptr, /*allow_exceptions=*/false);
  return plan.is_object() && plan.contains("imported");
}

std::vector<std::string> imported_layer_names(const std::string& plan_json) {
  const json plan = json::parse(plan_json, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> names;
  if (!plan.is_object() || !plan.contains("imported")) return names;
  const auto layers = plan.find("layers");
  if (layers == plan.end() || !layers->is_array()) return names;
  for (const json& name : *layers) names.push_back(name.is_string() ? name.get<std::string>() : std::string());
  return names;
}

}  // namespace loom::kineto
