// What this machine offers the processes that run on it. Both sides need it: the host
// side to say when ranks outnumber cores (launcher/host oversubscription.h), a rank to
// size its BLAS thread pool to the cores it may really use (engine apply_thread_count).
#pragma once

#include <cstdint>
#include <string>

namespace loom::machine {

// Cores this process may run on: its CPU affinity mask, lowered by a cgroup v2 CPU quota
// (/sys/fs/cgroup/cpu.max) when one is set; at least 1. A container limited with --cpus
// keeps every CPU in its mask, so std::thread::hardware_concurrency() would overcount.
int cores_available();

// The quota part, pure: whole cores allowed by cpu.max's text ("200000 100000" -> 2;
// "150000 100000" -> 1, since two ranks on 1.5 cores still take turns; at least 1), or 0
// when it sets no limit ("max 100000") or cannot be read.
int cores_from_cpu_max(const std::string& cpu_max_text);

// A process of this machine: its state letter from /proc/PID/stat ('R', 'S', 'T' stopped,
// 'Z' ended but not reaped, ...), or '\0' when there is no such process. Readers of the
// store use it to tell a run's dead owner, the host's watchdog a stopped rank.
char process_state(std::int64_t pid);

// This machine's physical memory in bytes (0 if unknown), what a plan is checked against
// before it runs (core plan_limits.h check_memory).
std::int64_t physical_memory_bytes();

// This machine's host name, as run and rank records carry it ("localhost" if unknown).
std::string host_name();

// The running kernel's boot id (/proc/sys/kernel/random/boot_id): one per machine, and
// shared by its network namespaces, the simulated hosts, whose host names differ. Ranks
// divide the cores among those of one machine by it, and record it with their device so
// that a prediction knows which hosts share cores. "" where unreadable.
std::string machine_id();

// Run metrics that record a run's oversubscription (rank 0, step -1, so charts skip
// them): the worst host's (or machine's) ranks and cores; absent when none was. Written
// by the launcher for the hosts it knows, and by the ranks for machines it could not
// (host/oversubscription.h).
inline constexpr const char* kOversubscribedRanksMetric = "oversubscribed_ranks";
inline constexpr const char* kOversubscribedCoresMetric = "oversubscribed_cores";

// Run metrics of the link between two consecutive hosts neither of which is rank 0's
// (engine/rank_probes.h, probe_next_hosts), written by the first rank on the first host
// (its rank, step -1): the first rank on the next host, half the shortest round trip
// between them (us) and the probe's figure (GB/s). predict/host_links.h reads them.
inline constexpr const char* kNextHostRankMetric = "next_host_rank";
inline constexpr const char* kNextHostLatencyMetric = "next_host_latency_us";
inline constexpr const char* kNextHostP2pMetric = "next_host_p2p_gbs";

}  // namespace loom::machine
