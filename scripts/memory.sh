#!/usr/bin/env bash
# Measures the devstack's memory with many simulated clusters converging
# at once (BenchmarkMemoryOfSubstrates):
#   scripts/memory.sh [substrates] [configs]
# N create-mode substrates (50 by default), 2 nodes each, made at once;
# configs, comma-separated (defaults by default): "defaults", the
# devstack's -kubernetes-max-running and -kubernetes-idle-timeout; "kept",
# every API server kept running; "bounded", half as many servers with an
# idle timeout of 20 s. It prints the RSS of the devstack (the test
# process) and of its API servers: at the peak, when every substrate is
# ready, and over the steady interval after. Heavy: about 300 MB a running
# API server, and several minutes; MEMORY_DEADLINE (10m) bounds the wait
# for the substrates (the benchmark's -memory.deadline).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go test -count=1 -run '^$' -bench '^BenchmarkMemoryOfSubstrates$' -benchtime=1x -timeout 90m ./functions/devstack/ \
	-args -memory.substrates="${1:-50}" -memory.configs="${2:-defaults}" -memory.deadline="${MEMORY_DEADLINE:-10m}" -memory.after \
	>"$out" 2>&1 || status=$?
grep -E '^(BenchmarkMemoryOfSubstrates|--- |\s+memory_test.go:[0-9]+: )' "$out" | sed -E 's/^\s+memory_test.go:[0-9]+: /  /' || true
[ "$status" -eq 0 ] || tail -20 "$out" >&2
exit $status
