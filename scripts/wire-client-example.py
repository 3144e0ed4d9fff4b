#!/usr/bin/env python3
"""A fanoutd client written from docs/wire-protocol.md alone, with nothing but the standard library.

Usage: wire-client-example.py HOST PORT API_KEY TOKEN

It says HELLO, registers a web installation with TOKEN, subscribes it to a topic, attaches as a web
worker, sends a data message to the topic, receives the delivery, acknowledges it, and prints one
JSON line with what it saw. The tests run it against fanoutd, to show the document is enough.
"""
import json
import socket
import struct
import sys

VERSION = 2
HELLO, SUBSCRIBE, REGISTER, SEND, ATTACH, ACK = 0x01, 0x40, 0x20, 0x50, 0x60, 0x62
DELIVERY, ERROR = 0xF0, 0xFF


def string(text):
    data = text.encode("utf-8")
    return struct.pack(">H", len(data)) + data


def optional_string(text):
    return b"\x00" if text is None else b"\x01" + string(text)


class Reader:
    def __init__(self, payload):
        self.payload, self.offset = payload, 0

    def take(self, count):
        data = self.payload[self.offset:self.offset + count]
        if len(data) != count:
            raise ValueError("payload too short")
        self.offset += count
        return data

    def u8(self): return self.take(1)[0]
    def u16(self): return struct.unpack(">H", self.take(2))[0]
    def u32(self): return struct.unpack(">I", self.take(4))[0]
    def u64(self): return struct.unpack(">Q", self.take(8))[0]
    def i64(self): return struct.unpack(">q", self.take(8))[0]
    def string(self): return self.take(self.u16()).decode("utf-8")
    def bytes(self): return self.take(self.u32())
    def optional_string(self): return self.string() if self.u8() == 1 else None

    def installation(self):
        slot, generation, fid = self.u32(), self.u32(), self.string()
        token, platform, app_id = self.optional_string(), self.u8(), self.string()
        for _ in range(5):  # device name, OS, type; APNs token; user
            self.optional_string()
        self.i64(), self.i64()  # created at, last seen
        return {"slot": slot, "fid": fid, "token": token, "platform": platform}


class Connection:
    def __init__(self, host, port):
        self.socket = socket.create_connection((host, port))
        self.next_id = 1
        self.deliveries = []  # DELIVERY frames that arrived while waiting for a reply

    def send(self, opcode, payload):
        request_id = self.next_id
        self.next_id += 1
        self.socket.sendall(struct.pack(">BBHII", VERSION, opcode, 0, request_id, len(payload)) + payload)
        return request_id

    def exactly(self, count):
        data = b""
        while len(data) < count:
            chunk = self.socket.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            data += chunk
        return data

    def frame(self):
        version, opcode, flags, request_id, length = struct.unpack(">BBHII", self.exactly(12))
        assert version == VERSION and flags == 0
        return opcode, request_id, Reader(self.exactly(length))

    def call(self, opcode, payload):
        """Sends a request and returns the reader of its reply (no pipelining here)."""
        request_id = self.send(opcode, payload)
        reply, reply_id, reader = self.frame()
        while reply == DELIVERY:  # pushed, not a reply: keep it for later
            self.deliveries.append(reader)
            reply, reply_id, reader = self.frame()
        assert reply_id == request_id
        if reply == ERROR:
            status, message = reader.u8(), reader.string()
            raise RuntimeError(f"status {status}: {message}")
        assert reply == opcode | 0x80, hex(reply)
        return reader


def main():
    host, port, key, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    connection = Connection(host, port)
    key_bytes = key.encode()
    welcome = connection.call(HELLO, bytes([1, 1]) + struct.pack(">I", len(key_bytes)) + key_bytes + string("python"))
    version, max_frame = welcome.u16(), welcome.u32()

    register = bytes()
    register += string("default") + optional_string(None) + optional_string(token) + bytes([3])
    register += string("1:1:web:python") + optional_string(None) * 4
    reply = connection.call(REGISTER, register)
    flags = reply.u8()  # bit 0: the server assigned the FID; bit 1: an existing, identical registration
    assigned, installation = flags & 1 == 1, reply.installation()

    subscribe = string("default") + string("python-news") + struct.pack(">I", 1) + string(token)
    statuses = list(connection.call(SUBSCRIBE, subscribe).take(4 + 1)[4:])

    connection.call(ATTACH, string("default") + bytes([1, 3]) + struct.pack(">I", 10))

    body = json.dumps({"message": {"topic": "python-news", "data": {"from-python": "yes"}}}).encode()
    sent = connection.call(SEND, string("default") + bytes([0]) + struct.pack(">I", len(body)) + body)  # flags 0
    message_id, sequence, audience, enqueued = sent.string(), sent.u64(), sent.u32(), sent.u32()

    # The reply to SEND and the delivery may come in either order; the delivery carries ATTACH's id.
    if connection.deliveries:
        delivery = connection.deliveries.pop(0)
    else:
        opcode, _, delivery = connection.frame()
        assert opcode == DELIVERY, hex(opcode)
    delivered_sequence, delivered_slot, fid = delivery.u64(), delivery.u32(), delivery.string()
    delivered_token, apns_token = delivery.optional_string(), delivery.optional_string()
    delivery.u8(), delivery.i64(), delivery.u8(), delivery.u8()  # platform, expiry, in flight, marker
    headers = {delivery.string(): delivery.string() for _ in range(delivery.u32())}
    payload = json.loads(delivery.bytes())

    acknowledged = connection.call(ACK, struct.pack(">I", 1) + struct.pack(">QI", delivered_sequence, delivered_slot)).u64()
    print(json.dumps({
        "version": version, "maxFrame": max_frame, "fidAssigned": assigned, "fid": installation["fid"],
        "subscribe": statuses, "messageId": message_id, "audience": audience, "enqueued": enqueued,
        "deliveredFid": fid, "deliveredSequence": delivered_sequence, "deliveredToken": delivered_token, "headers": headers,
        "payload": payload, "acknowledged": acknowledged,
    }, sort_keys=True))


if __name__ == "__main__":
    main()
