#!/usr/bin/env python3
"""Round trips one at a time from a plain blocking client, the same loop against fanoutd (HELLO,
then PING frames, docs/wire-protocol.md) and Redis (PING): what each server adds to a round trip
without either side's Swift client in the way (issue 18; docs/performance.md). With `--read`, a
read instead: GET_INSTALLATION of one installation by its 163-byte token (registered first, in
project `default`) against HGET of the same token in a hash (set first), as fanout-load's
`latency read` does.

Every server named gets its turn in blocks of `--block` round trips, one server after the other,
so that all are measured in the same minutes (this VM's speed moves about 2x between phases).
`--fanout` may be given more than once (two builds side by side), and `--floor` names a
`fanout-load floor` server: bare SwiftNIO answering every frame with an empty one, the least a
SwiftNIO server can spend on a round trip. A server given as HOST:PORT@PID also reports its CPU
time per round trip (from /proc/PID/task/*/schedstat, all of its threads, around each block).
Pin the servers and this script to one CPU (`taskset -c 0`) to compare the servers' own work:
unpinned, where the VM puts the threads decides.

    taskset -c 0 python3 scripts/ping-latency.py --key-file fanout-data/admin-key \
        --fanout 127.0.0.1:7400@PID --redis 127.0.0.1:6379@PID [--floor 127.0.0.1:7498@PID] \
        [--count 20000] [--block 1000] [--read]
"""
import argparse
import glob
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


def fanout(address, key, read):
    """A connection to fanoutd (or the floor) and its round trip: a function doing one."""
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

    def round_trip():
        connection.sendall(request)
        reply, _ = frame(connection)
        if reply != opcode | 0x80:
            raise SystemExit("request 0x%02x was answered with opcode 0x%02x" % (opcode, reply))

    return round_trip


def resp(*arguments):
    encoded = [argument.encode() for argument in arguments]
    return b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in encoded)


def redis(address, key, read):
    connection = connect(address)
    request, reply = resp("PING"), b"+PONG\r\n"
    if read:
        connection.sendall(resp("HSET", "ping-latency", TOKEN, FID))
        if receive(connection, 4) not in (b":1\r\n", b":0\r\n"):  # a new field, or one already set
            raise SystemExit("Redis refused HSET")
        request, reply = resp("HGET", "ping-latency", TOKEN), b"$%d\r\n%s\r\n" % (len(FID), FID.encode())

    def round_trip():
        connection.sendall(request)
        if receive(connection, len(reply)) != reply:
            raise SystemExit("Redis did not answer as expected")

    return round_trip


def cpu_nanoseconds(pid):
    """The CPU time all of a process's threads have run, in nanoseconds."""
    total = 0
    for path in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(path) as file:
                total += int(file.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total


class Server:
    def __init__(self, name, spec, connect_to, key, read):
        address, _, pid = spec.partition("@")
        self.name, self.pid = "%s %s" % (name, address), int(pid) if pid else None
        self.round_trip = connect_to(address, key, read)
        self.times, self.cpu = [], 0

    def block(self, count):
        before = cpu_nanoseconds(self.pid) if self.pid else 0
        for _ in range(count):
            start = time.perf_counter_ns()
            self.round_trip()
            self.times.append(time.perf_counter_ns() - start)
        if self.pid:
            self.cpu += cpu_nanoseconds(self.pid) - before

    def summary(self):
        ordered = sorted(self.times)
        line = "%-24s p50 %6.1f us, p99 %6.1f us" % (self.name, statistics.median(ordered) / 1000, ordered[int(len(ordered) * 0.99)] / 1000)
        if self.pid:
            line += ", CPU %5.1f us per round trip" % (self.cpu / len(self.times) / 1000)
        return line


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fanout", action="append", default=[], help="fanoutd's HOST:PORT[@PID] (repeatable)")
    parser.add_argument("--key-file", required=True, help="a file holding an admin API key (the same for every fanoutd)")
    parser.add_argument("--redis", help="redis-server's HOST:PORT[@PID]")
    parser.add_argument("--floor", help="a `fanout-load floor` server's HOST:PORT[@PID]")
    parser.add_argument("--count", type=int, default=20000, help="round trips per server")
    parser.add_argument("--block", type=int, default=1000, help="round trips per turn")
    parser.add_argument("--rounds", type=int, default=1, help="times the whole measure is repeated (each printed)")
    parser.add_argument("--read", action="store_true", help="GET_INSTALLATION against HGET instead of PING (the floor answers it as a PING)")
    arguments = parser.parse_args()
    key = open(arguments.key_file).read().strip()
    for round in range(arguments.rounds):
        servers = [Server("fanoutd", spec, fanout, key, arguments.read) for spec in arguments.fanout]
        if arguments.redis:
            servers.append(Server("redis", arguments.redis, redis, key, arguments.read))
        if arguments.floor:
            servers.append(Server("floor", arguments.floor, fanout, key, False))
        for server in servers:
            server.block(100)  # warm up, not counted
            server.times, server.cpu = [], 0
        done = 0
        while done < arguments.count:
            block = min(arguments.block, arguments.count - done)
            for server in servers:
                server.block(block)
            done += block
        print("round %d:" % round)
        for server in servers:
            print("  " + server.summary())


if __name__ == "__main__":
    main()
