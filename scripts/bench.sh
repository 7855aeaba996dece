#!/usr/bin/env bash
# Runs the benchmarks that the README quotes, several times each, so that
# medians can be read off (benchstat, if installed, summarizes them):
#   scripts/bench.sh [count]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
go test -run='^$' -bench=. -skip=BenchmarkSubstrateJoined -benchtime=300x -count="$count" \
  ./shared/store/ ./shared/chain/ ./shared/clusters/ ./functions/devstack/ ./emulators/firestore/ 2>/dev/null \
  | grep -E '^(Benchmark|ok|FAIL)'
# A substrate from its pool's event to its nodes joined takes seconds
# (a simulated provider operation, a Kubernetes API server): a few
# iterations each.
go test -run='^$' -bench=BenchmarkSubstrateJoined -benchtime=5x -count="$count" ./functions/devstack/ 2>/dev/null \
  | grep -E '^(Benchmark|ok|FAIL)'
