#!/usr/bin/env bash
# The chaos suite (functions/devstack TestChaos) over many seeds: a mixed
# workload under a randomized schedule of lost answers, failures and
# latency on every service, with instances killed, then every invariant
# checked. Prints each seed's outcome and, at the end, the failing seeds:
# CHAOS_SEED=N go test -run 'TestChaos$' ./functions/devstack/ repeats one.
#   scripts/chaos.sh [FIRST [LAST]]      seeds FIRST..LAST (default 1..10)
# CHAOS_LOAD (a Go duration, default 20s) sets how long each load runs;
# RACE=1 adds the race detector. Each seed's log is kept in a folder it
# names.
set -euo pipefail
cd "$(dirname "$0")/.."
first=${1:-1}
last=${2:-$((first + 9))}

# The suite's processes need the Kubernetes API server of the tests only
# if a test asks for it; build it once anyway, as scripts/test.sh does.
go run ./emulators/kubesim/cmd/kube-apiserver-build >/dev/null

logs=$(mktemp -d)
bin="$logs/devstack.test"
flags=()
[ "${RACE:-}" = 1 ] && flags+=(-race)
go test "${flags[@]}" -c -o "$bin" ./functions/devstack/

failed=()
for seed in $(seq "$first" "$last"); do
  start=$SECONDS
  # The test binary runs where go test would, for the seed's file.
  if (cd functions/devstack && CHAOS_SEED=$seed "$bin" -test.run '^TestChaos$' -test.count=1 -test.v -test.timeout 20m) >"$logs/seed-$seed.log" 2>&1; then
    echo "seed $seed: ok ($((SECONDS - start)) s)"
  else
    echo "seed $seed: FAILED ($((SECONDS - start)) s), log $logs/seed-$seed.log"
    failed+=("$seed")
  fi
  grep -h -E 'load done|converged|keyed creates' "$logs/seed-$seed.log" | sed 's/^ */  /' || true
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failing seeds: ${failed[*]} (CHAOS_SEED=N go test -run 'TestChaos\$' ./functions/devstack/ repeats one)"
  exit 1
fi
echo "every seed passed; logs in $logs"
