#!/usr/bin/env bash
# Screenshots of the real workbench for the README: starts a virtual X server (xvfb-run),
# opens the window on a plan (default: the 4-device data-parallel example), runs it for
# real and saves PNGs into docs/screenshots/: for each size (default 1280x720 and
# 1920x1080, a laptop and a desktop screen) the window as a screen of that size lays it
# out, while designing, after the run, zoomed into a step, in the dark palette, with the
# strategy form and launch log, and with a plan error; plus the Help menu's glossary and
# tour. Needs a build (scripts/build.sh).
#   scripts/screenshots.sh [PLAN.json] [OUT_DIR] [WxH...]
set -euo pipefail
cd "$(dirname "$0")/.."
plan="${1:-resources/plans/dp4_mlp_fashion.json}"
out="${2:-docs/screenshots}"
shift $(( $# < 2 ? $# : 2 ))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1280x720 1920x1080)
args=()
for s in "${sizes[@]}"; do args+=(--size "$s"); done
db="$(mktemp -d)/screenshots.db"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# The virtual screen holds the largest window asked for.
xvfb-run -a -s "-screen 0 2560x1440x24" build/app/loom-screenshots "${args[@]}" "$out" "$plan" "$db"
echo "screenshots in $out (run stored in $db)"
