// The run browser's edits from a terminal: rename, tag and delete stored runs.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "commands.h"

namespace loom::cli {
namespace {

// The run named first, with its store open; nullopt after saying what is wrong.
struct Target {
  store::RunStore store;
  std::int64_t id = 0;
};

std::optional<Target> open_target(const Args& args, const char* command, std::size_t min_positional,
                                  const char* needs) {
  const auto id = parse_run_id(args);
  if (!id || args.positional.size() < min_positional) {
    std::fprintf(stderr, "loom-cli: %s needs %s (see `loom-cli %s --help`; run ids: `loom-cli runs`)\n", command,
                 needs, command);
    return std::nullopt;
  }
  auto store = open_store(args);
  if (!store.ok()) {
    print_error(store.error());
    return std::nullopt;
  }
  return Target{std::move(store).value(), *id};
}

int report(const Status& s) {
  if (s.ok()) return kOk;
  print_error(s.error());
  return s.error().code == ErrorCode::NotFound || s.error().code == ErrorCode::InvalidArgument ? kInvalidInput
                                                                                               : kFailed;
}

// Deleting cannot be undone: without --yes, ask on a terminal and refuse elsewhere.
bool confirmed(const Args& args, const trace::RunRecord& run) {
  if (args.yes) return true;
  if (!isatty(STDIN_FILENO)) {
    std::fprintf(stderr, "loom-cli: delete needs --yes when not run from a terminal (nothing was deleted)\n");
    return false;
  }
  std::printf("Delete run %lld \"%s\" (%s) with its events, metrics and updates? This cannot be undone. [y/N] ",
              static_cast<long long>(run.id), run.name.c_str(), status_text(run.status).c_str());
  std::fflush(stdout);
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "y" || answer == "Y" || answer == "yes";
}

}  // namespace

int cmd_rename(const Args& args) {
  auto target = open_target(args, "rename", 2, "a run id and the new name");
  if (!target) return kInvalidInput;
  const int rc = report(target->store.rename_run(target->id, args.positional[1]));
  if (rc == kOk) std::printf("run %lld is now \"%s\"\n", static_cast<long long>(target->id), args.positional[1].c_str());
  return rc;
}

int cmd_tag(const Args& args) {
  auto target = open_target(args, "tag", args.clear ? 1 : 2, "a run id and at least one tag (or --clear)");
  if (!target) return kInvalidInput;
  auto tags = target->store.load_tags(target->id);
  if (!tags.ok()) return report(tags.status());
  if (args.clear) tags->clear();
  tags->insert(tags->end(), args.positional.begin() + 1, args.positional.end());
  const int rc = report(target->store.set_tags(target->id, *tags));
  if (rc != kOk) return rc;
  auto stored = target->store.load_tags(target->id);
  if (!stored.ok()) return report(stored.status());
  std::string joined;
  for (const std::string& t : *stored) joined += (joined.empty() ? "" : ", ") + t;
  std::printf("run %lld tags: %s\n", static_cast<long long>(target->id), joined.empty() ? "(none)" : joined.c_str());
  return kOk;
}

int cmd_delete(const Args& args) {
  auto target = open_target(args, "delete", 1, "a run id");
  if (!target) return kInvalidInput;
  auto run = target->store.load_run(target->id);
  if (!run.ok()) return report(run.status());
  if (!confirmed(args, *run)) return kInvalidInput;
  const int rc = report(target->store.delete_run(target->id));
  if (rc == kOk) std::printf("deleted run %lld \"%s\"\n", static_cast<long long>(target->id), run->name.c_str());
  return rc;
}

}  // namespace loom::cli
