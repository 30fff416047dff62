#!/usr/bin/env bash
# Two simulated hosts on this machine for multi-host runs: Linux network namespaces
# loom-a and loom-b, each joined to the root namespace by a veth pair on its own /24
# (10.213.1.0/24 and 10.213.2.0/24, root side .1, host side .2), routed through the root
# namespace (ip_forward), with their names in /etc/hosts between marker lines. Open MPI
# starts its daemons on them through scripts/cluster/netns-agent.sh (its rsh agent).
#   scripts/cluster/netns-hosts.sh up|down|status
#   scripts/cluster/netns-hosts.sh delay US LINK_DELAY_BINARY | delay off
# `delay` holds every packet from one host to the other for US microseconds (one way):
# policy routing sends them through a tun device (loom-delay) that the delay line
# (bench/link_delay.cpp, build/bench/link_delay) writes back after the delay. This kernel
# has no netem. Traffic to the root namespace's addresses is not delayed.
# Root only. Traffic goes only to these addresses. `down` removes all of it.
set -euo pipefail
hosts=(loom-a loom-b)
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

delay_tun=loom-delay
delay_table=213

delay_off() {
  pkill -f "link_delay $delay_tun " 2>/dev/null || true
  while ip rule del table "$delay_table" 2>/dev/null; do :; done
  ip link del "$delay_tun" 2>/dev/null || true
}

# Packets from host i to the other host's /24 take table 213, whose only route is the
# tun; written back, they arrive on the tun, match no rule and go out by the main table.
# Reverse-path filtering would drop them (their source is reached through a veth), so it
# is loose on the tun.
delay_on() {
  local us="$1" binary="$2"
  ip tuntap add dev "$delay_tun" mode tun vnet_hdr
  ip link set "$delay_tun" up
  sysctl -qw "net.ipv4.conf.$delay_tun.rp_filter=0" "net.ipv4.conf.all.rp_filter=0"
  ip route replace default dev "$delay_tun" table "$delay_table"
  ip rule add iif veth-loom-a to 10.213.2.0/24 table "$delay_table"
  ip rule add iif veth-loom-b to 10.213.1.0/24 table "$delay_table"
  nohup "$binary" "$delay_tun" "$us" > /tmp/loom-link-delay.log 2>&1 &
}

case "${1:-}" in
  up) delay_off; down; up ;;
  down) delay_off; down ;;
  delay)
    delay_off
    if [ "${2:-off}" != off ]; then delay_on "$2" "${3:?usage: $0 delay US LINK_DELAY_BINARY}"; fi ;;
  status) ip netns list; grep "$marker" /etc/hosts || true ;;
  *) echo "usage: $0 up|down|status|delay US BINARY|delay off" >&2; exit 2 ;;
esac
