#!/bin/sh
# `make cluster`: a fanout cluster on loopback (docs/scale-out.md), in the foreground until Ctrl-C:
# three nats-servers forming one JetStream cluster (clients on 4222-4224, routes on 6222-6224) and
# three fanoutd nodes (node-1..node-3 on 127.0.0.1:7411-7413, their HTTP fronts on 7421-7423, 16
# shards, each stream and bucket with 3 replicas), their data and logs under ./fanout-cluster, one admin key for all three.
# Ctrl-C (or SIGTERM) stops the nodes gracefully, then the NATS servers. Started again, it goes on
# with the same data.
set -eu
dir=${FANOUT_CLUSTER_DIR:-./fanout-cluster}
bin=${FANOUT_BIN:-.build/release}
mkdir -p "$dir"
urls=nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224
routes=nats://127.0.0.1:6222,nats://127.0.0.1:6223,nats://127.0.0.1:6224

if [ ! -s "$dir/admin-key" ]; then
    rm -f "$dir/api-keys"
    (umask 077 && "$bin/fanout" key create --file "$dir/api-keys" --name admin --role admin > "$dir/admin-key")
fi

nats_pids=""
node_pids=""
stop() {
    trap - INT TERM EXIT
    [ -n "$node_pids" ] && kill -TERM $node_pids 2>/dev/null && wait $node_pids 2>/dev/null
    [ -n "$nats_pids" ] && kill -TERM $nats_pids 2>/dev/null && wait $nats_pids 2>/dev/null
    exit 0
}
trap stop INT TERM EXIT

for i in 1 2 3; do
    nats-server -js -sd "$dir/nats-$i" -n "nats-$i" -a 127.0.0.1 -p $((4221 + i)) \
        --cluster_name fanout --cluster "nats://127.0.0.1:$((6221 + i))" --routes "$routes" \
        > "$dir/nats-$i.log" 2>&1 &
    nats_pids="$nats_pids $!"
done

# fanoutd retries nothing at start: wait until the JetStream cluster has a leader (a stream can be
# added), at most 30 s.
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do
    if "$bin/fanout" cluster status --cluster "$urls" >/dev/null 2>&1 || grep -q "JetStream cluster new metadata leader" "$dir"/nats-*.log; then
        break
    fi
    sleep 1
done

for i in 1 2 3; do
    rm -f "$dir/node-$i.ready"
    "$bin/fanoutd" --cluster "$urls" --node "node-$i" --shards 16 --replicas 3 \
        --data-dir "$dir/node-$i" --api-keys "$dir/api-keys" --listen "127.0.0.1:$((7410 + i))" \
        --http "127.0.0.1:$((7420 + i))" --ready-file "$dir/node-$i.ready" > "$dir/node-$i.log" 2>&1 &
    node_pids="$node_pids $!"
done
for i in 1 2 3; do
    for attempt in $(seq 1 60); do
        [ -s "$dir/node-$i.ready" ] && break
        sleep 0.5
    done
    [ -s "$dir/node-$i.ready" ] || { echo "node-$i did not start: see $dir/node-$i.log" >&2; exit 1; }
done
# The nodes take their shards once they have seen each other for a lease: until then a request
# for a shard without an owner waits, then answers UNAVAILABLE.
for attempt in $(seq 1 60); do
    "$bin/fanout" cluster status --cluster "$urls" 2>/dev/null | grep -q "every shard is on the node placed for it" && break
    sleep 0.5
done

cat <<USAGE
A fanout cluster runs: nodes on 127.0.0.1:7411, :7412 and :7413, their HTTP fronts (FCM's send and
topic management) on :7421, :7422 and :7423 (logs in $dir/node-N.log).
  export FANOUT_SERVER=127.0.0.1:7411 FANOUT_API_KEY=\$(cat $dir/admin-key)
  $bin/fanout register --token some-token --platform android --app-id 1:1:android:a
  $bin/fanout cluster status --cluster $urls
Ctrl-C stops it.
USAGE
wait $node_pids
