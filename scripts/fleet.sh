#!/usr/bin/env bash
# Simulates a fleet on this machine, against the devstack's emulators:
#   scripts/fleet.sh [-instances N] [clusters] [projects]
# -instances N serves the functions from N processes of the deployed
# server (the devstack's -instances; DEVSTACK_INSTANCES).
# N clusters (1,000 by default) over P provider projects (N/200 by default),
# each project with a GKE request quota (FLEET_QUOTA, 1200 a minute), with
# fast intervals: provider operations of 0.3 s, converging runs every 0.3 s,
# steady ones every 15 s, all slowed by FLEET_TIMESCALE (1, or N/2,000 past
# 2,000 clusters, so that one 2-core process playing the whole fleet, its
# provider and its database keeps up); it reaches steady state, watches it
# for two steady intervals, then changes 5% of the clusters at once.
# It prints the report and ends with one line:
#   fleet: N clusters, P projects, quota exceeded E, errors shown S, converged C/T, change-to-ready p99 X s (limit L s)
# and exits non-zero when a goal fails: E = 0, S = 0, C = T, p99 <= L.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "-instances" ]; then
  [ $# -ge 2 ] || { echo "fleet.sh: -instances needs a count" >&2; exit 2; }
  export DEVSTACK_INSTANCES=$2
  shift 2
fi
export FLEET_CLUSTERS=${1:-1000}
[ $# -ge 2 ] && export FLEET_PROJECTS=$2
export FLEET_QUOTA=${FLEET_QUOTA:-1200}
export FLEET_TIMESCALE=${FLEET_TIMESCALE:-$(awk -v n="$FLEET_CLUSTERS" 'BEGIN { print (n > 2000 ? n / 2000 : 1) }')}
export FLEET_STEADY=${FLEET_STEADY:-$(awk -v k="$FLEET_TIMESCALE" 'BEGIN { print 15 * k }')s}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go test -count=1 -run '^TestFleet$' -v -timeout 90m ./functions/devstack/ >"$out" 2>&1 || status=$?
grep -E '^\s+fleet_test.go:[0-9]+: ' "$out" | sed -E 's/^\s+fleet_test.go:[0-9]+: //' || true
grep -E '^\s+fleet_test.go:[0-9]+: .*(want|deadline)' "$out" >/dev/null && grep -E 'want|deadline' "$out" | sed 's/^\s*//' >&2 || true
grep -E '^fleet: ' "$out" || { tail -20 "$out" >&2; }
exit $status
