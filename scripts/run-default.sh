#!/usr/bin/env bash
# The main job on the embedded defaults: installs what is missing, builds, and runs the
# default plan (an MLP on Fashion-MNIST), printing its summary. The run is stored in the
# run store ($LOOM_DB or ~/.local/share/loom/runs.db).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec build/app/loom-cli run "$@"
