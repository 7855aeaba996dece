#!/usr/bin/env bash
# Measures the latency of node pool calls under contention: 20 clients
# mixing list, create, update and delete on 5 clusters of the devstack
# (BenchmarkContention), several times so that medians can be read off:
#   scripts/contention.sh [count]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
go test -run='^$' -bench=Contention -benchtime=40x -count="$count" ./functions/devstack/ 2>/dev/null \
  | grep -E '^(Benchmark|ok|FAIL)'
