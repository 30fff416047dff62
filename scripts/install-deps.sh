#!/usr/bin/env bash
# Installs the Debian packages Loom builds, tests and runs with. Idempotent: asks apt only
# for what is missing, so a second run is quick and offline-safe.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3
  qt6-base-dev qt6-svg-dev libqcustomplot-dev
  libopenmpi-dev openmpi-bin
  libsqlite3-dev sqlite3
  libopenblas-dev zlib1g-dev nlohmann-json3-dev
  dataset-fashion-mnist
  xvfb xauth
  slurm-wlm munge  # a one-node Slurm cluster for the cluster tests (scripts/cluster)
)
# The peer benchmark (PyTorch) is only needed for bench/; pass --bench to include it.
if [[ "${1:-}" == "--bench" ]]; then packages+=(python3-torch python3-numpy); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
