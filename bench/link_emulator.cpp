// The simulated hosts' link, emulated: its rate, its queue and its latency, which tc
// cannot give on this machine's kernel (it has no netem and no fq). It opens a tun
// device; the routing that scripts/cluster/netns-hosts.sh sets up sends every packet from
// one simulated host to the other into it, and this program writes each one back when a
// wire would have delivered it, from where the kernel forwards it to the other host.
//
//   link_emulator TUN_NAME DELAY_US [RATE_MBIT [QUEUE_US]]
//   LOOM_LINK_PORTS="ADDR=DELAY_US:RATE_MBIT,..." (optional): a host whose port is
//   slower (or faster) than the rest, e.g. "10.213.3.2=2000:100": every packet to or
//   from that address takes its delay and rate instead, as a host on a slower cable
//   would; the queue stays QUEUE_US.
//
// Each direction (by destination address) is a wire of its own: a packet waits for the
// wire to be free (a FIFO queue; one that would wait more than QUEUE_US, default 5000, is
// dropped, as a full switch port drops it), takes its bytes over RATE_MBIT to send (no
// rate: no time), then DELAY_US to arrive (see send_on_wire for the queue's size). Bytes are counted as Ethernet frames, as tc
// counts them. The tun takes TCP's segmentation offload (a virtio header ahead of each
// packet), so a 64 KB super-packet is one read and one write here rather than 44 (at
// 1 Gb/s about 2,000 packets a second, not 83,000): it is charged for every frame it
// stands for and arrives whole when its last byte would have. Runs until killed.
#include <arpa/inet.h>
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
#include <map>
#include <string>
#include <vector>

namespace {

struct Held {
  std::int64_t due_ns;
  std::vector<char> bytes;
};

// One direction of the link: when its wire is next free, and what is on its way.
struct Wire {
  std::int64_t free_ns = 0;
  std::deque<Held> line;  // in order of due_ns: one wire, one delay
};

struct LinkSpec {
  std::int64_t delay_ns = 0;
  double rate_bits_per_ns = 0;  // 0: no rate
  std::int64_t queue_ns = 5'000'000;
};

// The virtio header the tun puts ahead of each packet (linux/virtio_net.h's
// virtio_net_hdr, which a C++ file cannot include: a field there is named `class`),
// in this machine's byte order as a legacy tun writes it.
struct VnetHeader {
  std::uint8_t flags, gso_type;
  std::uint16_t hdr_len, gso_size, csum_start, csum_offset;
};
static_assert(sizeof(VnetHeader) == 10);
constexpr std::size_t kVnetHeader = sizeof(VnetHeader);
constexpr std::uint8_t kGsoNone = 0;
constexpr std::size_t kEthernetHeader = 14;

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

// The bytes the packet puts on an Ethernet wire: a segmentation-offload packet is many
// frames, each with the IP and TCP headers and an Ethernet header of its own. (The
// virtio header's hdr_len is the packet's linear part, not its headers: read them.)
std::int64_t frame_bytes(const char* packet, std::size_t n) {
  VnetHeader h{};
  std::memcpy(&h, packet, kVnetHeader);
  const char* ip = packet + kVnetHeader;
  const std::size_t length = n - kVnetHeader;
  const std::size_t ip_header = std::size_t(ip[0] & 0x0f) * 4;
  if (h.gso_type == kGsoNone || h.gso_size == 0 || length < ip_header + 20 || ip[9] != 6)
    return std::int64_t(length + kEthernetHeader);
  const std::size_t headers = ip_header + std::size_t((std::uint8_t(ip[ip_header + 12]) >> 4) & 0x0f) * 4;
  if (length <= headers) return std::int64_t(length + kEthernetHeader);
  const std::size_t payload = length - headers;
  const std::size_t segments = (payload + h.gso_size - 1) / h.gso_size;
  return std::int64_t(payload + segments * (headers + kEthernetHeader));
}

// An IPv4 address of the packet: its source (offset 12) or destination (16), which
// names the direction; 0 for anything else.
std::uint32_t address_at(const char* packet, std::size_t n, std::size_t offset) {
  if (n < kVnetHeader + 20 || (std::uint8_t(packet[kVnetHeader]) >> 4) != 4) return 0;
  std::uint32_t address = 0;
  std::memcpy(&address, packet + kVnetHeader + offset, 4);
  return ntohl(address);
}
std::uint32_t destination(const char* packet, std::size_t n) { return address_at(packet, n, 16); }
std::uint32_t source(const char* packet, std::size_t n) { return address_at(packet, n, 12); }

// The link's spec, and the hosts whose port differs (LOOM_LINK_PORTS).
struct Ports {
  LinkSpec all;
  std::map<std::uint32_t, LinkSpec> host;
  const LinkSpec& of(std::uint32_t from, std::uint32_t to) const {
    if (auto it = host.find(to); it != host.end()) return it->second;
    if (auto it = host.find(from); it != host.end()) return it->second;
    return all;
  }
};

// "ADDR=DELAY_US:RATE_MBIT,..." onto `ports`; false where an entry does not read so.
bool parse_ports(const char* text, Ports& ports) {
  std::string rest = text ? text : "";
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string entry = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const std::size_t eq = entry.find('='), colon = entry.find(':');
    in_addr address{};
    if (eq == std::string::npos || colon == std::string::npos || colon < eq ||
        inet_pton(AF_INET, entry.substr(0, eq).c_str(), &address) != 1)
      return false;
    LinkSpec spec = ports.all;
    spec.delay_ns = std::atoll(entry.substr(eq + 1, colon - eq - 1).c_str()) * 1000;
    spec.rate_bits_per_ns = std::atof(entry.substr(colon + 1).c_str()) * 1e6 / 1e9;
    if (spec.delay_ns < 0 || spec.rate_bits_per_ns < 0) return false;
    ports.host[ntohl(address.s_addr)] = spec;
  }
  return true;
}

