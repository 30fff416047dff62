#!/usr/bin/env bash
# Three simulated hosts on this machine for multi-host runs: Linux network namespaces
# loom-a, loom-b and loom-c, each joined to the root namespace by a veth pair on its own
# /24 (10.213.1.0/24 to 10.213.3.0/24, root side .1, host side .2), routed through the root
# namespace (ip_forward), with their names in /etc/hosts between marker lines. Open MPI
# starts its daemons on them through scripts/cluster/netns-agent.sh (its rsh agent).
#   scripts/cluster/netns-hosts.sh up|down|status
#   scripts/cluster/netns-hosts.sh link BINARY DELAY_US [RATE_MBIT [QUEUE_US]] | link off
# `link` puts an emulated wire between every two hosts, each way: packets queue for it (FIFO,
# QUEUE_US deep, default 5000), take their bytes over RATE_MBIT to send (none: no time)
# and DELAY_US to arrive. Policy routing sends every packet from one host to the other
# through a tun device (loom-link) that the emulator (bench/link_emulator.cpp,
# build/bench/link_emulator) writes back when a wire would have delivered it; its wires
# are one per destination host, like a switch's port to each. This kernel
# has no netem. Traffic to the root namespace's addresses is not shaped.
# Root only. Traffic goes only to these addresses. `down` removes all of it.
set -euo pipefail
hosts=(loom-a loom-b loom-c)
marker="# loom netns hosts"

up() {
  sysctl -qw net.ipv4.ip_forward=1 || true
  local i=1
  for h in "${hosts[@]}"; do
    ip netns add "$h"
    ip link add "veth-$h" type veth peer name eth0 netns "$h"
    ip addr add "10.213.$i.1/24" dev "veth-$h"
    ip link set "veth-$h" up
    ip netns exec "$h" ip addr add "10.213.$i.2/24" dev eth0
    ip netns exec "$h" ip link set eth0 up
    ip netns exec "$h" ip link set lo up
    ip netns exec "$h" ip route add default via "10.213.$i.1"
    echo "10.213.$i.2 $h $marker" >> /etc/hosts
    i=$((i + 1))
  done
}

down() {
  for h in "${hosts[@]}"; do
    ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$h" 2>/dev/null || true
    ip link del "veth-$h" 2>/dev/null || true
  done
  if grep -q "$marker" /etc/hosts; then
    grep -v "$marker" /etc/hosts > /etc/hosts.loom-tmp && cat /etc/hosts.loom-tmp > /etc/hosts && rm -f /etc/hosts.loom-tmp
  fi
}

link_tun=loom-link
link_table=213

# The emulator delivers a segmentation-offload super-packet whole, once its last byte
# would have arrived, so the hosts' TCP builds none longer than a quarter millisecond at
# the link's rate (gso_max_segs: 21 frames at 1 Gb/s, 2 at 100 Mb/s): 64 KB ones made 5 ms
# lumps at 100 Mb/s. Not one frame each: at 1 Gb/s that took the emulator most of a core.
set_gso_segments() {
  for h in "${hosts[@]}"; do ip netns exec "$h" ip link set eth0 gso_max_segs "$1" 2>/dev/null || true; done
}

link_off() {
  set_gso_segments 65535
  pkill -f "link_emulator $link_tun " 2>/dev/null || true
  while ip rule del table "$link_table" 2>/dev/null; do :; done
  ip link del "$link_tun" 2>/dev/null || true
}

# Packets from host i to another host's /24 take table 213, whose only route is the
# tun; written back, they arrive on the tun, match no rule and go out by the main table.
# Reverse-path filtering would drop them (their source is reached through a veth), so it
# is loose on the tun.
link_on() {
  local binary="$1"
  shift
  ip tuntap add dev "$link_tun" mode tun vnet_hdr
  ip link set "$link_tun" up
  sysctl -qw "net.ipv4.conf.$link_tun.rp_filter=0" "net.ipv4.conf.all.rp_filter=0"
  ip route replace default dev "$link_tun" table "$link_table"
  local i j
  for i in "${!hosts[@]}"; do
    for j in "${!hosts[@]}"; do
      [ "$i" = "$j" ] || ip rule add iif "veth-${hosts[$i]}" to "10.213.$((j + 1)).0/24" table "$link_table"
    done
  done
  # The slowest port sets the super-packets' size (LOOM_LINK_PORTS: a host's port of its
  # own rate, link_emulator.cpp).
  local slowest="${2:-}" port
  for port in $(echo "${LOOM_LINK_PORTS:-}" | tr , " "); do
    port="${port##*:}"
    if [ -z "$slowest" ] || awk -v a="$port" -v b="$slowest" 'BEGIN { exit !(a < b) }'; then slowest="$port"; fi
  done
  if [ -n "$slowest" ]; then set_gso_segments "$(awk -v mbit="$slowest" 'BEGIN { n = int(mbit * 1e6 / 8 * 0.00025 / 1448); print (n < 1 ? 1 : n) }')"; fi
  nohup "$binary" "$link_tun" "$@" > /tmp/loom-link.log 2>&1 &
}

case "${1:-}" in
  up) link_off; down; up ;;
  down) link_off; down ;;
  link)
    link_off
    if [ "${2:-off}" != off ]; then shift; link_on "$1" "${2:?usage: $0 link BINARY DELAY_US [RATE_MBIT [QUEUE_US]]}" "${@:3}"; fi ;;
  status) ip netns list; grep "$marker" /etc/hosts || true ;;
  *) echo "usage: $0 up|down|status|link BINARY DELAY_US [RATE_MBIT [QUEUE_US]]|link off" >&2; exit 2 ;;
esac
