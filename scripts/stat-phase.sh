#!/bin/bash
# Counts what fanoutd does over one phase of a load run, per request: `perf stat` of fanoutd alone,
# only while the phase runs, divided by the requests its /metrics counted in the same window.
#
# Usage: scripts/stat-phase.sh OPERATION SCENARIO SECONDS EVENTS [fanout-load run options...]
#   e.g. scripts/stat-phase.sh REGISTER_BATCH_FIDS register-batch 1 task-clock,probe_libc:malloc --installations 500000
#        FANOUTD=/tmp/fanoutd-old scripts/stat-phase.sh REGISTER register 1.5 task-clock --installations 150000
#
# Starts a fanoutd (FANOUTD, default the release build) on a fresh directory as
# `scripts/profile-phase.sh` does (`scripts/phase-server.sh`), runs `fanout-load run SCENARIO` against it, and once /metrics
# counts the first OPERATION request, runs `perf stat -e EVENTS` on fanoutd for SECONDS. Prints
# each event per request of OPERATION (a REGISTER_BATCH_FIDS request is 1000 registrations: the
# figures are then per request; divide by 1000), the requests in the window, and the harness's
# report lines. `probe_libc:malloc` needs the uprobe (`perf probe -x libc.so.6 malloc` once); it
# slows every malloc, so compare its counts, not the CPU time measured with it. This VM has no
# hardware counters (no instructions or cycles).
set -euo pipefail

operation=$1
scenario=$2
seconds=$3
events=$4
shift 4
directory=$(mktemp -d /tmp/stat-phase.XXXXXX)
source "$(dirname "$0")/phase-server.sh"

server=
trap 'kill $server 2>/dev/null || true; rm -rf "$directory"' EXIT
requests() {
    curl -s http://127.0.0.1:7602/metrics | grep "^fanout_requests_total{listener=\"tcp\",operation=\"$operation\"," | awk '{total += $2} END {print total + 0}'
}
start_phase "${FANOUTD:-$release/fanoutd}" "$directory" "$scenario" "$operation" "$@"
before=$(requests)
perf stat -x, -e "$events" -p $server -o "$directory/stat.csv" -- sleep "$seconds"
after=$(requests)
wait $load
count=$((after - before))
echo "$operation requests in the window: $count"
awk -F, -v n=$count '$1 ~ /^[0-9.]+$/ && n > 0 { printf "%s per request: %.6g %s\n", $3, $1 / n, $2 }' "$directory/stat.csv"
grep "^fanout " "$directory/report.txt"
