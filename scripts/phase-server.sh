# Sourced by scripts/profile-phase.sh and scripts/stat-phase.sh: a fanoutd started as
# `fanout-load run` starts it, a load run against it, and the wait for a phase's first request.

release=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.build/release

# Starts the fanoutd binary $1 on the fresh directory $2 (`start_fanoutd`), runs
# `fanout-load run $3` against it in the background (the arguments after $4 are its options; its
# report goes to $2/report.txt), and returns once /metrics counts a request of operation $4
# (`wait_for_operation`). Sets `server`, `consumer_key` and `load`.
start_phase() {
    local fanoutd=$1 directory=$2 scenario=$3 operation=$4
    shift 4
    start_fanoutd "$fanoutd" "$directory"
    "$release/fanout-load" run "$scenario" --quiet --server 127.0.0.1:7601 --api-key "$(cat "$directory/admin-key")" \
        --consumer-key "$consumer_key" --server-pid $server "$@" > "$directory/report.txt" 2>&1 &
    load=$!
    wait_for_operation "$operation" $load "$directory/report.txt"
}

# Starts the fanoutd binary $1 on the fresh directory $2 (durability `always`, no snapshots, quotas
# off) listening on 127.0.0.1:7601, its HTTP front on 127.0.0.1:7602, with a consumer key added
# (the `fanout` CLI next to this script's release build). Sets `server` (its pid) and
# `consumer_key`; the caller kills the server when done.
start_fanoutd() {
    "$1" --data-dir "$2" --listen 127.0.0.1:7601 --http 127.0.0.1:7602 --durability always \
        --log-level warning --snapshot-every 0 --project-messages-per-minute 0 --device-messages-per-minute 0 \
        --device-messages-per-hour 0 > "$2/fanoutd.log" 2>&1 &
    server=$!
    until [ -s "$2/admin-key" ] && curl -sf http://127.0.0.1:7602/healthz > /dev/null; do sleep 0.1; done
    consumer_key=$("$release/fanout" key create --file "$2/api-keys" --name phase --role consumer 2>/dev/null | tail -1)
    kill -HUP $server
    sleep 0.5
}

# Waits until fanoutd's /metrics counts a request of operation $1 (its name as
# `fanout_requests_total` gives it: REGISTER, SUBSCRIBE, ACK, ...); if the load run $2 ends first,
# prints its report $3 and exits. The page is read whole before it is searched: `grep -q`
# stopping early would fail `curl` and, under pipefail, the test.
wait_for_operation() {
    until [[ "$(curl -s http://127.0.0.1:7602/metrics)" == *"fanout_requests_total{listener=\"tcp\",operation=\"$1\""* ]]; do
        kill -0 "$2" 2> /dev/null || { cat "$3"; echo "no $1 request came" >&2; exit 1; }
        sleep 0.02
    done
}
