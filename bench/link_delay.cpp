// A delay line for the simulated hosts' link: the latency that tc cannot add on this
// machine's kernel (it has no netem and no fq qdisc). It opens a tun device; the routing
// that scripts/cluster/netns-hosts.sh sets up sends every packet from one simulated host
// to the other into it, and this program writes each one back after a fixed one-way
// delay, from where the kernel forwards it on to the other host's veth (and its tbf).
//
//   link_delay TUN_NAME DELAY_US
//
// Packets keep their order (one delay for all). The tun takes TCP's segmentation offload
// (a virtio header ahead of each packet), so a 64 KB super-packet is one read and one
// write here rather than 44: at 1 Gb/s that is about 2,000 packets a second, not 83,000,
// and the CPU this program takes from the ranks stays small. Runs until killed.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <string>
#include <vector>

namespace {

struct Held {
  std::int64_t due_ns;
  std::vector<char> bytes;
};

std::int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return std::int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

int open_tun(const std::string& name) {
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK);
  if (fd < 0) return -1;
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
  std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) return -1;
  // Without these the kernel segments and checksums every packet before it reaches us.
  const unsigned offloads = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
  if (ioctl(fd, TUNSETOFFLOAD, offloads) < 0) return -1;
  return fd;
}

// Reads every packet waiting on the tun into the line, each due delay_ns from now.
bool take_arrivals(int fd, std::int64_t delay_ns, std::deque<Held>& line) {
  std::vector<char> buffer(70000);
  for (;;) {
    const ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    line.push_back({now_ns() + delay_ns, std::vector<char>(buffer.begin(), buffer.begin() + n)});
  }
}

// Writes back every packet whose time has come. A write the kernel refuses (its backlog
// full) drops that packet, as a full link would; TCP sends it again.
void release_due(int fd, std::deque<Held>& line) {
  const std::int64_t now = now_ns();
  while (!line.empty() && line.front().due_ns <= now) {
    if (write(fd, line.front().bytes.data(), line.front().bytes.size()) < 0 && errno != EAGAIN) std::perror("write");
    line.pop_front();
  }
}

timespec until_next(const std::deque<Held>& line) {
  if (line.empty()) return {1, 0};
  const std::int64_t wait = std::max<std::int64_t>(0, line.front().due_ns - now_ns());
  return {time_t(wait / 1000000000), long(wait % 1000000000)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TUN_NAME DELAY_US\n", argv[0]);
    return 2;
  }
  const std::int64_t delay_ns = std::atoll(argv[2]) * 1000;
  const int fd = open_tun(argv[1]);
  if (fd < 0 || delay_ns < 0) {
    std::fprintf(stderr, "link_delay: cannot open tun %s: %s (root only)\n", argv[1], std::strerror(errno));
    return 1;
  }
  // Wake on time: the default 50 us timer slack would add to every packet's delay, and
  // ranks that spin while they wait for a message hold both cores: as an ordinary task
  // this program waited its turn behind them, and every all-reduce, whatever the delay
  // (0.5 to 3 ms), took a multiple of 8 ms. A wire takes no CPU from its hosts; real-time
  // priority is the nearest this program can come to that.
  prctl(PR_SET_TIMERSLACK, 1UL);
  const sched_param priority{sched_get_priority_min(SCHED_FIFO) + 10};
  if (sched_setscheduler(0, SCHED_FIFO, &priority) != 0) std::perror("link_delay: real-time priority");
  std::deque<Held> line;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const timespec wait = until_next(line);
    if (ppoll(&p, 1, &wait, nullptr) < 0 && errno != EINTR) return 1;
    if ((p.revents & POLLIN) && !take_arrivals(fd, delay_ns, line)) return 1;
    release_due(fd, line);
  }
}
