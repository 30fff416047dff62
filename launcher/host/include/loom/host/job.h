// The transport that runs a plan's ranks as a real job (run_lifecycle.h): starts the
// stream server and `mpirun` or `srun` (through QProcess, with the argument list from
// launch_command.h), stores the ranks' live record as it arrives, forwards the launcher's
// output into the run's log, and decides how the run ended:
//  - completed: mpirun exited 0 and every rank reported Done;
//  - stopped:   the caller asked to stop (SIGUSR1 to mpirun, which forwards it to the
//               ranks: they finish the step, flush and report; SIGTERM after a grace
//               period, SIGKILL after another); everything that arrived stays stored;
//  - failed:    a rank died or reported an error (the run is marked failed as soon as the
//               host learns of it, the job is then ended), or mpirun failed;
//  - hung:      a rank went silent past its limit (hang_watch.h).
// Blocking; call it from a worker thread where a GUI must stay responsive.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include "loom/host/run_lifecycle.h"

namespace loom::host {

struct MpirunOptions {
  std::string rank_executable;  // loom-rank (see default_rank_executable)
  std::string mpirun = "mpirun";
  std::function<void(const std::string&)> on_output;  // each line mpirun prints
  std::chrono::milliseconds stop_grace{10000};  // SIGUSR1 to SIGTERM, and SIGTERM to SIGKILL
  std::chrono::milliseconds drain_grace{3000};  // after mpirun ends, for the last frames
};

class MpirunTransport final : public RunTransport {
 public:
  explicit MpirunTransport(MpirunOptions options) : options_(std::move(options)) {}
  RunOutcome run(const RunContext& run) override;

 private:
  MpirunOptions options_;
};

// loom-rank next to `this_executable` (installed layout) or in the build tree
// (app/loom-cli -> launcher/rank/loom-rank); $LOOM_RANK overrides both.
std::string default_rank_executable(const std::string& this_executable);

}  // namespace loom::host
