// loom-cli subcommands: validate, run, runs, show, compare, export, resume, import, report
// (rename, tag and delete are in edit_commands.cpp). Libraries return errors as values; this file turns
// them into messages with hints and exit codes.
#include "commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <csignal>
#include <limits>
#include <map>
#include <set>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "loom/analysis/analysis.h"
#include "loom/analysis/compare.h"
#include "loom/analysis/critical_path.h"
#include "loom/analysis/export_chrome.h"
#include "loom/analysis/import_kineto.h"
#include "loom/core/model_info.h"
#include "loom/core/plan.h"
#include "loom/core/plan_limits.h"
#include "loom/host/oversubscription.h"
#include "loom/host/run_report.h"
#include "loom/host/resume.h"
#include "loom/store/run_store.h"
#include "loom/text/run_text.h"
#include "loom/trace/machine.h"
#include "run_with_progress.h"

namespace loom::cli {

void print_error(const Error& error) { std::fprintf(stderr, "loom-cli: %s\n", error.describe().c_str()); }

Expected<store::RunStore> open_store(const Args& args) {
  return store::RunStore::open(args.db ? *args.db : store::RunStore::default_path());
}

std::optional<std::int64_t> parse_run_id(const Args& args) {
  if (args.positional.empty()) return std::nullopt;
  try {
    std::size_t used = 0;
    const long long id = std::stoll(args.positional[0], &used);
    if (used == args.positional[0].size() && id > 0) return id;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

namespace {

std::atomic<bool> g_stop_requested{false};

extern "C" void on_interrupt(int) {
  g_stop_requested.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

void print_plan_errors(const std::string& source, const std::vector<PlanError>& errors) {
  for (const PlanError& e : errors) {
    std::fprintf(stderr, "%s: %s: %s\n", source.c_str(), e.path.empty() ? "(document)" : e.path.c_str(),
                 e.reason.c_str());
  }
  std::fprintf(stderr, "%s: %zu error%s; nothing was run\n", source.c_str(), errors.size(),
               errors.size() == 1 ? "" : "s");
}

// The plan named on the command line, or the embedded default when none is named.
std::optional<Plan> load_plan_or_report(const Args& args, bool allow_default) {
  if (args.positional.empty()) {
    if (allow_default) return default_plan();
    std::fprintf(stderr, "loom-cli: this command needs a plan file (see resources/plans/)\n");
    return std::nullopt;
  }
  PlanResult result = load_plan_file(args.positional[0]);
  if (!result.ok()) {
    print_plan_errors(args.positional[0], result.errors);
    return std::nullopt;
  }
  // A plan this machine cannot hold would end in std::bad_alloc inside a rank: say so now.
  const auto memory = limits::check_memory(*result.plan, machine::physical_memory_bytes());
  if (!memory.empty()) {
    print_plan_errors(args.positional[0], memory);
    return std::nullopt;
  }
  return std::move(result.plan);
}

std::string format_time(std::int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

int print_summary(store::RunStore& store, std::int64_t run_id, bool json) {
  auto shown = host::run_report(store, run_id);
  if (!shown.ok()) {
    print_error(shown.error());
    return shown.error().code == ErrorCode::NotFound ? kInvalidInput : kFailed;
  }
  if (json) {
    std::printf("%s\n", host::run_report_json(*shown).dump().c_str());
    return kOk;
  }
  std::printf("%s", text::format_summary(shown->summary).c_str());
  if (const auto& over = shown->oversubscription) {
    std::printf("  oversubscribed: %d ranks shared %d core%s on one machine: ranks took turns on the cores, so step "
                "times and communication waits include time a rank waited for a core\n",
                over->ranks, over->cores, over->cores == 1 ? "" : "s");
  }
  // Both describe training steps across ranks; a serving run's "steps" are one server's
  // batches, which its serving section already describes.
  if (shown->summary.serving) return kOk;
  std::printf("%s%s", text::format_efficiency(shown->efficiency).c_str(),
              text::format_path_analysis(shown->paths, shown->layers).c_str());
  return kOk;
}

// The last test accuracy a run recorded (NaN when it recorded none), as `show` reports it.
Expected<double> last_test_accuracy(store::RunStore& store, std::int64_t run_id) {
  auto metrics = store.load_metrics(run_id, "test_accuracy");
  if (!metrics.ok()) return metrics.error();
  // Ordered by step, then time: the last row is the latest evaluation.
  return metrics->empty() ? std::numeric_limits<double>::quiet_NaN() : metrics->back().value;
}

using TagsByRun = std::map<std::int64_t, std::vector<std::string>>;

std::vector<std::string> tags_of(const TagsByRun& tags, std::int64_t id) {
  auto it = tags.find(id);
  return it == tags.end() ? std::vector<std::string>{} : it->second;
}

void print_runs_json(const std::vector<trace::RunRecord>& runs, const std::vector<double>& accuracy,
                     const TagsByRun& tags) {
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    list.push_back({{"id", r.id}, {"name", r.name}, {"status", trace::to_text(r.status)},
                    {"kind", r.kind.empty() ? std::string("measured") : r.kind}, {"error", r.error},
                    {"started_unix_ms", r.started_unix_ms},
                    {"wall_s", r.wall_s}, {"samples", r.samples}, {"world_size", r.world_size},
                    {"test_accuracy", std::isfinite(accuracy[i]) ? nlohmann::json(accuracy[i]) : nlohmann::json()},
                    {"tags", tags_of(tags, r.id)}});
  }
  std::printf("%s\n", list.dump().c_str());
}

// Characters, not bytes: a UTF-8 name ("café") must pad like an ASCII one.
std::size_t display_width(const std::string& text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string pad_right(const std::string& text, std::size_t width) {
  const std::size_t shown = display_width(text);
  return shown >= width ? text : text + std::string(width - shown, ' ');
}

// Names are printed whole: the column is as wide as the longest one.
void print_runs_table(const std::vector<trace::RunRecord>& runs, const std::vector<double>& accuracy,
                      const TagsByRun& tags) {
  std::size_t name_width = 4;
  for (const auto& r : runs) name_width = std::max(name_width, display_width(r.name));
  std::printf("%6s  %s  %-11s  %-19s  %5s  %9s  %9s  %s\n", "id", pad_right("name", name_width).c_str(), "status",
              "started", "ranks", "wall", "test acc", "tags");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    char acc[32] = "-";
    if (std::isfinite(accuracy[i])) std::snprintf(acc, sizeof acc, "%.2f%%", accuracy[i] * 100.0);
    std::string joined;
    for (const std::string& t : tags_of(tags, r.id)) joined += (joined.empty() ? "" : ", ") + t;
    // As the Runs list: a 24 ms imported trace reads 0.024s, not 0.0s.
    char wall[32];
    std::snprintf(wall, sizeof wall, r.wall_s < 1 ? "%.3fs" : "%.1fs", r.wall_s);
    std::printf("%6lld  %s  %-11s  %-19s  %5d  %9s  %9s  %s\n", static_cast<long long>(r.id),
                pad_right(r.name, name_width).c_str(), r.predicted() ? "predicted" : status_text(r.status).c_str(),
                format_time(r.started_unix_ms).c_str(),
                r.world_size, wall, acc, joined.c_str());
  }
  if (runs.empty()) std::printf("(no runs yet: try `loom-cli run`)\n");
}

// Ctrl-C during the run is a stop request (the run ends stopped, its record kept).
Expected<host::RunOutcome> run_plan(const Plan& plan, store::RunStore& store, const host::ResumeRequest* resume = nullptr) {
  std::signal(SIGINT, on_interrupt);
  auto outcome = run_with_progress(plan, store.path(), g_stop_requested, resume);
  std::signal(SIGINT, SIG_DFL);
  return outcome;
}

// After a run: its summary, and the exit code of how it ended.
int summarise(store::RunStore& store, const Expected<host::RunOutcome>& outcome, bool json) {
  if (!outcome.ok()) return kFailed;
  const int shown = print_summary(store, outcome->run_id, json);
  return shown != kOk ? kFailed : exit_code_of(outcome);
}

}  // namespace

std::optional<Plan> read_plan_argument(const Args& args, bool allow_default) {
  return load_plan_or_report(args, allow_default);
}

Expected<std::int64_t> run_for_lesson(const Plan& plan, store::RunStore& store) {
  const auto outcome = run_plan(plan, store);
  if (!outcome.ok()) return make_error(ErrorCode::Io, "the run of '" + plan.name + "' could not be stored");
  if (exit_code_of(outcome) != kOk)
    return make_error(ErrorCode::Unavailable,
                      "run " + std::to_string(outcome->run_id) + " ('" + plan.name + "') did not complete",
                      "see `loom-cli show " + std::to_string(outcome->run_id) + "` for what happened");
  return outcome->run_id;
}

int cmd_validate(const Args& args) {
  auto plan = load_plan_or_report(args, false);
  if (!plan) return kInvalidInput;
  std::vector<PlanError> errors;
  const ModelInfo info = infer_model(*plan, &errors);
  if (!errors.empty()) {
    print_plan_errors(args.positional[0], errors);
    return kInvalidInput;
  }
  std::printf("plan '%s' is valid: %d rank%s, %lld parameters\n\n%s", plan->name.c_str(), world_size(*plan),
              world_size(*plan) == 1 ? "" : "s", static_cast<long long>(info.total_params),
              format_model_table(info).c_str());
  return kOk;
}

int cmd_run(const Args& args) {
  auto plan = load_plan_or_report(args, true);
  if (!plan) return kInvalidInput;
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  return summarise(*store, run_plan(*plan, *store), args.json);
}

int cmd_runs(const Args& args) {
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  auto runs = store->list_runs();
  if (!runs.ok()) {
    print_error(runs.error());
    return kFailed;
  }
  std::vector<double> accuracy;
  for (const auto& r : *runs) {
    auto a = last_test_accuracy(*store, r.id);
    if (!a.ok()) {
      print_error(a.error());
      return kFailed;
    }
    accuracy.push_back(*a);
  }
  auto tags = store->load_all_tags();
  if (!tags.ok()) {
    print_error(tags.error());
    return kFailed;
  }
  if (args.json) {
    print_runs_json(*runs, accuracy, *tags);
  } else {
    print_runs_table(*runs, accuracy, *tags);
  }
  return kOk;
}

int cmd_show(const Args& args) {
  const auto run_id = parse_run_id(args);
  if (!run_id) {
    std::fprintf(stderr, "loom-cli: show needs a run id (a positive number; see `loom-cli runs`)\n");
    return kInvalidInput;
  }
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  return print_summary(*store, *run_id, args.json);
}

namespace {

// Run ids from the positional arguments; nullopt (after saying which) when one is not an id.
std::optional<std::vector<std::int64_t>> parse_run_ids(const Args& args) {
  std::vector<std::int64_t> ids;
  for (const std::string& text : args.positional) {
    Args one;
    one.positional = {text};
    const auto id = parse_run_id(one);
    if (!id) {
      std::fprintf(stderr, "loom-cli: compare: '%s' is not a run id (a positive number; see `loom-cli runs`)\n",
                   text.c_str());
      return std::nullopt;
    }
    ids.push_back(*id);
  }
  return ids;
}

// --target-accuracy as a fraction: 0.85 and 85 (a percentage) both mean 85%.
std::optional<double> parse_accuracy(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0) || v > 100) return std::nullopt;
  return v > 1 ? v / 100.0 : v;
}

std::optional<analysis::CompareOptions> compare_options(const Args& args) {
  analysis::CompareOptions options;
  if (args.steps) {
    auto range = analysis::parse_step_range(*args.steps);
    if (!range.ok()) {
      print_error(range.error());
      return std::nullopt;
    }
    options.steps = *range;
  }
  if (args.target_accuracy) {
    const auto target = parse_accuracy(*args.target_accuracy);
    if (!target) {
      std::fprintf(stderr, "loom-cli: --target-accuracy: '%s' is not an accuracy (0.85 or 85 mean 85%%)\n",
                   args.target_accuracy->c_str());
      return std::nullopt;
    }
    options.target_accuracy = *target;
  }
  return options;
}

}  // namespace

int cmd_compare(const Args& args) {
  const auto ids = parse_run_ids(args);
  const auto options = ids ? compare_options(args) : std::nullopt;
  if (!ids || !options) return kInvalidInput;
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  auto comparison = analysis::compare_runs(*store, *ids, *options);
  if (!comparison.ok()) {
    const ErrorCode code = comparison.error().code;
    print_error(comparison.error());
    return code == ErrorCode::NotFound || code == ErrorCode::InvalidArgument ? kInvalidInput : kFailed;
  }
  if (args.json) {
    std::printf("%s\n", analysis::comparison_to_json(*comparison).dump().c_str());
  } else {
    std::fputs(text::format_comparison(*comparison).c_str(), stdout);
  }
  return kOk;
}

int cmd_export(const Args& args) {
  const auto run_id = parse_run_id(args);
  if (!run_id || !args.chrome || args.chrome->empty()) {
    std::fprintf(stderr,
                 "loom-cli: export needs a run id and a file\n"
                 "usage: loom-cli export RUN_ID --chrome FILE [--db PATH]   (run ids: `loom-cli runs`)\n");
    return kInvalidInput;
  }
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  auto stats = chrome::export_chrome_trace(*store, *run_id, *args.chrome);
  if (!stats.ok()) {
    if (stats.error().code == ErrorCode::NotFound) {
      std::fprintf(stderr, "loom-cli: %s (hint: `loom-cli runs` lists the stored runs)\n",
                   stats.error().message.c_str());
      return kInvalidInput;
    }
    print_error(stats.error());
    return kFailed;
  }
  std::printf("wrote %lld events from %d ranks to %s\n", static_cast<long long>(stats->events), stats->ranks,
              args.chrome->c_str());
  if (stats->extra_lanes > 0)
    std::printf("(%lld extra lanes hold work that overlapped on one stream, e.g. all-reduce buckets in flight together)\n",
                static_cast<long long>(stats->extra_lanes));
  return kOk;
}

int cmd_resume(const Args& args) {
  const auto run_id = parse_run_id(args);
  if (!run_id) {
    std::fprintf(stderr, "loom-cli: resume needs a run id (a positive number; see `loom-cli runs`)\n");
    return kInvalidInput;
  }
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  auto request = host::prepare_resume(*store, *run_id, args.replicas);
  if (!request.ok()) {
    print_error(request.error());
    return request.error().code == ErrorCode::Io ? kFailed : kInvalidInput;
  }
  std::fprintf(stderr, "loom-cli: resuming run %lld from step %lld (saved by %lld rank%s) on %d rank%s\n",
               static_cast<long long>(*run_id), static_cast<long long>(request->step),
               static_cast<long long>(request->saved_world), request->saved_world == 1 ? "" : "s",
               world_size(request->plan), world_size(request->plan) == 1 ? "" : "s");
  return summarise(*store, run_plan(request->plan, *store, &*request), args.json);
}

int cmd_import(const Args& args) {
  if (!args.kineto || args.positional.empty()) {
    std::fprintf(stderr,
                 "loom-cli: import needs --kineto and at least one trace file\n"
                 "usage: loom-cli import --kineto FILE... [--name NAME] [--rank N] [--db PATH] [--json]\n");
    return kInvalidInput;
  }
  if (args.rank && args.positional.size() > 1) {
    std::fprintf(stderr, "loom-cli: --rank names the rank of one file; with several, name them rank0.json, rank1.json, ...\n");
    return kInvalidInput;
  }
  kineto::ImportOptions options;
  options.name = args.name.value_or("");
  options.rank = args.rank;
  // Every file is parsed and checked before the store is even opened: nothing half-imported.
  auto imported = kineto::import_kineto_files(args.positional, options);
  if (!imported.ok()) {
    print_error(imported.error());
    const ErrorCode code = imported.error().code;
    return code == ErrorCode::Io || code == ErrorCode::Internal ? kFailed : kInvalidInput;
  }
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return kFailed;
  }
  auto id = kineto::store_imported_run(*store, *imported);
  if (!id.ok()) {
    print_error(id.error());
    return kFailed;
  }
  // Steps as every view counts them (analysis summary.cpp steps_recorded): distinct step numbers,
  // not one per rank's ProfilerStep span.
  std::int64_t collectives = 0, events = 0;
  std::set<std::int32_t> step_numbers;
  for (const auto& t : imported->traces) collectives += t.collectives;
  for (const auto& [rank, list] : imported->events) {
    events += std::int64_t(list.size());
    for (const trace::Event& e : list)
      if (e.kind == trace::EventKind::Step) step_numbers.insert(e.step);
  }
  const auto steps = static_cast<std::int64_t>(step_numbers.size());
  if (args.json) {
    std::printf("%s\n", nlohmann::json{{"id", *id}, {"name", imported->run.name}, {"ranks", imported->ranks.size()},
                                       {"world_size", imported->run.world_size}, {"steps", steps},
                                       {"collectives", collectives}, {"events", events}}
                            .dump()
                            .c_str());
  } else {
    std::printf("%s", imported->run.log.c_str());
    std::printf("stored as run %lld '%s': %zu rank%s, %lld steps, %lld events (`loom-cli show %lld`)\n",
                static_cast<long long>(*id), imported->run.name.c_str(), imported->ranks.size(),
                imported->ranks.size() == 1 ? "" : "s", static_cast<long long>(steps), static_cast<long long>(events),
                static_cast<long long>(*id));
  }
  return kOk;
}

int cmd_report(int argc, char** argv) {
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string program = n > 0 ? std::string(self, std::size_t(n)) : std::string("loom-cli");
  program = program.substr(0, program.rfind('/') + 1) + "loom-report";
  std::vector<char*> args{program.data()};
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execv(program.c_str(), args.data());
  std::fprintf(stderr,
               "loom-cli: report: cannot start %s (%s); reports need the workbench's widgets, built where Qt "
               "Widgets and QCustomPlot are installed (scripts/install-deps.sh)\n",
               program.c_str(), std::strerror(errno));
  return kFailed;
}

}  // namespace loom::cli
