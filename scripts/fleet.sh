#!/usr/bin/env bash
# Simulates a fleet on this machine, against the devstack's emulators
# (BenchmarkFleet, sized by its -fleet.* flags):
#   scripts/fleet.sh [clusters] [projects] [devstack flags...] [--price-NAME=VALUE...]
# -instances N serves the functions from N processes of the deployed
# server (the devstack's -instances; DEVSTACK_INSTANCES).
# N clusters (1,000 by default) over P provider projects (N/200 by default),
# each project with a GKE request quota (FLEET_QUOTA, 1200 a minute), with
# fast intervals: provider operations of 0.3 s, converging runs every 0.3 s,
# steady ones every 15 s, all slowed by FLEET_TIMESCALE (1, or N/2,000 past
# 2,000 clusters, so that one 2-core process playing the whole fleet, its
# provider and its database keeps up); it reaches steady state, watches it
# for two steady intervals, then changes 5% of the clusters at once.
# Devstack flags set the devstack's Config of the same name (e.g.
# -tasks-duplicate-rate 0.1; FLEET_DEVSTACK_FLAGS too), but -instances N,
# which runs the functions as N processes of the deployed server as the
# devstack's tests do (DEVSTACK_INSTANCES).
#
# It prints the report, then what a steady cluster uses per hour (counted
# by the emulators: Firestore's billed document operations, Cloud Tasks'
# dispatches and creates, GKE calls, Pub/Sub bytes; and CPU time, measured
# as the processes'), per steady run (one dispatch each) times the 12 runs
# an hour of production's steady interval (5 minutes), and what FLEET_COST_CLUSTERS (1,000) such
# clusters cost a month at the prices below. It ends with one line:
#   fleet: N clusters, P projects, quota exceeded E, errors shown S, converged C/T, change-to-ready p99 X s (limit L s)
# and exits non-zero when a goal fails: E = 0, S = 0, C = T, p99 <= L.
#
# Prices: list prices in USD, us-central1, as known on 2026-12-01 (not
# re-read from the pages that day), free tiers left out (so an upper
# bound by at most them). Pass others as --price-NAME=VALUE or in the
# environment as FLEET_PRICE_NAME (upper case, - as _):
#   firestore-read     0.06 per 100,000 document reads   https://cloud.google.com/firestore/pricing
#   firestore-write    0.18 per 100,000 document writes  https://cloud.google.com/firestore/pricing
#   firestore-delete   0.02 per 100,000 document deletes https://cloud.google.com/firestore/pricing
#   tasks              0.40 per million billable operations (each dispatch attempt and API call)
#                                                        https://cloud.google.com/tasks/pricing
#   run-vcpu-second    0.000024 per vCPU-second, request-based billing
#                                                        https://cloud.google.com/run/pricing
#   run-gib-second     0.0000025 per GiB-second, request-based billing
#                                                        https://cloud.google.com/run/pricing
#   run-request        0.40 per million requests         https://cloud.google.com/run/pricing
#   pubsub-tib         40 per TiB of throughput (publish and delivery, 1,000 bytes at least a message)
#                                                        https://cloud.google.com/pubsub/pricing
# and the shape of an instance: run-gib-per-vcpu, 0.5 (Cloud Run's default
# 512 MiB for 1 vCPU); the CPU-seconds are billed as vCPU-seconds, which
# assumes an instance is busy whenever it is billed: request-based billing
# bills the whole time a request is in flight, so this is a lower bound.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A price=(
	[firestore-read]=0.06 [firestore-write]=0.18 [firestore-delete]=0.02
	[tasks]=0.40 [run-vcpu-second]=0.000024 [run-gib-second]=0.0000025 [run-request]=0.40
	[pubsub-tib]=40 [run-gib-per-vcpu]=0.5
)
for k in "${!price[@]}"; do
	env=FLEET_PRICE_$(tr 'a-z-' 'A-Z_' <<<"$k")
	[ -n "${!env:-}" ] && price[$k]=${!env}
done

positional=()
devflags=""
want_instances=""
for a in "$@"; do
	if [ -n "$want_instances" ]; then
		export DEVSTACK_INSTANCES=$a
		want_instances=""
		continue
	fi
	case $a in
	-instances | --instances) want_instances=1 ;;
	-instances=* | --instances=*) export DEVSTACK_INSTANCES=${a#*=} ;;
	--price-*=*)
		k=${a#--price-}
		k=${k%%=*}
		[ -n "${price[$k]+x}" ] || { echo "fleet.sh: no price named $k" >&2; exit 2; }
		price[$k]=${a#*=}
		;;
	-*) devflags="$devflags $a" ;;
	*)
		if [ -n "$devflags" ]; then
			devflags="$devflags $a" # a devstack flag's value
		else
			positional+=("$a")
		fi
		;;
	esac
