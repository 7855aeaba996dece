#!/usr/bin/env bash
# Every test: go test ./... with the flags given (CI adds -race -count=1).
# The devstack's and emulators' tests give simulated clusters a real
# Kubernetes API server, built from source once per machine (several
# minutes the first time, seconds after): it is built first, so that the
# build's minutes are not spent inside a test binary's time limit.
#   scripts/test.sh [go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."
echo "--- the Kubernetes API server of the tests (built once per machine)"
go run ./emulators/kubesim/cmd/kube-apiserver-build
echo "--- go test $* ./..."
exec go test -timeout 30m "$@" ./...
