// loom-cli: Loom's engine without the GUI, for terminals, scripts and clusters.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include "commands.h"

namespace {

constexpr const char* kUsage =
    "usage: loom-cli <command> [options]\n"
    "\n"
    "commands:\n"
    "  validate PLAN                    check a plan; print its layers, shapes, parameters and memory\n"
    "  predict [PLAN]                   predict one steady step from this machine's stored runs\n"
    "  calibration                      the costs predict uses, fitted from this machine's runs\n"
    "  search [PLAN] [--cluster FILE]   predict every layout of a plan and rank them\n"
    "  calibrate [PLAN] [--steps N]     short real runs of a plan's model that calibrate predict\n"
    "  run [PLAN] [--db PATH] [--json]  train the plan (default: the embedded MLP plan) and record the run\n"
    "  runs [--db PATH] [--json]        list stored runs\n"
    "  show RUN_ID [--db PATH] [--json] summarise a stored run\n"
    "  compare RUN_ID RUN_ID [...]      two to six stored runs side by side: figures, ratios, phase diff\n"
    "  rename RUN_ID NAME               give a stored run another name\n"
    "  tag RUN_ID TAG... [--clear]      add tags to a stored run (shown by `runs`)\n"
    "  delete RUN_ID [--yes]            delete a finished run with its events, metrics and updates\n"
    "  export RUN_ID --chrome FILE      write a stored run as a Chrome trace (open it in Perfetto)\n"
    "  resume RUN_ID [--replicas N]     continue a failed, stopped, hung or interrupted run from its checkpoint\n"
    "  import --kineto FILE...          store PyTorch profiler traces (one per rank) as a run to show and compare\n"
    "  report RUN_ID... --html/--pdf F  a report of one run or a comparison, with charts and timelines\n"
    "  lesson [NAME] [--predict X]      a lesson on real runs: predict, run, see the measurement and theory\n"
    "\n"
    "`loom-cli <command> --help` describes one command.\n"
    "The run store is --db PATH, else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db.\n"
    "Exit codes: 0 ok, 1 failed, 2 invalid input, 130 stopped by Ctrl-C.\n";

struct CommandHelp {
  const char* name;
  const char* text;
};

// What `loom-cli <command> --help` prints (to stdout, exit 0).
constexpr CommandHelp kCommandHelp[] = {
    {"validate",
     "usage: loom-cli validate PLAN\n"
     "\n"
     "Reads a plan file (resources/plans/ has examples) and checks it: syntax, unknown keys,\n"
     "shapes against the dataset, stage placement, devices against the strategy, and what\n"
     "this build can run. Prints the layers with their shapes, parameters and memory.\n"
     "Exit codes: 0 valid, 2 invalid (every error is printed with its JSON path).\n"},
    {"predict",
     "usage: loom-cli predict [PLAN] [--cluster FILE] [--replicas N] [--scale N] [--against RUN_ID]\n"
     "                        [--store] [--db PATH] [--json]\n"
     "\n"
     "Predicts one steady training step of the plan (default: the embedded MLP plan) before\n"
     "it runs: step time, throughput and what each rank does when, from costs calibrated on\n"
     "this machine's completed runs in the store (each layer's forward and backward, loss,\n"
     "optimizer, data loading, all-reduce and messages). docs/prediction.md says how.\n"
     "Synchronous training on cpu ranks: one process, data parallel, pipelines, hybrid,\n"
     "gradient accumulation, stragglers.\n"
     "  --db PATH   the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
     "  --against RUN_ID  beside a measured run of the plan: the step, and per rank and span\n"
     "                    kind the predicted and the measured time per step, and the error\n"
     "  --store     keep the prediction as a run of kind \"predicted\" (six equal steps), to\n"
     "              compare, report and open beside measured runs; never calibrates\n"
     "  --cluster FILE  on a cluster instead of this machine: hosts, devices per host (this\n"
     "                  machine's calibrated rank, or a roofline), links (docs/prediction.md)\n"
     "  --replicas N    the plan with N data-parallel replicas (same global batch)\n"
     "  --scale N       a scaling curve: 1, 2, 4, ... replicas up to N devices, each replica\n"
     "                  keeping the plan's per-replica batch\n"
     "  --json      one JSON line: the figures, memory per rank and every predicted span\n"
     "Exit codes: 0 predicted, 1 not calibrated for this plan (it names what to run), 2 an\n"
     "invalid plan or cluster file, or one the predictor does not cover yet.\n"},
    {"search",
     "usage: loom-cli search [PLAN] [--cluster FILE] [--devices N] [--memory-per-device SIZE]\n"
     "                       [--top N] [--save DIR] [--async] [--db PATH] [--json]\n"
     "\n"
     "Predicts the plan's model and global batch laid out every way the devices allow: data-\n"
     "parallel replicas (powers of two, and all), pipeline stages (layers cut for equal work),\n"
     "micro-batches 1/2/4/8, GPipe and 1F1B, buckets 1/5/25 MB. Drops layouts whose fullest\n"
     "rank would need more than SIZE (e.g. 512MiB, 16GiB), ranks the rest by predicted\n"
     "throughput, and prints the top 5 with their breakdowns and why each loses to the first.\n"
     "With a memory limit it also tries gradient accumulation (2/4/8 micro-steps, one stage).\n"
     "  --devices N  at most N ranks (default: the cluster's devices, else the plan's ranks)\n"
     "  --top N      show (and save) the first N layouts, not 5\n"
     "  --save DIR   write the top ones as plan files DIR/layout-1.json ... to open or run\n"
     "  --async      also a parameter server and ssp (bounds 1/2/4) with one or two servers,\n"
     "               and local SGD every 2/4/8 steps (ranked by throughput: their gradients\n"
     "               are stale, see the staleness each prints)\n"
     "Exit codes: 0 ranked, 1 not calibrated, 2 invalid plan, cluster or size.\n"},
    {"calibrate",
     "usage: loom-cli calibrate [PLAN] [--steps N] [--db PATH] [--json]\n"
     "\n"
     "Runs the plan's model briefly (N steps, default 200, no evaluation) in the layouts and\n"
     "sizes whose costs `predict`, `search` and the workbench's What-if need on this machine:\n"
     "the plan as written; one process with every core and two replicas, each at the plan's\n"
     "batch and at four times it (then with 1 KB buckets: the all-reduce at every tensor's\n"
     "size); a two-stage 1F1B pipeline with 4 micro-batches (each where the batch and layers\n"
     "allow). An asynchronous plan only as written. Each is a real run, stored and tagged\n"
     "\"calibration\"; delete them to forget what they measured. Plans on this machine only\n"
     "(a gpu plan's layouts run on its GPU). Fewer steps are quicker but measure the first\n"
     "steps, which ran up to 2x slower than later ones in half of this project's runs.\n"
     "Exit codes: 0 calibrated, 1 a run failed, 2 an invalid or uncovered plan.\n"},
    {"calibration",
     "usage: loom-cli calibration [--db PATH] [--json] [--reset]\n"
     "\n"
     "Prints the costs `predict` uses: for each layer's forward and backward (by kind, shapes\n"
     "and BLAS threads), the loss, the optimizer, data loading, all-reduce, messages and the\n"
     "time no span covers, the line time = fixed + per unit x units fitted through the medians\n"
     "of this machine's completed synchronous runs in the store. Nothing is kept apart from\n"
     "the runs: delete runs to forget what they measured, or --reset.\n"
     "  --reset     every run that calibrates now is tagged \"not calibrating\" and calibrates\n"
     "              no more; the runs stay (`loom-cli tag RUN --clear` brings one back)\n"
     "  --db PATH   the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
     "  --json      one JSON object instead of the table\n"},
    {"run",
     "usage: loom-cli run [PLAN] [--db PATH] [--json]\n"
     "\n"
     "Trains the plan (default: the embedded MLP plan) and records the run in the store.\n"
     "A plan of one rank trains in this process; more ranks run as an mpirun job (srun under\n"
     "Slurm) of loom-rank processes. When ranks outnumber a host's cores it says so first.\n"
     "  --db PATH   the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
     "  --json      print the run's summary as one JSON line instead of text\n"
     "Exit codes: 0 completed, 1 failed (stored as failed), 2 invalid plan or arguments,\n"
     "130 stopped by Ctrl-C or from outside, e.g. scancel (stored as stopped).\n"},
    {"runs",
     "usage: loom-cli runs [--db PATH] [--json]\n"
     "\n"
     "Lists the stored runs: id, name, status, start time, ranks, wall time and the last\n"
     "test accuracy.\n"
     "  --db PATH   the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
     "  --json      one JSON array instead of the table\n"},
    {"show",
     "usage: loom-cli show RUN_ID [--db PATH] [--json]\n"
     "\n"
     "Summarises a stored run (ids: `loom-cli runs`): what each rank ran on (CPU model, or GPU,\n"
     "memory, driver, CUDA and NCCL versions), throughput, loss and accuracy, per-rank\n"
     "breakdown, all-reduce and clock figures for several ranks, pipeline bubbles per stage.\n"
     "  --db PATH   the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
     "  --json      the summary as one JSON line\n"},
    {"compare",
     "usage: loom-cli compare RUN_ID RUN_ID [...] [--steps FROM:TO] [--target-accuracy X]\n"
     "                        [--db PATH] [--json]\n"
     "\n"
     "Compares 2 to 6 stored runs; the first is the baseline (A). Prints each figure for every\n"
     "run with its ratio to A and the better run starred: step time (median, p95), throughput,\n"
     "time per step in compute, communication, exposed communication, optimizer, data, idle and\n"
     "descheduled, the critical path per step split into work, communication, waiting,\n"
     "descheduled and untraced (where the step time went), time lost waiting for late ranks,\n"
     "pipeline bubble, all-reduce busbw, staleness, final loss and accuracy, POP\n"
     "efficiencies, scaling efficiency. Then the phase diff: for each rank role (stage S,\n"
     "worker, server) and phase (forward and backward per layer, each all-reduce bucket,\n"
     "send, receive, push, pull, optimizer, wait, ...) the median ms per step in every run.\n"
     "Figures are defined in docs/figures.md.\n"
     "  --steps FROM:TO         step times, critical path and phases over steps FROM..TO-1 (FROM: or :TO\n"
     "                          leave one end open); warm-up steps never count\n"
     "  --target-accuracy X     add the time and steps to reach test accuracy X (0.85 or 85)\n"
     "  --db PATH               the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
     "  --json                  one JSON object (its shape: docs/figures.md, \"Comparing runs\")\n"
     "Exit codes: 0 ok, 2 fewer than 2 or more than 6 runs, an unknown run or a bad option.\n"},
    {"rename",
     "usage: loom-cli rename RUN_ID NAME [--db PATH]\n"
     "\n"
     "Gives a stored run (ids: `loom-cli runs`) another name; a running run too.\n"
     "Exit codes: 0 renamed, 2 an unknown run or no name.\n"},
    {"tag",
     "usage: loom-cli tag RUN_ID TAG... [--clear] [--db PATH]\n"
     "\n"
     "Adds tags to a stored run; `runs` lists them. A tag is 1 to 64 characters without\n"
     "commas. --clear removes the run's tags first (alone: removes them all).\n"
     "Exit codes: 0 tagged, 2 an unknown run or a bad tag (nothing changes).\n"},
    {"delete",
     "usage: loom-cli delete RUN_ID [--yes] [--db PATH]\n"
     "\n"
     "Deletes a finished run with its ranks, events, metrics, updates and tags, in one\n"
     "transaction. Asks first on a terminal; elsewhere it needs --yes. A running run is\n"
     "refused. Its checkpoints (next to the store, in STORE.checkpoints/run-ID) stay.\n"
     "Exit codes: 0 deleted, 2 an unknown or running run, or no --yes without a terminal.\n"},
    {"export",
     "usage: loom-cli export RUN_ID --chrome FILE [--db PATH]\n"
     "\n"
     "Writes a stored run as Chrome Trace Event JSON: open FILE in https://ui.perfetto.dev.\n"
     "  --chrome FILE  where to write the trace\n"
     "  --db PATH      the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"},
    {"resume",
     "usage: loom-cli resume RUN_ID [--replicas N] [--db PATH] [--json]\n"
     "\n"
     "Continues a failed, stopped, hung or interrupted run from its newest complete\n"
     "checkpoint, as a new run that records the old one (`show` says \"resumed from\").\n"
     "Ranks save checkpoints every training.checkpoint_every steps, and when a run is\n"
     "stopped. The new run trains the old run's plan from the checkpoint's step to its last.\n"
     "  --replicas N  a data-parallel (all_reduce) run goes on with N replicas; the global\n"
     "                batch stays, so each replica takes a larger or smaller share\n"
     "  --db PATH     the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
     "  --json        print the new run's summary as one JSON line\n"
     "Exit codes as `run`; 2 when the run cannot be resumed (it says why).\n"},
    {"import",
     "usage: loom-cli import --kineto FILE... [--name NAME] [--rank N] [--db PATH] [--json]\n"
     "\n"
     "Stores PyTorch profiler traces (Chrome-trace JSON from torch.profiler, plain or gzip, one\n"
     "file per rank) as a completed run, so `show` and `compare` can put a PyTorch DDP run beside\n"
     "a Loom run. ProfilerStep#N spans become steps; operators become forward, backward, loss,\n"
     "optimizer and data spans, collectives communication spans with their bytes where the\n"
     "trace has them (the table: docs/manual.md, \"Importing PyTorch traces\"). A file's rank\n"
     "comes from its distributedInfo, else from its name (rank1.json, trace_1.json).\n"
     "Every file is read and checked before anything is stored; a file that is not a complete\n"
     "trace is refused, naming it, and nothing is stored.\n"
     "  --kineto     the files are PyTorch (Kineto) profiler traces (the only format so far)\n"
     "  --name NAME  the run's name (default: \"pytorch \" and the first file's name)\n"
     "  --rank N     the rank of a single file that does not say it\n"
     "  --db PATH    the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
     "  --json       print the new run's id and counts as one JSON line\n"
     "Exit codes: 0 stored, 1 the store failed, 2 a file is missing, malformed or not a trace.\n"},
    {"lesson",
     "usage: loom-cli lesson [NAME] [--predict X] [--steps N] [--db PATH] [--json]\n"
     "\n"
     "Without NAME, lists the lessons. With NAME, explains the lesson's idea, asks its question\n"
     "(at a terminal), runs its plans as `run` does and prints the measured answer beside\n"
     "the theory and your prediction, then where to look in the stored runs.\n"
     "  --predict X  your answer to the question, instead of typing it\n"
     "  --steps N    train every run of the lesson N steps (a shorter lesson)\n"
     "  --db PATH    the run store (else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db)\n"
     "  --json       one JSON line: lesson, runs, measured, theory, prediction, error\n"
     "Exit codes: 0 done, 1 a run failed or the answer could not be measured, 2 unknown\n"
     "lesson or bad arguments.\n"},
};

const char* command_help(const std::string& command) {
  for (const CommandHelp& h : kCommandHelp)
    if (command == h.name) return h.text;
  return nullptr;
}

bool asks_for_help(int argc, char** argv) {
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  return false;
}

// Options without a value.
bool* flag_option(loom::cli::Args& args, const std::string& arg) {
  using loom::cli::Args;
  static const std::pair<const char*, bool Args::*> kFlags[] = {
      {"--json", &Args::json},   {"--kineto", &Args::kineto},       {"--store", &Args::store_prediction},
      {"--yes", &Args::yes},     {"--async", &Args::asynchronous}, {"--clear", &Args::clear},
      {"--reset", &Args::reset}};
  for (const auto& [name, member] : kFlags)
    if (arg == name) return &(args.*member);
  return nullptr;
}

// Options with a text value, and what a missing value is said to be.
struct TextOption {
  const char* name;
  std::optional<std::string> loom::cli::Args::*member;
  const char* needs;
};
constexpr TextOption kTextOptions[] = {
    {"--db", &loom::cli::Args::db, "a path"},
    {"--chrome", &loom::cli::Args::chrome, "a file name"},
    {"--name", &loom::cli::Args::name, "a value"},
    {"--predict", &loom::cli::Args::predict, "a number"},
    {"--against", &loom::cli::Args::against, "a run id"},
    {"--cluster", &loom::cli::Args::cluster, "a value"},
    {"--memory-per-device", &loom::cli::Args::memory_per_device, "a value"},
    {"--save", &loom::cli::Args::save, "a value"},
    {"--steps", &loom::cli::Args::steps, "a value"},
    {"--target-accuracy", &loom::cli::Args::target_accuracy, "a value"},
};

// Options with a whole number in [low, high].
struct NumberOption {
  const char* name;
  long low, high;
  const char* needs;
  void (*set)(loom::cli::Args&, int);
};
constexpr NumberOption kNumberOptions[] = {
    {"--replicas", 1, 4096, "a number of replicas from 1 to 4096", [](loom::cli::Args& a, int n) { a.replicas = n; }},
    {"--rank", 0, 4095, "a rank from 0 to 4095", [](loom::cli::Args& a, int n) { a.rank = n; }},
    {"--scale", 1, 4096, "a number of devices from 1 to 4096", [](loom::cli::Args& a, int n) { a.scale = n; }},
    {"--devices", 1, 4096, "a number of devices from 1 to 4096", [](loom::cli::Args& a, int n) { a.devices = n; }},
    {"--top", 1, 4096, "a number of devices from 1 to 4096", [](loom::cli::Args& a, int n) { a.top = n; }},
};

// An option's value: after '=' in the same argument, else the next argument (nullopt when
// there is none).
std::optional<std::string> option_value(const std::string& arg, const char* name, int argc, char** argv, int& i) {
  if (arg.size() > std::strlen(name) && arg[std::strlen(name)] == '=') return arg.substr(std::strlen(name) + 1);
  if (i + 1 >= argc) return std::nullopt;
  return std::string(argv[++i]);
}

bool matches(const std::string& arg, const char* name) {
  return arg == name || (arg.rfind(name, 0) == 0 && arg.size() > std::strlen(name) && arg[std::strlen(name)] == '=');
}

// One option with a value: false, with the message said, when the value is missing or bad.
// `known` is set when `arg` is one of them.
bool parse_valued_option(const std::string& arg, int argc, char** argv, int& i, loom::cli::Args& args, bool& known) {
  known = true;
  for (const TextOption& o : kTextOptions) {
    if (!matches(arg, o.name)) continue;
    auto value = option_value(arg, o.name, argc, argv, i);
    if (!value) std::fprintf(stderr, "loom-cli: %s needs %s\n", o.name, o.needs);
    if (value) args.*o.member = *value;
    return value.has_value();
  }
  for (const NumberOption& o : kNumberOptions) {
    if (!matches(arg, o.name)) continue;
    const std::string value = option_value(arg, o.name, argc, argv, i).value_or("");
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    const bool good = !value.empty() && *end == '\0' && n >= o.low && n <= o.high;
    if (!good) std::fprintf(stderr, "loom-cli: %s needs %s (got '%s')\n", o.name, o.needs, value.c_str());
    if (good) o.set(args, int(n));
    return good;
  }
  known = false;
  return true;
}

// Splits argv into positional arguments and the options the commands share.
bool parse_args(int argc, char** argv, loom::cli::Args& args, const char* usage) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (bool* flag = flag_option(args, arg)) {
      *flag = true;
      continue;
    }
    bool known = false;
    if (!parse_valued_option(arg, argc, argv, i, args, known)) return false;
    if (known) continue;
    if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr, "loom-cli: unknown option '%s'\n%s", arg.c_str(), usage);
      return false;
    }
    args.positional.push_back(arg);
  }
  return true;
}

}  // namespace

