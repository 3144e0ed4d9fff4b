#!/bin/bash
# Counts what fanoutd does per registration over a fixed import: `perf stat -p` of fanoutd for the
# length of `fanout register --file` of N generated registrations (REGISTER_BATCH, 1000 per
# request), each event divided by N. Steadier than a phase's window: the work is the same every run.
#
# Usage: scripts/import-count.sh EVENTS [N]
#   e.g. scripts/import-count.sh probe_libswiftCore:swift_retain,probe_libswiftCore:swift_release 200000
#        FANOUTD=/tmp/fanoutd-old scripts/import-count.sh task-clock
#
# Starts a fanoutd (FANOUTD, default the release build) on a fresh directory as
# `scripts/profile-phase.sh` does (`scripts/phase-server.sh`). The registrations: 163-byte tokens
# made from a fixed seed, one Android app id. The uprobes need `perf probe -x
# /opt/swift/usr/lib/swift/linux/libswiftCore.so swift_retain` (and `swift_release`) once; they
# count every call, nil references included, and slow each, so read their counts, not the time.
# `task-clock` is in milliseconds (0.00438 per registration: 4.38 µs).
# Needs `swift build -c release` of fanoutd and fanout, linux-perf and python3.
set -euo pipefail

events=$1
count=${2:-200000}
directory=$(mktemp -d /tmp/import-count.XXXXXX)
source "$(dirname "$0")/phase-server.sh"

server=
trap 'kill $server 2>/dev/null || true; rm -rf "$directory"' EXIT
python3 - "$count" > "$directory/registrations.jsonl" <<'PYTHON'
import random, string, sys
generator = random.Random(1)
alphabet = string.ascii_letters + string.digits + '-_:'
for _ in range(int(sys.argv[1])):
    token = ''.join(generator.choice(alphabet) for _ in range(163))
    print('{"token":"%s","platform":"android","appId":"1:1234567890:android:0a1b2c3d4e5f"}' % token)
PYTHON
start_fanoutd "${FANOUTD:-$release/fanoutd}" "$directory"
perf stat -x, -o "$directory/stat.txt" -e "$events" -p $server -- \
    "$release/fanout" register --server 127.0.0.1:7601 --api-key "$(cat "$directory/admin-key")" \
    --file "$directory/registrations.jsonl" > "$directory/import.txt" 2>&1 || true
tail -1 "$directory/import.txt"
awk -F, -v n="$count" '!/^#/ && NF > 2 {printf "%s per registration: %.5f\n", $3, $1 / n}' "$directory/stat.txt"