// Puts one packet on its direction's wire: it waits for the wire, is sent, then travels.
// The queue holds QUEUE_US at the rate, and at least four 64 KB super-packets: it drops a
// super-packet whole, where a switch drops only the frames beyond its buffer, and at
// 100 Mb/s a 5 ms queue (62.5 KB) dropped every activation 1F1B sent behind another
// (69 ms a step, against 50.9 through tc's token bucket, which cuts super-packets into
// frames).
void send_on_wire(const LinkSpec& link, Wire& wire, std::vector<char> packet) {
  constexpr double kSuperPacketBits = 8.0 * 65536;
  const std::int64_t now = now_ns();
  const std::int64_t start = std::max(now, wire.free_ns);
  const double queue_ns = link.rate_bits_per_ns > 0 ? std::max(double(link.queue_ns), 4 * kSuperPacketBits / link.rate_bits_per_ns)
                                                    : double(link.queue_ns);
  if (double(start - now) > queue_ns) return;  // the queue is full: dropped
  const double bits = 8.0 * double(frame_bytes(packet.data(), packet.size()));
  wire.free_ns = start + (link.rate_bits_per_ns > 0 ? std::int64_t(bits / link.rate_bits_per_ns) : 0);
  wire.line.push_back({wire.free_ns + link.delay_ns, std::move(packet)});
}

// Reads every packet waiting on the tun onto its wire (through `buffer`, kept between
// calls: this runs at every wake-up).
bool take_arrivals(int fd, const Ports& ports, std::vector<char>& buffer, std::map<std::uint32_t, Wire>& wires) {
  for (;;) {
    const ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (std::size_t(n) <= kVnetHeader) continue;
    const std::uint32_t to = destination(buffer.data(), std::size_t(n));
    const LinkSpec& link = ports.of(source(buffer.data(), std::size_t(n)), to);
    send_on_wire(link, wires[to], std::vector<char>(buffer.begin(), buffer.begin() + n));
  }
}

// Writes back every packet whose time has come. A write the kernel refuses (its backlog
// full) drops that packet, as a full link would; TCP sends it again.
void release_due(int fd, std::map<std::uint32_t, Wire>& wires) {
  const std::int64_t now = now_ns();
  for (auto& [to, wire] : wires)
    while (!wire.line.empty() && wire.line.front().due_ns <= now) {
      const std::vector<char>& p = wire.line.front().bytes;
      if (write(fd, p.data(), p.size()) < 0 && errno != EAGAIN) std::perror("link_emulator: write");
      wire.line.pop_front();
    }
}

timespec until_next(const std::map<std::uint32_t, Wire>& wires) {
  std::int64_t next = -1;
  for (const auto& [to, wire] : wires)
    if (!wire.line.empty()) next = next < 0 ? wire.line.front().due_ns : std::min(next, wire.line.front().due_ns);
  if (next < 0) return {1, 0};
  const std::int64_t wait = std::max<std::int64_t>(0, next - now_ns());
  return {time_t(wait / 1000000000), long(wait % 1000000000)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 5) {
    std::fprintf(stderr, "usage: %s TUN_NAME DELAY_US [RATE_MBIT [QUEUE_US]]\n", argv[0]);
    return 2;
  }
  Ports ports;
  LinkSpec& link = ports.all;
  link.delay_ns = std::atoll(argv[2]) * 1000;
  if (argc > 3) link.rate_bits_per_ns = std::atof(argv[3]) * 1e6 / 1e9;
  if (argc > 4) link.queue_ns = std::atoll(argv[4]) * 1000;
  if (!parse_ports(std::getenv("LOOM_LINK_PORTS"), ports)) {
    std::fprintf(stderr, "link_emulator: LOOM_LINK_PORTS must read ADDR=DELAY_US:RATE_MBIT[,...]\n");
    return 2;
  }
  const int fd = open_tun(argv[1]);
  if (fd < 0 || link.delay_ns < 0 || link.rate_bits_per_ns < 0 || link.queue_ns < 0) {
    std::fprintf(stderr, "link_emulator: cannot open tun %s: %s (root only)\n", argv[1], std::strerror(errno));
    return 1;
  }
  // Wake on time: the default 50 us timer slack would add to every packet's delay, and
  // ranks that spin while they wait for a message hold both cores: as an ordinary task
  // this program waited its turn behind them, and every all-reduce, whatever the delay
  // (0.5 to 3 ms), took a multiple of 8 ms. A wire takes no CPU from its hosts; real-time
  // priority is the nearest this program can come to that.
  prctl(PR_SET_TIMERSLACK, 1UL);
  const sched_param priority{sched_get_priority_min(SCHED_FIFO) + 10};
  if (sched_setscheduler(0, SCHED_FIFO, &priority) != 0) std::perror("link_emulator: real-time priority");
  std::map<std::uint32_t, Wire> wires;
  std::vector<char> buffer(70000);  // a 64 KB super-packet and its headers
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const timespec wait = until_next(wires);
    if (ppoll(&p, 1, &wait, nullptr) < 0 && errno != EINTR) return 1;
    if ((p.revents & POLLIN) && !take_arrivals(fd, ports, buffer, wires)) return 1;
    release_due(fd, wires);
  }
}
