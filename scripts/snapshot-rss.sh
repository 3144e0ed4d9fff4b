#!/bin/bash
# fanoutd's RSS while it writes a snapshot of a data directory it recovered.
#
# Usage: scripts/snapshot-rss.sh DIRECTORY [BIN]
#   DIRECTORY: a data directory (left untouched: a fresh copy is recovered), e.g. the 1M x 20 log
#   the recovery benchmark writes, kept with FANOUT_RECOVERY_KEEP_DIRECTORY (see recovery-ab.sh).
#   BIN: where the release fanoutd and fanout are (default: this checkout's .build/release).
# Starts fanoutd on the copy (127.0.0.1:7611, no timed snapshots), waits until it answers, asks it
# for a snapshot (`fanout snapshot --server`), and prints its RSS after recovery, the highest RSS
# seen while the snapshot was written (sampled from /proc every 10 ms), and its RSS afterwards.
set -euo pipefail
directory=$1
bin=${2:-$(cd "$(dirname "$0")/.." && pwd)/.build/release}
copy=$(mktemp -d /tmp/snapshot-rss.XXXXXX)
cp -r "$directory" "$copy/data"
"$bin/fanoutd" --data-dir "$copy/data" --listen 127.0.0.1:7611 --log-level warning --snapshot-every 0 > "$copy/fanoutd.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true; rm -rf "$copy"' EXIT
until [ -s "$copy/data/admin-key" ] && "$bin/fanout" stats --server 127.0.0.1:7611 --api-key "$(cat "$copy/data/admin-key")" > /dev/null 2>&1; do
    kill -0 $server 2> /dev/null || { cat "$copy/fanoutd.log"; exit 1; }
    sleep 0.2
done
# fanoutd may start again as a child of itself (its allocator policy): measure the last process.
process=$server
for child in $(pgrep -P $server || true); do process=$child; done
rss() { awk '/VmRSS/ { print $2 }' "/proc/$process/status"; }
echo "RSS after recovery: $(rss) kB"
echo 0 > "$copy/peak"
( peak=0; while kill -0 $process 2> /dev/null; do
    now=$(awk '/VmRSS/ { print $2 }' "/proc/$process/status" 2> /dev/null || echo 0)
    if [ -n "$now" ] && [ "$now" -gt "$peak" ]; then peak=$now; echo $peak > "$copy/peak"; fi
    sleep 0.01
done ) &
sampler=$!
"$bin/fanout" snapshot --server 127.0.0.1:7611 --api-key "$(cat "$copy/data/admin-key")"
sleep 0.5
echo "peak RSS while writing: $(cat "$copy/peak") kB"
echo "RSS afterwards: $(rss) kB"
kill $sampler 2> /dev/null || true