namespace {
// Reading a run allocates and frees tens of megabytes per rank (its events, their
// intervals). By default glibc maps each such block afresh and unmaps it when freed, so
// every reuse faults its pages in again: a quarter of a million-event `compare` on this
// project's VMs. Keeping freed memory in the heap for reuse removes that; these commands
// end soon after, so the memory kept is returned at exit.
void keep_freed_memory_for_reuse() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
}

bool reads_whole_runs(const std::string& command) {
  return command == "show" || command == "compare" || command == "export" || command == "import";
}
}  // namespace

int run_command(int argc, char** argv) {
  using namespace loom::cli;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? kInvalidInput : kOk;
  }
  const std::string command = argv[1];
  if (reads_whole_runs(command)) keep_freed_memory_for_reuse();
  // Reports draw with the workbench's widgets: a program of their own, with its own options.
  if (command == "report") return cmd_report(argc, argv);
  const char* help = command_help(command);
  if (!help) {
    std::fprintf(stderr, "loom-cli: unknown command '%s'\n%s", command.c_str(), kUsage);
    return kInvalidInput;
  }
  if (asks_for_help(argc, argv)) {
    std::fputs(help, stdout);
    return kOk;
  }
  Args args;
  if (!parse_args(argc, argv, args, help)) return kInvalidInput;
  if (command == "validate") return cmd_validate(args);
  if (command == "run") return cmd_run(args);
  if (command == "runs") return cmd_runs(args);
  if (command == "show") return cmd_show(args);
  if (command == "resume") return cmd_resume(args);
  if (command == "compare") return cmd_compare(args);
  if (command == "rename") return cmd_rename(args);
  if (command == "tag") return cmd_tag(args);
  if (command == "delete") return cmd_delete(args);
  if (command == "import") return cmd_import(args);
  if (command == "lesson") return cmd_lesson(args);
  if (command == "predict") return cmd_predict(args);
  if (command == "search") return cmd_search(args);
  if (command == "calibrate") return cmd_calibrate(args);
  if (command == "calibration") return cmd_calibration(args);
  return cmd_export(args);
}

// The executable's edge: memory running out (a plan or store too large for this machine)
// ends with a message and exit 1, never an uncaught exception and an abort.
int main(int argc, char** argv) {
  try {
    return run_command(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "loom-cli: out of memory (hint: the input is larger than this machine can hold; "
                         "check the file named, or free memory)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-cli: internal error: %s (hint: report it with the command that caused it)\n", e.what());
  }
  return 1;
}
