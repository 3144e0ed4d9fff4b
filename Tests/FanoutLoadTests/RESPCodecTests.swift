import FanoutLoad
import FanoutTestSupport
import NIOCore
import NIOEmbedded
import NIOTestUtils
import Testing

/// The RESP decoder against the encoder as a reference: random values (nested arrays, empty and
/// null values, binary bulk strings, large arrays) come back equal however the bytes are split;
/// malformed input is an error, never a crash or a wrong value.
@Suite("RESP codec")
struct RESPCodecTests {
    static func randomValue(_ random: inout SeededRandomNumberGenerator, depth: Int = 0) -> RESPValue {
        switch random.next() % (depth < 3 ? 8 : 6) {
        case 0: return .simpleString(String(decoding: (0..<Int(random.next() % 12)).map { _ in UInt8(97 + random.next() % 26) }, as: UTF8.self))
        case 1: return .error("ERR " + String(random.next() % 1000))
        case 2: return .integer(Int64(bitPattern: random.next()))
        case 3: return .bulkString(random.bytes(Int(random.next() % 40)))
        case 4: return .bulkString(nil)
        case 5: return .bulkString(Array("with\r\nCRLF inside".utf8))
        case 6: return .array(nil)
        default: return .array((0..<Int(random.next() % 6)).map { _ in Self.randomValue(&random, depth: depth + 1) })
        }
    }

    static func encoded(_ value: RESPValue) -> ByteBuffer {
        var buffer = ByteBuffer()
        value.write(into: &buffer)
        return buffer
    }

    @Test func randomValuesRoundTripHoweverTheBytesAreSplit() throws {
        var random = SeededRandomNumberGenerator(seed: 11)
        let values = (0..<200).map { _ in Self.randomValue(&random) }
        let pairs = values.map { (Self.encoded($0), [$0]) }
        // Drip-fed byte by byte, many per buffer, and in shuffled order.
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) { RESPDecoder() }
    }

    @Test func aLargeArrayArrivingInPiecesIsDecodedOnce() throws {
        let members = (0..<50_000).map { RESPValue.bulkString(Array("member-\($0)".utf8)) }
        let value = RESPValue.array(members)
        var bytes = Self.encoded(value)
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(RESPDecoder()))
        while bytes.readableBytes > 0 {
            let slice = bytes.readSlice(length: min(4096, bytes.readableBytes))!
            try channel.writeInbound(slice)
        }
        #expect(try channel.readInbound(as: RESPValue.self) == value)
        #expect(try channel.readInbound(as: RESPValue.self) == nil)
        #expect(try channel.finish().isClean)
    }

    @Test(arguments: [
        ("?oops\r\n", "an unknown type byte"),
        (":12x\r\n", "not a number"),
        ("$-2\r\n", "bulk string length out of range"),
        ("$999999999999\r\n", "bulk string length out of range"),
        ("$3\r\nabcXY", "not followed by CRLF"),
        ("*-5\r\n", "array length out of range"),
        ("+OK\rX", "CR not followed by LF"),
        (String(repeating: "*1\r\n", count: 40) + ":1\r\n", "nested deeper"),
    ])
    func malformedInputIsAnError(input: String, expected: String) throws {
        try Self.expectError(input, expected)
    }

    /// A line that never ends is refused once it passes the limit, not buffered forever.
    /// A command written straight into the buffer is the array of bulk strings it stands for.
    @Test func aCommandIsAnArrayOfBulkStrings() {
        for arguments in [["PING"], ["HSET", "tokens", "tök:APA91b", ""], ["SADD", "topic:7"] + (0..<300).map { "member-\($0)" }] {
            var written = ByteBuffer()
            RESPValue.writeCommand(arguments, into: &written)
            var expected = ByteBuffer()
            RESPValue.array(arguments.map { .bulkString(Array($0.utf8)) }).write(into: &expected)
            #expect(written == expected)
        }
    }

    @Test func anEndlessLineIsAnError() throws {
        try Self.expectError("+" + String(repeating: "x", count: 70_000), "longer than")
    }

    static func expectError(_ input: String, _ expected: String) throws {
        var decoder = RESPDecoder()
        var buffer = ByteBuffer(string: input)
        do {
            var decoded: [RESPValue] = []
            while let value = try decoder.decode(buffer: &buffer) {
                decoded.append(value)
            }
            Issue.record("decoded \(decoded) from malformed input")
        } catch let error as RESPError {
            #expect(error.description.contains(expected), "\(error)")
        }
    }

    @Test func incompleteInputWaitsForMore() throws {
        for input in ["", "+OK", "+OK\r", "$5\r\nabc", "*2\r\n:1\r\n", "*2\r\n*1\r\n"] {
            var decoder = RESPDecoder()
            var buffer = ByteBuffer(string: input)
            #expect(try decoder.decode(buffer: &buffer) == nil, "\(input.debugDescription)")
        }
    }
}
