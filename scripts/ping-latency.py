#!/usr/bin/env python3
"""Round trips one at a time from a plain blocking client, the same loop against fanoutd (HELLO,
then PING frames, docs/wire-protocol.md) and Redis (PING): what each server adds to a round trip
without either side's Swift client in the way (issue 18; docs/performance.md). With `--read`, a
read instead: GET_INSTALLATION of one installation by its 163-byte token (registered first, in
project `default`) against HGET of the same token in a hash (set first), as fanout-load's
`latency read` does. Pin both processes and this one to one CPU (`taskset`) to compare the
servers' own work: unpinned, where the VM puts the threads decides.

    python3 scripts/ping-latency.py --fanout 127.0.0.1:7400 --key-file fanout-data/admin-key \
        --redis 127.0.0.1:6379 [--count 20000] [--rounds 3] [--read]
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


TOKEN = "d" + "A" * 21 + ":APA91b" + "x" * 134  # 163 bytes, shaped as FCM's
FID = "d" + "A" * 21


def wire_string(text):
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def frame(connection):
    """One frame: its opcode and payload."""
    header = receive(connection, 12)
    return header[1], receive(connection, struct.unpack(">I", header[8:12])[0])


def fanout(address, key, count, read):
    connection = connect(address)
    key, name = key.encode(), b"ping-latency"
    hello = struct.pack(">BBI", 1, 1, len(key)) + key + struct.pack(">H", len(name)) + name
    connection.sendall(struct.pack(">BBHII", 2, 0x01, 0, 1, len(hello)) + hello)
    if frame(connection)[0] != 0x81:
        raise SystemExit("HELLO was refused")
    opcode, payload = 0x02, b""
    if read:
        # REGISTER (0x20) a web installation with the offered FID and token, then GET_INSTALLATION (0x23).
        register = wire_string("default") + b"\x01" + wire_string(FID) + b"\x01" + wire_string(TOKEN) + bytes([3])
        register += wire_string("1:1:web:ping-latency") + b"\x00" * 4
        connection.sendall(struct.pack(">BBHII", 2, 0x20, 0, 2, len(register)) + register)
        if frame(connection)[0] != 0xA0:
            raise SystemExit("REGISTER was refused")
        opcode, payload = 0x23, wire_string("default") + wire_string(TOKEN)
    request = struct.pack(">BBHII", 2, opcode, 0, 3, len(payload)) + payload
    times = []
    for _ in range(count):
        start = time.perf_counter_ns()
        connection.sendall(request)
        reply, _ = frame(connection)
        times.append(time.perf_counter_ns() - start)
        if reply != opcode | 0x80:
            raise SystemExit("request 0x%02x was answered with opcode 0x%02x" % (opcode, reply))
    connection.close()
    return times


def resp(*arguments):
    encoded = [argument.encode() for argument in arguments]
    return b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in encoded)


def redis(address, count, read):
    connection = connect(address)
    request, reply = resp("PING"), b"+PONG\r\n"
    if read:
        connection.sendall(resp("HSET", "ping-latency", TOKEN, FID))
        if receive(connection, 4) not in (b":1\r\n", b":0\r\n"):  # a new field, or one already set
            raise SystemExit("Redis refused HSET")
        request, reply = resp("HGET", "ping-latency", TOKEN), b"$%d\r\n%s\r\n" % (len(FID), FID.encode())
    times = []
    for _ in range(count):
        start = time.perf_counter_ns()
        connection.sendall(request)
        if receive(connection, len(reply)) != reply:
            raise SystemExit("Redis did not answer as expected")
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
    parser.add_argument("--read", action="store_true", help="GET_INSTALLATION against HGET instead of PING")
    arguments = parser.parse_args()
    key = open(arguments.key_file).read().strip()
    for round in range(arguments.rounds):
        print("round %d: fanoutd %s; redis %s" % (round, summary(fanout(arguments.fanout, key, arguments.count, arguments.read)), summary(redis(arguments.redis, arguments.count, arguments.read))))


if __name__ == "__main__":
    main()
