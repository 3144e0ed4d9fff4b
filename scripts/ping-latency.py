#!/usr/bin/env python3
"""Round trips one at a time from a plain blocking client, the same loop against fanoutd (HELLO,
then PING frames, docs/wire-protocol.md) and Redis (PING): what each server adds to a round trip
without either side's Swift client in the way (issue 18; docs/performance.md).

    python3 scripts/ping-latency.py --fanout 127.0.0.1:7400 --key-file fanout-data/admin-key \
        --redis 127.0.0.1:6379 [--count 20000] [--rounds 3]
"""
import argparse
import socket
import statistics
import struct
import time


def receive(connection, count):
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            raise EOFError("the server closed the connection")
        data += chunk
    return data


def connect(address):
    host, port = address.rsplit(":", 1)
    connection = socket.create_connection((host, int(port)))
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def fanout(address, key, count):
    connection = connect(address)
    key, name = key.encode(), b"ping-latency"
    hello = struct.pack(">BBI", 1, 1, len(key)) + key + struct.pack(">H", len(name)) + name
    connection.sendall(struct.pack(">BBHII", 2, 0x01, 0, 1, len(hello)) + hello)
    header = receive(connection, 12)
    receive(connection, struct.unpack(">I", header[8:12])[0])
    if header[1] != 0x81:
        raise SystemExit("HELLO was refused (opcode 0x%02x)" % header[1])
    ping = struct.pack(">BBHII", 2, 0x02, 0, 2, 0)
    times = []
    for _ in range(count):
        start = time.perf_counter_ns()
        connection.sendall(ping)
        header = receive(connection, 12)
        times.append(time.perf_counter_ns() - start)
        if header[1] != 0x82:
            raise SystemExit("PING was answered with opcode 0x%02x" % header[1])
    connection.close()
    return times


def redis(address, count):
    connection = connect(address)
    times = []
    for _ in range(count):
        start = time.perf_counter_ns()
        connection.sendall(b"*1\r\n$4\r\nPING\r\n")
        if receive(connection, 7) != b"+PONG\r\n":
            raise SystemExit("Redis did not answer +PONG")
        times.append(time.perf_counter_ns() - start)
    connection.close()
    return times


def summary(times):
    ordered = sorted(times)
    return "p50 %.1f us, p99 %.1f us" % (statistics.median(ordered) / 1000, ordered[int(len(ordered) * 0.99)] / 1000)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fanout", required=True, help="fanoutd's HOST:PORT")
    parser.add_argument("--key-file", required=True, help="a file holding an admin API key")
    parser.add_argument("--redis", required=True, help="redis-server's HOST:PORT")
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    key = open(arguments.key_file).read().strip()
    for round in range(arguments.rounds):
        print("round %d: fanoutd %s; redis %s" % (round, summary(fanout(arguments.fanout, key, arguments.count)), summary(redis(arguments.redis, arguments.count))))


if __name__ == "__main__":
    main()
