#!/usr/bin/env bash
# Runs the benchmarks that scripts/README.md quotes, several times each, so that
# medians can be read off (benchstat, if installed, summarizes them):
#   scripts/bench.sh [count]
# It prints the benchmarks' lines as they come; when a benchmark fails it
# prints go test's whole output and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

bench() {
  local status=0
  go test -timeout=60m -run='^$' "$@" -count="$count" >"$log" 2>&1 &
  local pid=$!
  tail -n +1 --pid="$pid" -f "$log" | grep --line-buffered -E '^(Benchmark|ok|FAIL|--- FAIL)' || true
  wait "$pid" || status=$?
  if [ "$status" -ne 0 ]; then
    echo "--- bench.sh: go test $* failed (exit $status); its output:" >&2
    cat "$log" >&2
    exit 1
  fi
}

# The fleet and memory measurements have scripts of their own (fleet.sh,
# memory.sh): a whole fleet, or many API servers, an iteration.
bench -bench=. -skip='BenchmarkSubstrateJoined|^BenchmarkNeighbourFlood$|^BenchmarkFleet$|^BenchmarkMemoryOfSubstrates$' -benchtime=300x \
  ./shared/store/ ./shared/chain/ ./shared/clusters/ ./functions/devstack/ ./emulators/firestore/
# A substrate from its pool's event to its nodes joined takes seconds
# (a simulated provider operation, a Kubernetes API server): a few
# iterations each.
bench -bench=BenchmarkSubstrateJoined -benchtime=5x ./functions/devstack/
# A neighbour's flood: a stack, a flood of clusters and two provider
# operations of 10 s an iteration.
bench -bench='^BenchmarkNeighbourFlood$' -benchtime=1x ./functions/devstack/
