// Signals a rank process handles:
//  - SIGUSR1, SIGTERM, SIGINT ask for a stop. The host stops a run with SIGUSR1 to
//    mpirun, which forwards it to every rank at once; the ranks agree on a last step,
//    flush their record and report Done. SIGTERM (what mpirun sends before SIGKILL, and
//    what a batch system sends) takes the same path if there is time.
//  - SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT print the rank's last words (which signal,
//    at which step) to standard error, which mpirun forwards to the host's run log, and
//    then die of the same signal.
// A signal handler can only touch lock-free atomics, hence the process-wide state here.
#pragma once

#include <atomic>
#include <cstdint>

namespace loom::rank {

void install_signal_handlers(int rank);
const std::atomic<bool>& stop_requested();
// The same stop, asked from inside the rank (its host's stream is gone).
void request_stop();
// The step the rank is in, for the last words of a crash.
void note_step(std::int64_t step);

}  // namespace loom::rank