done
[ -z "$want_instances" ] || { echo "fleet.sh: -instances needs a count" >&2; exit 2; }
clusters=${positional[0]:-1000}
devflags="${FLEET_DEVSTACK_FLAGS:-}$devflags"
timescale=${FLEET_TIMESCALE:-$(awk -v n="$clusters" 'BEGIN { print (n > 2000 ? n / 2000 : 1) }')}
# BenchmarkFleet's flags (fleet_test.go).
bench=(-fleet.clusters="$clusters" -fleet.quota="${FLEET_QUOTA:-1200}" -fleet.timescale="$timescale"
	-fleet.steady="${FLEET_STEADY:-$(awk -v k="$timescale" 'BEGIN { print 15 * k }')s}" -fleet.settle
	-fleet.devstack-flags="$devflags")
[ ${#positional[@]} -ge 2 ] && bench+=(-fleet.projects="${positional[1]}")
cost_clusters=${FLEET_COST_CLUSTERS:-1000}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
go test -count=1 -run '^$' -bench '^BenchmarkFleet$' -benchtime=1x -timeout 90m ./functions/devstack/ -args "${bench[@]}" >"$out" 2>&1 || status=$?
grep -E '^\s+fleet_test.go:[0-9]+: ' "$out" | sed -E 's/^\s+fleet_test.go:[0-9]+: //' || true
grep -E '^\s+fleet_test.go:[0-9]+: .*(want|deadline)' "$out" >/dev/null && grep -E 'want|deadline' "$out" | sed 's/^\s*//' >&2 || true

if usage=$(grep -E '^fleet-usage: ' "$out"); then
	prices=""
	for k in "${!price[@]}"; do prices="$prices $k=${price[$k]}"; done
	awk -v n="$cost_clusters" -v prices="$prices" -v flags="$devflags" -v instances="${DEVSTACK_INSTANCES:-1}" '
	BEGIN { split(prices, pl, " "); for (i in pl) { split(pl[i], kv, "="); p[kv[1]] = kv[2] } }
	{
		for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) u[kv[1]] = kv[2]
		hours = 730 # a month, as Google bills it
		# The function instances, when they run apart, are the functions
		# alone; one process is the functions with the emulators.
		cpu = u["cpu_seconds_instances"] > 0 ? u["cpu_seconds_instances"] : u["cpu_seconds"]
		cpuwhat = u["cpu_seconds_instances"] > 0 ? "the function instances" : "the one devstack process: functions, emulators and the test"
		if (instances > 1) flags = " -instances " instances flags
		printf "\nper steady cluster per hour (runs every 5 min)%s:\n", flags == "" ? "" : ", devstack" flags
		printf "  Firestore        %10.2f reads, %.3f writes, %.3f deletes\n", u["firestore_reads"], u["firestore_writes"], u["firestore_deletes"]
		printf "  Cloud Tasks      %10.2f dispatches, %.3f creates\n", u["tasks_dispatches"], u["tasks_creates"]
		printf "  CPU              %10.3f s (%s)\n", cpu, cpuwhat
		printf "  GKE calls        %10.2f\n", u["gke_calls"]
		printf "  Pub/Sub          %10.3f messages, %.0f bytes billed\n", u["pubsub_messages"], u["pubsub_bytes"]
		k = n * hours
		fs = k * (u["firestore_reads"] * p["firestore-read"] + u["firestore_writes"] * p["firestore-write"] + u["firestore_deletes"] * p["firestore-delete"]) / 1e5
		tasks = k * (u["tasks_dispatches"] + u["tasks_creates"]) * p["tasks"] / 1e6
		runcpu = k * cpu * (p["run-vcpu-second"] + p["run-gib-per-vcpu"] * p["run-gib-second"])
		runreq = k * u["tasks_dispatches"] * p["run-request"] / 1e6
		pub = k * u["pubsub_bytes"] / 2^40 * p["pubsub-tib"]
		printf "a month of %d such clusters (list prices as known on 2026-12-01, free tiers left out):\n", n
		printf "  Firestore        $%9.2f\n", fs
		printf "  Cloud Tasks      $%9.2f\n", tasks
		printf "  Cloud Run        $%9.2f (CPU and memory) + $%.2f (requests)\n", runcpu, runreq
		printf "  Pub/Sub          $%9.2f\n", pub
		printf "  GKE calls        $%9.2f (free; they count against each project'"'"'s quota)\n", 0
		printf "  total            $%9.2f\n", fs + tasks + runcpu + runreq + pub
		printf "  at: Firestore $%s/$%s/$%s per 100k reads/writes/deletes; Cloud Tasks $%s per million; Cloud Run $%s per vCPU-s, $%s per GiB-s (%s GiB a vCPU), $%s per million requests; Pub/Sub $%s per TiB\n", p["firestore-read"], p["firestore-write"], p["firestore-delete"], p["tasks"], p["run-vcpu-second"], p["run-gib-second"], p["run-gib-per-vcpu"], p["run-request"], p["pubsub-tib"]
	}' <<<"$usage"
fi
grep -E '^fleet: ' "$out" || { tail -20 "$out" >&2; }
# The latency goal, which the benchmark reports and the script holds.
if ! grep -E '^fleet: ' "$out" | awk '{ p99 = $(NF-4); limit = $(NF-1); exit !(p99 + 0 <= limit + 0) }'; then
	echo "fleet.sh: change-to-ready p99 above its limit" >&2
	[ "$status" -ne 0 ] || status=1
fi
exit $status
