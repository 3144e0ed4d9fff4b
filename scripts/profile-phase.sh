#!/bin/bash
# Profiles one phase of a load run: fanoutd alone, only while the phase runs.
#
# Usage: scripts/profile-phase.sh OPERATION SCENARIO [SECONDS] [fanout-load run options...]
#   e.g. scripts/profile-phase.sh SUBSCRIBE subscribe 1 --installations 300000
#        scripts/profile-phase.sh ACK send-topic 1.5
#
# Starts the release fanoutd on a fresh directory as `fanout-load run` starts it (durability
# `always`, no snapshots, quotas off) with its HTTP front on 127.0.0.1:7602, adds a consumer key,
# and runs `fanout-load run SCENARIO` against it. Once `/metrics` counts the first OPERATION request
# (its name as `fanout_requests_total` gives it: REGISTER, SUBSCRIBE, ACK, ...), `perf record -g`
# samples fanoutd for SECONDS (default 1), so the phases before it stay out of the profile. Prints
# the harness's report; the profile is `perf.data` in the fresh directory (`perf report -i`).
# PERF_EVENTS replaces the sampling (default `-F 2000`), e.g. PERF_EVENTS="-e sched:sched_switch".
# Needs `swift build -c release` of fanoutd, fanout and fanout-load, and linux-perf.
set -euo pipefail

operation=$1
scenario=$2
seconds=${3:-1}
shift $(($# < 3 ? $# : 3))
directory=$(mktemp -d /tmp/profile-phase.XXXXXX)
source "$(dirname "$0")/phase-server.sh"

server=
trap 'kill $server 2>/dev/null || true' EXIT
start_phase "$release/fanoutd" "$directory" "$scenario" "$operation" "$@"
perf record ${PERF_EVENTS:--F 2000} -g -p $server -o "$directory/perf.data" -- sleep "$seconds" > /dev/null 2>&1
wait $load
cat "$directory/report.txt"
echo "profile: perf report -i $directory/perf.data"
