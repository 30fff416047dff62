// Reading mpirun's output about a rank's end (see job_output.h).
#include "loom/host/job_output.h"

#include <regex>
#include <sstream>

namespace loom::host {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

std::string mpirun_verdict(int rank, const std::string& output) {
  const std::string r = std::to_string(rank);
  // "mpirun noticed that process rank 0 with PID 812 on node vm exited on signal 9 (Killed)."
  const std::regex noticed("process rank " + r + " with PID \\d+ on node \\S+ (exited on signal \\d+ \\([^)]*\\))");
  std::smatch m;
  if (std::regex_search(output, m, noticed)) return m[1];
  // "  Process name: [[49012,1],1]\n  Exit code:    134" (a non-zero exit)
  const std::regex exited("Process name: \\[\\[\\d+,\\d+\\]," + r + "\\]\\s*\\n\\s*Exit code:\\s*(\\d+)");
  if (std::regex_search(output, m, exited)) return "exited with exit code " + m[1].str();
  return {};
}

std::vector<std::string> rank_last_lines(int rank, const std::string& output, std::size_t max_lines) {
  const std::string prefix = "loom-rank " + std::to_string(rank) + ":";
  std::vector<std::string> found;
  for (const std::string& line : lines_of(output))
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  if (found.size() > max_lines) found.erase(found.begin(), found.end() - std::ptrdiff_t(max_lines));
  return found;
}

std::string explain_rank_end(int rank, const std::string& output) {
  std::string text;
  const std::string verdict = mpirun_verdict(rank, output);
  if (!verdict.empty()) text += "; mpirun: " + verdict;
  const std::vector<std::string> last = rank_last_lines(rank, output);
  for (std::size_t i = 0; i < last.size(); ++i) text += (i == 0 ? "; its last lines: " : " | ") + last[i];
  return text;
}

}  // namespace loom::host
