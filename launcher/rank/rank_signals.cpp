// Signal handling for loom-rank (see rank_signals.h). Only async-signal-safe calls
// (write, signal, raise) are made inside the handlers.
#include "rank_signals.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace loom::rank {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<std::int64_t> g_step{-1};
volatile std::sig_atomic_t g_rank = -1;

extern "C" void on_stop_signal(int) { g_stop.store(true); }

// Formats a non-negative number without the allocator (not signal-safe).
char* append_number(char* out, std::int64_t value) {
  char digits[24];
  int n = 0;
  if (value < 0) {
    *out++ = '-';
    value = -value;
  }
  do {
    digits[n++] = char('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < 20);
  while (n > 0) *out++ = digits[--n];
  return out;
}

extern "C" void on_fatal_signal(int sig) {
  char line[160];
  char* p = line;
  const char* prefix = "loom-rank ";
  p = std::strcpy(p, prefix) + std::strlen(prefix);
  p = append_number(p, g_rank);
  const char* middle = ": fatal signal ";
  p = std::strcpy(p, middle) + std::strlen(middle);
  p = append_number(p, sig);
  const char* at = " during step ";
  p = std::strcpy(p, at) + std::strlen(at);
  p = append_number(p, g_step.load());
  *p++ = '\n';
  (void)!write(STDERR_FILENO, line, std::size_t(p - line));
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void install_signal_handlers(int rank) {
  g_rank = rank;
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) std::signal(sig, on_stop_signal);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, on_fatal_signal);
}

void request_stop() { g_stop.store(true); }

const std::atomic<bool>& stop_requested() { return g_stop; }

void note_step(std::int64_t step) { g_step.store(step); }

}  // namespace loom::rank
