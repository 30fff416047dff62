#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite under CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# mpirun as root (CI containers) needs these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
ctest --test-dir build --output-on-failure -j2 "$@"
# The libFuzzer targets (plans, stream frames, store files) for a short while each, where
# clang with libFuzzer is installed; LOOM_FUZZ_SECONDS=0 leaves them out.
if [ "${LOOM_FUZZ_SECONDS:-30}" != 0 ]; then scripts/fuzz.sh "${LOOM_FUZZ_SECONDS:-30}"; fi
