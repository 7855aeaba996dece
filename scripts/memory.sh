#!/usr/bin/env bash
# Measures the devstack's memory with many simulated clusters converging
# at once (TestMemoryOfSubstrates):
#   scripts/memory.sh [substrates] [configs]
# N create-mode substrates (50 by default), 2 nodes each, made at once;
# configs, comma-separated (defaults by default): "defaults", the
# devstack's -kubernetes-max-running and -kubernetes-idle-timeout; "kept",
# every API server kept running; "bounded", half as many servers with an
# idle timeout of 20 s. It prints the RSS of the devstack (the test
# process) and of its API servers: at the peak, when every substrate is
# ready, and over the steady interval after. Heavy: about 300 MB a running
# API server, and several minutes; MEASURE_DEADLINE (10m) bounds the wait
# for the substrates.
set -euo pipefail
cd "$(dirname "$0")/.."
export MEASURE_SUBSTRATES=${1:-50}
export MEASURE_CONFIGS=${2:-defaults}
export MEASURE_DEADLINE=${MEASURE_DEADLINE:-10m}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go test -count=1 -run '^TestMemoryOfSubstrates$' -v -timeout 90m ./functions/devstack/ >"$out" 2>&1 || status=$?
grep -E '^(=== RUN|--- |\s+memory_test.go:[0-9]+: )' "$out" | sed -E 's/^\s+memory_test.go:[0-9]+: /  /' || true
[ "$status" -eq 0 ] || tail -20 "$out" >&2
exit $status
