#!/usr/bin/env bash
# Runs every fuzz target of the project for a while each (default 30s):
#   scripts/fuzz.sh [duration]
# A failure leaves its input under the package's testdata/fuzz, to commit.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-30s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r file; do
  pkg="./$(dirname "${file#./}")"
  for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | cut -d' ' -f2); do
    echo "--- $pkg $target ($time)"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$time" "$pkg"
  done
done
