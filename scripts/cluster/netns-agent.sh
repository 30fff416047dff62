#!/usr/bin/env bash
# Open MPI's rsh launch agent for the simulated hosts of netns-hosts.sh: called as
# `netns-agent.sh HOST COMMAND...` (as it would call ssh), it runs COMMAND inside HOST's
# network namespace, with HOST as its host name (a UTS namespace of its own), so that Open
# MPI and Loom see two machines: separate addresses and names, TCP between them.
set -euo pipefail
while [[ "${1:-}" == -* ]]; do shift; done  # ssh-style options Open MPI may pass
host="$1"
shift
exec ip netns exec "$host" unshare --uts /bin/sh -c 'hostname "$0"; exec /bin/sh -c "$1"' "$host" "$*"
