#!/usr/bin/env bash
# `make test`'s test run: `swift test --skip-build` with a time limit. A run still going after
# FANOUT_TEST_TIME_LIMIT seconds (default 1800) has hung: the script prints every thread's stack
# of each test process (gdb), flushes the output the process still holds, stops it and exits 124,
# so a hang ends as a failure that names where it waits instead of as a CI time-out.
set -uo pipefail
limit=${FANOUT_TEST_TIME_LIMIT:-1800}

swift test --skip-build "$@" &
runner=$!
deadline=$((SECONDS + limit))
while kill -0 "$runner" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
        echo "the tests still run after ${limit} s; every thread of each test process:" >&2
        for pid in $(pgrep -f 'fanoutPackageTests\.xctest'); do
            gdb -batch -q -p "$pid" -ex 'call (int) fflush(0)' -ex 'thread apply all bt' >&2 2>&1 || true
        done
        pkill -KILL -f 'fanoutPackageTests\.xctest'
        kill -TERM "$runner" 2>/dev/null
        wait "$runner"
        exit 124
    fi
    sleep 2
done
wait "$runner"
