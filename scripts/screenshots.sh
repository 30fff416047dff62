#!/usr/bin/env bash
# Screenshots of the real workbench for the README: starts a virtual X server (xvfb-run),
# opens the window on a plan (default: the 4-device data-parallel example), runs it for
# real and saves PNGs into docs/screenshots/. Needs a build (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
plan="${1:-resources/plans/dp4_mlp_fashion.json}"
out="${2:-docs/screenshots}"
db="$(mktemp -d)/screenshots.db"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
xvfb-run -a -s "-screen 0 1600x1000x24" build/app/loom-screenshots "$out" "$plan" "$db"
echo "screenshots in $out (run stored in $db)"
