#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang with AddressSanitizer and
# UndefinedBehaviorSanitizer) in build-fuzz/ and runs each for SECONDS (default 30) over
# its seed corpus. Exits non-zero on the first crash, leaving the crashing input in
# build-fuzz/crashes/. Skips, saying so, where clang or libFuzzer is missing.
# The mutation seed is fixed (LOOM_FUZZ_SEED, default 1) so that CI walks the same inputs
# on every machine and a landing cannot fail on a random find; LOOM_FUZZ_SEED=0 lets
# libFuzzer pick one, for the long exploratory runs that look for new bugs.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz: clang with libFuzzer not found (apt-get install clang libclang-rt-14-dev); skipped"
  exit 0
fi
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_FUZZ=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${@:2}" >/dev/null
cmake --build build-fuzz -j"$(nproc)"
mkdir -p build-fuzz/crashes
for target in plan frame store checkpoint; do
  work="build-fuzz/corpus/$target"  # grows as the fuzzer finds new paths; the seeds stay in git
  mkdir -p "$work" "tests/fuzz/corpus/$target"
  echo "fuzz: $target for ${seconds} s"
  ASAN_OPTIONS=detect_leaks=0 "build-fuzz/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -max_len=65536 \
    -rss_limit_mb=2048 -timeout=10 -seed="${LOOM_FUZZ_SEED:-1}" -artifact_prefix="build-fuzz/crashes/$target-" -print_final_stats=1 \
    "$work" "tests/fuzz/corpus/$target" 2>&1 | grep -E "^#[0-9]+ +DONE|^stat::(number_of_executed_units|peak_rss)|^==|^SUMMARY" | tail -4
done
