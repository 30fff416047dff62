// loom-cli: Loom's engine without the GUI, for terminals, scripts and clusters.
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.h"

namespace {

constexpr const char* kUsage =
    "usage: loom-cli <command> [options]\n"
    "\n"
    "commands:\n"
    "  validate PLAN                    check a plan; print its layers, shapes, parameters and memory\n"
    "  run [PLAN] [--db PATH] [--json]  train the plan (default: the embedded MLP plan) and record the run\n"
    "  runs [--db PATH] [--json]        list stored runs\n"
    "  show RUN_ID [--db PATH] [--json] summarise a stored run\n"
    "  export RUN_ID --chrome FILE      write a stored run as a Chrome trace (open it in Perfetto)\n"
    "\n"
    "The run store is --db PATH, else $LOOM_DB, else $XDG_DATA_HOME/loom/runs.db.\n"
    "Exit codes: 0 ok, 1 failed, 2 invalid input, 130 stopped by Ctrl-C.\n";

// Splits argv into positional arguments and the few options every command shares.
bool parse_args(int argc, char** argv, loom::cli::Args& args) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      args.json = true;
    } else if (arg == "--db") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "loom-cli: --db needs a path\n");
        return false;
      }
      args.db = argv[++i];
    } else if (arg.rfind("--db=", 0) == 0) {
      args.db = arg.substr(5);
    } else if (arg == "--chrome") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "loom-cli: --chrome needs a file name\n");
        return false;
      }
      args.chrome = argv[++i];
    } else if (arg.rfind("--chrome=", 0) == 0) {
      args.chrome = arg.substr(9);
    } else if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr, "loom-cli: unknown option '%s'\n%s", arg.c_str(), kUsage);
      return false;
    } else {
      args.positional.push_back(arg);
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace loom::cli;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? kInvalidInput : kOk;
  }
  Args args;
  if (!parse_args(argc, argv, args)) return kInvalidInput;
  const std::string command = argv[1];
  if (command == "validate") return cmd_validate(args);
  if (command == "run") return cmd_run(args);
  if (command == "runs") return cmd_runs(args);
  if (command == "show") return cmd_show(args);
  if (command == "export") return cmd_export(args);
  std::fprintf(stderr, "loom-cli: unknown command '%s'\n%s", command.c_str(), kUsage);
  return kInvalidInput;
}
