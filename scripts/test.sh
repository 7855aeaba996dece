#!/usr/bin/env bash
# Every test: go test ./... with the flags given (CI adds -race -count=1).
# The devstack's and some emulators' tests give simulated clusters a real
# Kubernetes API server, built from source once per machine (about 20
# minutes on a fresh 2-core machine, seconds after), and the provider's
# acceptance test drives OpenTofu, built the same way (scripts/tofu.sh,
# 4 to 13 minutes beside the rest). The tests that cannot need them run
# while they build; the others start once both are built, so that the
# builds' minutes are spent neither idle nor inside a test binary's time
# limit.
#   scripts/test.sh [go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."

module=$(go list -m)
# A package needs the API server when its test binary links the package
# that runs it (emulators/kubesim).
needs=$(go list -test -f '{{.ImportPath}}|{{join .Deps " "}}' ./... |
  awk -F'|' -v dep="$module/emulators/kubesim" '
    $1 ~ /\.test\]$/ { n = split($2, d, " "); for (i = 1; i <= n; i++) if (d[i] == dep) { split($1, p, " "); print p[1]; break } }' |
  sed 's/_test$//' | sort -u)
others=$(go list ./... | sort | comm -23 - <(echo "$needs"))

phase() { echo "--- $1"; start=$SECONDS; }
took() { echo "--- $1 took $((SECONDS - start)) s"; }

begin=$SECONDS
echo "--- the Kubernetes API server and OpenTofu of the tests (built once per machine), meanwhile the tests that use neither"
build_log=$(mktemp)
tofu_log=$(mktemp)
trap 'rm -f "$build_log" "$tofu_log"' EXIT
go run ./emulators/kubesim/cmd/kube-apiserver-build >"$build_log" 2>&1 &
build=$!
# The provider's acceptance test drives OpenTofu; it is among the packages
# that need the API server (it starts the devstack), so both are ready
# before those start.
scripts/tofu.sh >"$tofu_log" 2>&1 &
tofu=$!

phase "go test $* (the $(echo "$others" | wc -w) packages that do not use the API server)"
status=0
# shellcheck disable=SC2086
go test -timeout 30m "$@" $others || status=$?
took "those packages"

if ! wait "$build"; then
  cat "$build_log"; echo "--- the Kubernetes API server did not build"; exit 1
fi
cat "$build_log"
echo "--- the API server ready after $((SECONDS - begin)) s"
if ! wait "$tofu"; then
  cat "$tofu_log"; echo "--- OpenTofu did not build"; exit 1
fi
cat "$tofu_log"
echo "--- OpenTofu ready after $((SECONDS - begin)) s"

phase "go test $* (the $(echo "$needs" | wc -w) packages that use it)"
# shellcheck disable=SC2086
go test -timeout 30m "$@" $needs || status=$?
took "those packages"
exit "$status"
