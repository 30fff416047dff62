// This machine's cores (see machine.h).
#include "loom/trace/machine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

namespace loom::machine {

int cores_from_cpu_max(const std::string& cpu_max_text) {
  std::istringstream in(cpu_max_text);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  try {
    const long long q = std::stoll(quota);
    return q > 0 ? int(std::max(1LL, q / period)) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

int cores_available() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = int(std::thread::hardware_concurrency());
  std::ifstream cpu_max("/sys/fs/cgroup/cpu.max");
  std::stringstream text;
  text << cpu_max.rdbuf();
  const int quota = cores_from_cpu_max(text.str());
  if (quota > 0) cores = std::min(cores, quota);
  return std::max(1, cores);
}

char process_state(std::int64_t pid) {
  if (pid <= 0) return '\0';
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
  return close != std::string::npos && close + 2 < text.size() ? text[close + 2] : '\0';
}

std::int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? std::int64_t(pages) * page_size : 0;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::string machine_id() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  return id;
}

}  // namespace loom::machine
