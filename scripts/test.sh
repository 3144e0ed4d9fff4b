#!/usr/bin/env bash
# `make test`'s test run: `swift test --skip-build`, in three runs one after the other, each with a
# time limit:
#   1. every test but the two suites below, in parallel as Swift Testing runs them;
#   2. the load harness (`LoadHarnessTests`): its latency phases pin every thread of the test
#      process, and what it starts meanwhile, to one CPU (`CPUPinning`), and its scenarios load
#      both cores; beside the in-process cluster tests that starved their leases' renewals;
#   3. the cluster of fanoutd processes (`ClusterFailoverTests`) alone: it loads both cores for
#      minutes and times a failover (sends again within 10 s of a kill).
# Run alongside the rest on this 2-core machine, both made other tests' leases lapse and their
# waits run out (CI runs of 2026-11-28 and -29). Arguments (`--filter X`) make one run of them all.
# A run still going after FANOUT_TEST_TIME_LIMIT seconds (default 1800) has hung: the script
# prints every thread's stack of each test process (gdb), flushes the output the process still
# holds, stops it and exits 124, so a hang ends as a failure that names where it waits instead
# of as a CI time-out. The exit status is the first failing run's.
set -uo pipefail
limit=${FANOUT_TEST_TIME_LIMIT:-1800}
alone='LoadHarnessTests|ClusterFailoverTests'

# Runs `swift test --skip-build "$@"` under the time limit; returns its exit status.
run() {
    echo "== swift test $*" >&2
    swift test --skip-build "$@" &
    local runner=$!
    local deadline=$((SECONDS + limit))
    while kill -0 "$runner" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            echo "the tests still run after ${limit} s; every thread of each test process:" >&2
            for pid in $(pgrep -f 'fanoutPackageTests\.xctest'); do
                gdb -batch -q -p "$pid" -ex 'call (int) fflush(0)' -ex 'thread apply all bt' >&2 2>&1 || true
            done
            pkill -KILL -f 'fanoutPackageTests\.xctest'
            kill -TERM "$runner" 2>/dev/null
            wait "$runner"
            return 124
        fi
        sleep 2
    done
    wait "$runner"
}

if (($# > 0)); then
    run "$@"
    exit
fi
status=0
for arguments in "--skip $alone" "--filter LoadHarnessTests" "--filter ClusterFailoverTests"; do
    # shellcheck disable=SC2086 # the arguments are words
    run $arguments
    result=$?
    if ((result == 124)); then exit 124; fi
    if ((status == 0)); then status=$result; fi
done
exit $status
