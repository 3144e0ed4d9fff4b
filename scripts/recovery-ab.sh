#!/bin/bash
# Times recovery of one data directory with two builds of `fanout`, alternating A B / B A.
#
# Usage: scripts/recovery-ab.sh DIRECTORY ROUNDS FANOUT_A FANOUT_B
#   DIRECTORY: a data directory to recover (left untouched: each run recovers a fresh copy), e.g.
#   the 1M x 20 log the recovery benchmark writes, kept with
#   FANOUT_RECOVERY_KEEP_DIRECTORY=/tmp/recovery .build/release/DurabilityBenchmarks --filter "Durability.recovery.*"
#   (in Benchmarks/). `fanout snapshot COPY` recovers the copy, then writes a snapshot; the time
#   printed is recovery's (`recovered N log records in T`), or with MEASURE=after, what the command
#   takes after that: writing the snapshot, syncing it, removing what it replaces, and exiting.
# Prints one line per run (round, A or B, seconds) and each side's mean and median. This VM's
# speed drifts by 20% and more between minutes: compare within rounds, over ten or more.
set -euo pipefail
directory=$1
rounds=$2
declare -A binary=([A]=$3 [B]=$4)
copy=$(mktemp -d /tmp/recovery-ab.XXXXXX)
trap 'rm -rf "$copy"' EXIT
results=()
for round in $(seq 1 "$rounds"); do
    order="A B"
    if [ $((round % 2)) -eq 0 ]; then order="B A"; fi
    for side in $order; do
        rm -rf "$copy/data"
        cp -r "$directory" "$copy/data"
        sync
        started=$(date +%s.%N)
        seconds=$("${binary[$side]}" snapshot "$copy/data" | sed -n 's/^recovered .* in \([0-9.]*\) seconds$/\1/p')
        if [ "${MEASURE:-recovery}" = after ]; then
            seconds=$(awk -v started="$started" -v ended="$(date +%s.%N)" -v recovery="$seconds" 'BEGIN { printf "%.3f", ended - started - recovery }')
        fi
        echo "$round $side $seconds"
        results+=("$side $seconds")
    done
done
for side in A B; do
    printf '%s\n' "${results[@]}" | awk -v side="$side" '$1 == side { print $2 }' | sort -n | awk -v side="$side" '
        { v[NR] = $1; sum += $1 }
        END { printf "%s: mean %.3f s, median %.3f s over %d\n", side, sum / NR, (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2, NR }'
done
