#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, from Debian's packages (slurm-wlm, munge),
# so that Loom's Slurm path (srun --mpi=pmix inside an allocation) runs for real:
# munged, then slurmctld and slurmd started directly (containers and VMs here have no
# systemd), with a minimal /etc/slurm/slurm.conf: cluster "loom", this host as controller
# and only node, partition "debug", SlurmUser root, no cgroups (proctrack/linuxproc,
# task/none), state and logs under $LOOM_SLURM_DIR (default /var/tmp/loom-slurm).
#   scripts/cluster/slurm-single-node.sh [start]|stop|status   (status: exit 0 when up)
# Root only. Idempotent: `start` leaves running daemons alone and waits until the node is
# idle. `stop` ends what this script started. It never overwrites a slurm.conf it did not
# write (a real cluster's); it does not install packages (apt-get install slurm-wlm munge).
set -euo pipefail
dir=${LOOM_SLURM_DIR:-/var/tmp/loom-slurm}
conf=/etc/slurm/slurm.conf
marker="# written by Loom's scripts/cluster/slurm-single-node.sh"
host=$(hostname -s)

running() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

need() {
  for tool in munged slurmctld slurmd sinfo srun; do
    command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install slurm-wlm munge" >&2; exit 3; }
  done
  [[ $(id -u) == 0 ]] || { echo "run as root" >&2; exit 3; }
}

start_munge() {
  [[ -f /etc/munge/munge.key ]] || mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  if munge -n >/dev/null 2>&1; then return; fi  # a munged already answers
  install -d -o munge -g munge -m 755 /run/munge
  runuser -u munge -- munged
  touch "$dir/started-munged"
}

write_conf() {
  if [[ -f $conf ]] && ! grep -qF "$marker" "$conf"; then
    echo "$conf exists and was not written by this script: not touching it" >&2; exit 4
  fi
  # The node as slurmd sees it (a node whose sockets or cores differ from slurm.conf is
  # reconfigured or drained), with RealMemory a little under what it found.
  local node mem
  node=$(slurmd -C | head -1)  # NodeName=... CPUs=... Boards=... RealMemory=N
  mem=${node##*RealMemory=}
  node="${node% RealMemory=*} RealMemory=$((mem * 9 / 10))"
  mkdir -p /etc/slurm "$dir/state" "$dir/spool"
  cat > "$conf" <<EOF
$marker: one node, no cgroups.
ClusterName=loom
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
$node State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

wait_idle() {
  local state=""
  for _ in $(seq 1 60); do
    state=$(sinfo -h -n "$host" -o %t 2>/dev/null || true)
    [[ $state == idle || $state == mix || $state == alloc ]] && { echo "slurm: node $host $state"; return; }
    sleep 0.5
  done
  echo "slurm: node $host not idle after 30 s (state '${state}'); see $dir/*.log" >&2; exit 5
}

start() {
  need
  mkdir -p "$dir"
  start_munge
  write_conf
  running "$dir/slurmctld.pid" || slurmctld
  running "$dir/slurmd.pid" || slurmd
  wait_idle
}

# TERM, and KILL for what is still there 10 s later; each daemon takes about 2 s.
stop_pids() {
  local pids=() pid
  for pidfile in "$@"; do running "$pidfile" && pids+=("$(cat "$pidfile")"); done
  [[ ${#pids[@]} -gt 0 ]] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 50); do
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && break; pid=""; done
    [[ -z $pid ]] && return 0
    sleep 0.2
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

stop() {
  # Jobs first, so that no step's processes outlive slurmd.
  if running "$dir/slurmctld.pid"; then scancel --full --signal=KILL --state=RUNNING -u root 2>/dev/null || true; fi
  stop_pids "$dir/slurmd.pid" "$dir/slurmctld.pid"
  if [[ -f $dir/started-munged ]]; then munged --stop >/dev/null 2>&1 || true; rm -f "$dir/started-munged"; fi
}

# Exit 0 when this script's daemons run (without asking slurmctld: sinfo waits ~10 s for
# one that is down).
status() {
  running "$dir/slurmctld.pid" && running "$dir/slurmd.pid" || { echo "slurm: not running"; return 1; }
  sinfo
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 [start]|stop|status" >&2; exit 2 ;;
esac
