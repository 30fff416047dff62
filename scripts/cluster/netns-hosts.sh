#!/usr/bin/env bash
# Two simulated hosts on this machine for multi-host runs: Linux network namespaces
# loom-a and loom-b, each joined to the root namespace by a veth pair on its own /24
# (10.213.1.0/24 and 10.213.2.0/24, root side .1, host side .2), routed through the root
# namespace (ip_forward), with their names in /etc/hosts between marker lines. Open MPI
# starts its daemons on them through scripts/cluster/netns-agent.sh (its rsh agent).
#   scripts/cluster/netns-hosts.sh up|down|status
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

case "${1:-}" in
  up) down; up ;;
  down) down ;;
  status) ip netns list; grep "$marker" /etc/hosts || true ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
