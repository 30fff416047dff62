#!/usr/bin/env bash
# The shape of the code, for closing notes: lines of C++ and CUDA outside tests/ and
# bench/, the longest files, and the functions over 60 lines (Universal Ctags' function
# extents; lambdas are left out). usage: scripts/code_shape.sh [REV]  (default: the work tree)
set -euo pipefail
cd "$(dirname "$0")/.."
tree=.
if [[ $# -gt 0 ]]; then
  tree=$(mktemp -d)
  trap 'rm -rf "$tree"' EXIT
  git archive "$1" | tar -x -C "$tree"
fi
cd "$tree"
files=$(find app core kernels launcher profiles ui -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
echo "lines: $(cat $files | wc -l) in $(echo "$files" | wc -l) files"
echo "longest files:"
wc -l $files | sort -rn | sed -n '2,6p'
ctags --languages=C++ --map-C++=+.cu --map-C++=+.cuh --kinds-C++=f --fields=+ne -o - $files 2>/dev/null |
  awk -F'\t' '$1 !~ /^__anon/ { line=0; end=0
      for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) line = substr($i, 6); if ($i ~ /^end:/) end = substr($i, 5) }
      if (end - line + 1 > 60) printf "%5d  %s:%d %s\n", end - line + 1, $2, line, $1 }' | sort -rn > /tmp/long_functions.$$
echo "functions over 60 lines: $(wc -l < /tmp/long_functions.$$)"
head -8 /tmp/long_functions.$$
rm -f /tmp/long_functions.$$
