#!/usr/bin/env bash
# The main job on the embedded defaults: installs what is missing, builds, and opens the
# workbench on the default plan (an MLP on Fashion-MNIST). Where there is no display
# (DISPLAY and WAYLAND_DISPLAY unset) `loom` runs the same plan headless through
# loom-cli and prints its summary. Runs are stored in $LOOM_DB or
# ~/.local/share/loom/runs.db. Arguments go to loom (e.g. a plan file).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# mpirun as root (containers) needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
if [[ -x build/app/loom ]]; then
  exec build/app/loom "$@"
fi
echo "run-default: the workbench was not built (Qt Widgets or QCustomPlot missing); running headless" >&2
exec build/app/loom-cli run "$@"
