import FanoutCore
import FanoutWire
import Foundation
import NIOCore
import Testing

/// The worked examples of docs/wire-protocol.md section 9, byte for byte. The `.hex` fixtures
/// are written by this test when FANOUT_WRITE_FIXTURES=1 (then checked in); otherwise the encoder
/// must produce them exactly and the decoder must read them back.
@Suite("Wire golden frames")
struct GoldenFrameTests {
    static let fid = FID("cAECAwQFBgcICQoLDA0ODx")!

    enum Example {
        case client(ClientFrame)
        case server(ServerFrame)
    }

    static let examples: [(name: String, frame: Example)] = [
        ("hello", .client(ClientFrame(requestID: 1, request: .hello(Hello(role: .admin, credential: .apiKey(Array("fk_0123456789abcdef".utf8)), clientName: "cli"))))),
        ("welcome", .server(ServerFrame(requestID: 1, message: .welcome(Welcome(
            maximumPayloadSize: 2_097_152, idleTimeoutMilliseconds: 60_000, maximumCredit: 65_536, maximumInFlight: 1024, projects: ["*"]
        ))))),
        ("subscribe", .client(ClientFrame(requestID: 2, request: .subscribe(project: "default", topic: "news", registrations: ["cAECAwQFBgcICQoLDA0ODx", "token-1"])))),
        ("subscribe-reply", .server(ServerFrame(requestID: 2, message: .itemResults(.subscribe, [.ok, .failed(.notFound)])))),
        ("send", .client(ClientFrame(requestID: 3, request: .send(project: "default", body: Array(#"{"message":{"topic":"news","data":{"k":"v"}}}"#.utf8))))),
        ("send-reply", .server(ServerFrame(requestID: 3, message: .sent(SendReceipt(
            messageID: "projects/default/messages/1", sequence: 1, audience: 1, enqueued: 1, recipients: [], platforms: sendReport
        ))))),
        ("delivery", .server(ServerFrame(requestID: 5, message: .delivery(WireDelivery(
            id: DeliveryID(messageSequence: 1, slot: 0), fid: fid, token: RegistrationToken("token-1"),
            apnsToken: APNsDeviceToken("00112233445566778899aabbccddeeff"), platform: .ios,
            expiry: Timestamp(millisecondsSinceEpoch: 1_767_225_600_000), isInFlight: false, isDeletedMessagesMarker: false,
            headers: [
                DeliveryHeader(name: "apns-priority", value: "5"), DeliveryHeader(name: "apns-push-type", value: "background"),
                DeliveryHeader(name: "apns-expiration", value: "1767225600"),
            ],
            payload: Array(#"{"aps":{"content-available":1},"k":"v"}"#.utf8)
        ))))),
        ("deliveries", .server(ServerFrame(requestID: 6, message: .deliveries(["cAECAwQFBgcICQoLDA0ODx", "dAECAwQFBgcICQoLDA0ODx"].enumerated().map { slot, fid in
            WireDelivery(
                id: DeliveryID(messageSequence: 2, slot: UInt32(slot)), fid: FID(fid)!, token: RegistrationToken("token-\(slot + 1)"), platform: .android,
                expiry: Timestamp(millisecondsSinceEpoch: 1_767_225_600_000), isInFlight: false, isDeletedMessagesMarker: false,
                payload: Array(#"{"data":{"k":"v"}}"#.utf8)
            )
        })))),
        ("error", .server(ServerFrame(requestID: 4, message: .error(FanoutError(.permissionDenied, "the key does not cover this project", field: "project"))))),
    ]

    /// The send's report: one Android subscriber, the three payloads' sizes.
    static var sendReport: [PlatformSendReport] {
        var android = PlatformSendReport(platform: .android, renderedBytes: 18, limit: nil)
        android.audience = 1
        android.enqueued = 1
        return [android, PlatformSendReport(platform: .ios, renderedBytes: 33, limit: 4096), PlatformSendReport(platform: .web, renderedBytes: 18, limit: 4096)]
    }

    static var fixtures: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    }

    /// Hex, 16 bytes per line, split after the 12-byte header.
    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        func line(_ slice: ArraySlice<UInt8>) -> String {
            slice.map { String([digits[Int($0 >> 4)], digits[Int($0 & 0xF)]]) }.joined(separator: " ")
        }
        var lines = [line(bytes.prefix(12))]
        var rest = bytes.dropFirst(12)
        while !rest.isEmpty {
            lines.append(line(rest.prefix(16)))
            rest = rest.dropFirst(16)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    @Test(arguments: 0..<examples.count)
    func exampleMatchesItsFixture(index: Int) throws {
        let (name, example) = Self.examples[index]
        var buffer = ByteBuffer()
        switch example {
        case .client(let frame): try frame.encode(into: &buffer)
        case .server(let frame): try frame.encode(into: &buffer)
        }
        let bytes = Array(buffer.readableBytesView)
        let url = Self.fixtures.appendingPathComponent("\(name).hex")
        if ProcessInfo.processInfo.environment["FANOUT_WRITE_FIXTURES"] == "1" {
            try Self.hex(bytes).write(to: url, atomically: true, encoding: .utf8)
        }
        let fixture = try String(contentsOf: try #require(Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: "hex")), encoding: .utf8)
        #expect(Self.hex(bytes) == fixture, "\(name)")
        // And back: the fixture's bytes decode to the example.
        let parsed = fixture.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { UInt8($0, radix: 16) }
        switch example {
        case .client(let frame): #expect(try WireCodecTests.decodeAll(ByteBuffer(bytes: parsed), as: ClientRequest.self) == [frame])
        case .server(let frame): #expect(try WireCodecTests.decodeAll(ByteBuffer(bytes: parsed), as: ServerMessage.self) == [frame])
        }
    }
}
