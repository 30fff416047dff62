// What mpirun and a rank printed about the rank's end, read from mpirun's output (which
// carries the ranks' standard error): mpirun's verdict on the process ("exited on signal
// 9 (Killed)", "exit code 134") and the rank's own last lines ("loom-rank 1: ..." from its
// error path or its fatal-signal handler). A lost connection alone says only that the
// rank is gone; these say why. Pure text functions, tested on mpirun's real formats.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace loom::host {

// "exited on signal 9 (Killed)" / "exited with exit code 134", or "" when mpirun said
// nothing about this rank.
std::string mpirun_verdict(int rank, const std::string& output);

// Up to `max_lines` of the rank's own last lines ("loom-rank R: ..."), oldest first.
std::vector<std::string> rank_last_lines(int rank, const std::string& output, std::size_t max_lines = 3);

// Both, as a clause to append to "rank R died: ...": "; mpirun: exited on signal 9
// (Killed); its last lines: ...". Empty when the output says nothing of it.
std::string explain_rank_end(int rank, const std::string& output);

}  // namespace loom::host
