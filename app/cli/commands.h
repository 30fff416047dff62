// The subcommands of loom-cli. Each returns the process exit code:
// 0 success, 1 the run or an operation failed, 2 invalid input (plan, arguments),
// 130 the run was stopped by the user (Ctrl-C) and stored as stopped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loom/core/plan.h"
#include "loom/core/status.h"
#include "loom/store/run_store.h"

namespace loom::cli {

enum ExitCode { kOk = 0, kFailed = 1, kInvalidInput = 2, kStopped = 130 };

struct Args {
  std::vector<std::string> positional;
  std::optional<std::string> db;
  std::optional<std::string> chrome;  // export: --chrome FILE
  bool json = false;
  int replicas = 0;  // resume: --replicas N (0: the run's own)
  std::optional<std::string> steps;  // compare: --steps FROM:TO
  std::optional<std::string> target_accuracy;  // compare: --target-accuracy X (0..1 or a percentage)
  bool yes = false;    // delete: --yes (no question)
  bool clear = false;  // tag: --clear (remove every tag)
  bool reset = false;  // calibration: --reset (its runs calibrate no more)
  bool kineto = false;               // import: --kineto (PyTorch profiler traces)
  std::optional<std::string> name;   // import: --name NAME
  std::optional<int> rank;           // import: --rank N (one file without distributedInfo)
  std::optional<std::string> predict;  // lesson: --predict X (the student's answer)
  std::optional<std::string> against;  // predict: --against RUN_ID (a measured run of the plan)
  bool store_prediction = false;       // predict: --store (keep the prediction as a run)
  std::optional<std::string> cluster;  // predict, search: --cluster FILE (a cluster file)
  int scale = 0;                       // predict: --scale N (a scaling curve to N devices)
  int devices = 0;                     // search: --devices N (0: the cluster's, else the plan's ranks)
  int top = 5;                         // search: --top N (layouts shown and saved)
  std::optional<std::string> memory_per_device;  // search: --memory-per-device SIZE
  std::optional<std::string> save;     // search: --save DIR (the top layouts as plan files)
  bool asynchronous = false;           // search: --async (the asynchronous modes too)
};

int cmd_validate(const Args& args);
int cmd_run(const Args& args);
int cmd_runs(const Args& args);
int cmd_show(const Args& args);
int cmd_export(const Args& args);
int cmd_resume(const Args& args);
int cmd_compare(const Args& args);
int cmd_rename(const Args& args);
int cmd_tag(const Args& args);
int cmd_delete(const Args& args);
// Runs loom-report (beside loom-cli) with argv[2...]; its exit code is loom-cli's.
int cmd_report(int argc, char** argv);

// Shared by the commands.
void print_error(const Error& error);  // "loom-cli: message (hint: ...)" on stderr
// "completed", "hung", ...: the store's word, which scripts reading the output match.
inline std::string status_text(trace::RunStatus status) { return std::string(trace::to_text(status)); }
Expected<store::RunStore> open_store(const Args& args);  // --db, else $LOOM_DB, else the default
std::optional<std::int64_t> parse_run_id(const Args& args);  // the first positional, a positive id
int cmd_import(const Args& args);
int cmd_lesson(const Args& args);
int cmd_predict(const Args& args);
int cmd_search(const Args& args);
int cmd_calibrate(const Args& args);
int cmd_calibration(const Args& args);

// The plan file named first on the command line (or the default plan), checked as `run`
// checks it; its errors printed and nullopt when it is refused.
std::optional<Plan> read_plan_argument(const Args& args, bool allow_default);

// Runs a plan as `run` does (in this process or as an mpirun job, with the progress bar)
// and gives its run id; an error when it could not be stored or did not complete.
Expected<std::int64_t> run_for_lesson(const Plan& plan, store::RunStore& store);

}  // namespace loom::cli
