import FanoutCore
import FanoutTestSupport
import FanoutWire
import NIOCore
import NIOTestUtils
import Testing

/// The codec of docs/wire-protocol.md: every message round-trips, the decoder handles any
/// split of the byte stream, and each malformed input ends in the documented error.
@Suite("Wire codec")
struct WireCodecTests {
    static func encode<Message: WireMessage>(_ frame: Frame<Message>) throws -> ByteBuffer {
        var buffer = ByteBuffer()
        try frame.encode(into: &buffer)
        return buffer
    }

    static func decodeAll<Message: WireMessage>(_ bytes: ByteBuffer, as: Message.Type, limit: Int = FrameHeader.defaultMaximumPayloadSize) throws -> [Frame<Message>] {
        var decoder = FrameDecoder<Message>(maximumPayloadSize: limit)
        var buffer = bytes
        var frames: [Frame<Message>] = []
        while let frame = try decoder.decode(buffer: &buffer) { frames.append(frame) }
        if let last = try decoder.decodeLast(buffer: &buffer, seenEOF: true) { frames.append(last) }
        return frames
    }

    /// 2000 random messages through the encoder and the decoder; returns the opcodes seen.
    static func roundTrip<Message: WireMessage>(seed: UInt64, _ make: (inout WireSamples) -> Message) throws -> Set<UInt8> {
        var samples = WireSamples(seed: seed)
        var seen = Set<UInt8>()
        for index in 0..<2000 {
            let frame = Frame(requestID: samples.u32(), message: make(&samples))
            seen.insert(frame.opcode.rawValue)
            let decoded = try Self.decodeAll(try Self.encode(frame), as: Message.self)
            #expect(decoded == [frame], "seed \(seed), sample \(index)")
            // FanoutError's equality looks at code and field only: compare the rest too.
            if case .error(let sent)? = frame.message as? ServerMessage, case .error(let received)? = decoded.first?.message as? ServerMessage {
                #expect(sent.message == received.message && sent.violations == received.violations)
            }
        }
        return seen
    }

    /// A string too long for its `u16` count cannot be encoded: the error names the list element,
    /// and nothing of the frame is left in the buffer.
    @Test func aListElementTooLongIsRefusedByName() throws {
        let long = String(repeating: "x", count: Int(UInt16.max) + 1)
        let frame = ClientFrame(requestID: 7, request: .subscribe(project: "default", topic: "news", registrations: ["a", long]))
        var buffer = ByteBuffer()
        #expect {
            try frame.encode(into: &buffer)
        } throws: { error in
            (error as? ProtocolError)?.message == "registrations[1] is 65536 bytes; at most 65535 can be sent"
        }
        #expect(buffer.readableBytes == 0)
    }

    /// The decoder marks a list whose registrations are all visible ASCII, so that a batch skips
    /// its own check of their bytes; a list with a space or a non-ASCII character in an item is
    /// not marked. Either way the list equals the one sent, and its batch reads each item as
    /// `RegistrationAddress(parsing:)` does (the empty item and the too long one are invalid).
    @Test func aDecodedListKnowsWhetherItIsVisibleASCII() throws {
        let token = String(repeating: "t", count: 163)
        let fid = "cKpqbXWNS0q2Tv6pPZ2BZR"
        for (registrations, visible) in [
            ([token, fid], true),
            ([token, "a token"], false),
            (["émile", token], false),
            ([token, "", String(repeating: "t", count: RegistrationToken.maximumLength + 1)], true),
        ] as [([String], Bool)] {
            let sent = ClientFrame(requestID: 1, request: .subscribe(project: "default", topic: "news", registrations: RegistrationList(registrations)))
            let decoded = try Self.decodeAll(try Self.encode(sent), as: ClientRequest.self)
            guard case .subscribe(_, _, let list)? = decoded.first?.message else {
                Issue.record("not a SUBSCRIBE: \(decoded)")
                continue
            }
            #expect(list.isKnownVisibleASCII == visible, "\(registrations)")
            #expect(list == RegistrationList(registrations), "the same list, whatever is known of it")
            let batch = try RegistrationBatch(parsing: list, maximum: 1000)
            #expect(registrations.indices.map { batch.address(at: $0) } == registrations.map { RegistrationAddress(parsing: $0) })
        }
    }

    /// An encoded request's header and payload are the bytes `ClientFrame` encodes, whatever the
    /// request id; one over the maximum payload size is refused, naming the frame.
    @Test func anEncodedRequestIsTheFramesPayloadAfterAHeaderOfItsOwn() throws {
        let request = ClientRequest.registerBatchFIDs(project: "p", [
            RegistrationFields(offeredFID: "dAAAAAAAAAAAAAAAAAAAAA", token: "t-0", platform: .ios, appID: "1:1:ios:a", apnsToken: "0a0b"),
            RegistrationFields(token: "t-1", platform: .web, appID: "1:1:web:a"),
        ])
        let encoded = try EncodedRequest(request)
        for id: UInt32 in [1, 0xFFFF_FFFE] {
            var expected = ByteBuffer()
            try ClientFrame(requestID: id, request: request).encode(into: &expected)
            var sent = ByteBuffer()
            sent.writeFrameHeader(encoded.header(requestID: id))
            sent.writeImmutableBuffer(encoded.payload)
            #expect(sent == expected)
        }
        let error = #expect(throws: ProtocolError.self) {
            _ = try EncodedRequest(request, maximumPayloadSize: encoded.payload.readableBytes - 1)
        }
        #expect(error?.code == .resourceExhausted)
        #expect(error?.message.contains("over the maximum frame size") == true)
    }

    /// A register batch's valid tokens and app ids reach the server kept in a block the frame's
    /// items share, equal (and hashed alike) to the same values made from strings; a token or app
    /// id that is not one stays the text sent, for the server to refuse by name. A single
    /// REGISTER's stay text. Offered FIDs arrive parsed. Either way the fields equal the ones sent.
    @Test func aRegisterBatchKeepsItsValidTokensAndAppIDsInTheFramesBlock() throws {
        let valid = String(repeating: "t", count: 163)
        let items = [
            RegistrationFields(token: valid, platform: .android, appID: "1:1:android:a"),
            RegistrationFields(token: "a token", platform: .web, appID: "has a space"),
            RegistrationFields(offeredFID: "cKpqbXWNS0q2Tv6pPZ2BZR", platform: .web, appID: "1:1:web:a"),
            RegistrationFields(offeredFID: "cAbCdEfGh-1", token: "tok-3", platform: .ios, appID: "1:1:ios:a"),
        ]
        for request in [ClientRequest.registerBatchFIDs(project: "default", items), .registerBatch(project: "default", items)] {
            let decoded = try Self.decodeAll(try Self.encode(ClientFrame(requestID: 1, request: request)), as: ClientRequest.self)
            switch decoded.first?.message {
            case .registerBatchFIDs(_, let fields)?, .registerBatch(_, let fields)?: try Self.expectKeptTokens(fields, sent: items, valid: valid)
            default: Issue.record("not a register batch: \(decoded)")
            }
        }
        let single = try Self.decodeAll(try Self.encode(ClientFrame(requestID: 2, request: .register(project: "default", items[0]))), as: ClientRequest.self)
        guard case .register(_, let fields, _)? = single.first?.message else {
            Issue.record("not a REGISTER: \(single)")
            return
        }
        #expect(fields.heldToken == .text(valid) && fields == items[0])
        let offered = try Self.decodeAll(try Self.encode(ClientFrame(requestID: 3, request: .register(project: "default", items[2]))), as: ClientRequest.self)
        guard case .register(_, let offeredFields, _)? = offered.first?.message, case .value? = offeredFields.offered else {
            Issue.record("a REGISTER's offered FID is not parsed: \(offered)")
            return
        }
        if case .value? = fields.heldToken { Issue.record("a single REGISTER's token is kept in a block") }
        if case .value = fields.heldAppID { Issue.record("a single REGISTER's app id is kept in a block") }
    }

    private static func expectKeptTokens(_ fields: [RegistrationFields], sent: [RegistrationFields], valid: String) throws {
        #expect(fields == sent, "the fields sent")
        guard fields.count == 4, case .value(let kept)? = fields[0].heldToken, case .value(let short)? = fields[3].heldToken else {
            Issue.record("the valid tokens are not kept: \(fields.map(\.heldToken))")
            return
        }
        guard case .text("a token")? = fields[1].heldToken, fields[2].heldToken == nil else {
            Issue.record("a token that is not one, or none, is not left as sent: \(fields.map(\.heldToken))")
            return
        }
        // An offered FID arrives parsed; anything else offered (a legacy Instance ID) as its text.
        #expect(fields[2].offered == .value(try #require(FID("cKpqbXWNS0q2Tv6pPZ2BZR"))))
        if case .value? = fields[2].offered {} else { Issue.record("the offered FID is not parsed: \(String(describing: fields[2].offered))") }
        if case .text("cAbCdEfGh-1")? = fields[3].offered {} else { Issue.record("a legacy offer is not its text: \(String(describing: fields[3].offered))") }
        guard case .value(let app)? = Optional(fields[0].heldAppID), case .value = fields[2].heldAppID, case .value = fields[3].heldAppID,
            case .text("has a space") = fields[1].heldAppID
        else {
            Issue.record("the valid app ids are not kept, or another is not left as sent: \(fields.map(\.heldAppID))")
            return
        }
        let madeApp = try #require(AppID("1:1:android:a"))
        #expect(app == madeApp && app.value == "1:1:android:a" && Set([app, madeApp]).count == 1)
        let made = try #require(RegistrationToken(valid))
        #expect(kept == made && made == kept && kept.value == valid && kept.utf8Count == 163 && short.value == "tok-3")
        #expect(kept != short && Set([kept, made, short]).count == 2, "equal tokens hash alike, however each is held")
        #expect(kept.description == made.description, "redacted alike")
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func everyRequestRoundTrips(seed: UInt64) throws {
        let seen = try Self.roundTrip(seed: seed) { $0.request() }
        #expect(seen.count == 45, "every request opcode was generated")
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func everyServerMessageRoundTrips(seed: UInt64) throws {
        let seen = try Self.roundTrip(seed: seed) { $0.message() }
        #expect(seen.count >= 30)
    }

    /// The server writes DELIVERY frames from a delivery's fields: the same bytes as the message.
    @Test func aDeliveryFrameFromFieldsIsTheMessagesFrame() throws {
        var samples = WireSamples(seed: 9)
        for index in 0..<200 {
            var delivery = samples.delivery()
            delivery.isInFlight = false
            // Legacy Instance IDs are 11 characters: the frame's size is computed from the FID's.
            if index % 10 == 0 { delivery.fid = FID(legacyInstanceID: "cAbCdEfGh-\(index % 10)")! }
            let attachID = samples.u32()
            var direct = ByteBuffer()
            try direct.writeDeliveryFrame(attachID: attachID, delivery, maximumPayloadSize: FrameHeader.defaultMaximumPayloadSize)
            #expect(direct == (try Self.encode(ServerFrame(requestID: attachID, message: .delivery(delivery)))))
        }
    }

    /// Drip-fed, batched and shuffled inputs decode to the same frames (NIO's verifier).
    @Test func decoderHandlesEverySplitOfTheStream() throws {
        var samples = WireSamples(seed: 7)
        var pairs: [(ByteBuffer, [ClientFrame])] = []
        for _ in 0..<40 {
            let frames = (0..<samples.int(1...3)).map { _ in ClientFrame(requestID: samples.u32(), request: samples.request()) }
            var bytes = ByteBuffer()
            for frame in frames { try frame.encode(into: &bytes) }
            pairs.append((bytes, frames))
        }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs) { FrameDecoder<ClientRequest>() }
    }

    // MARK: - Malformed input, each with its exact error

    static func header(version: UInt8 = FrameHeader.currentVersion, opcode: UInt8, flags: UInt16 = 0, requestID: UInt32 = 9, length: UInt32) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeMultipleIntegers(version, opcode, flags, requestID, length)
        return buffer
    }

    static func expectError(_ bytes: ByteBuffer, code: FanoutError.Code = .invalidArgument, requestID: UInt32 = 9, containing text: String) {
        do {
            let frames = try Self.decodeAll(bytes, as: ClientRequest.self, limit: 1024)
            Issue.record("expected \(code) (\(text)), decoded \(frames)")
        } catch let error as ProtocolError {
            #expect(error.code == code)
            #expect(error.requestID == requestID)
            #expect(error.message.contains(text), "\(error.message)")
        } catch {
            Issue.record("not a ProtocolError: \(error)")
        }
    }

    @Test func aFrameOverTheLimitIsRefusedBeforeItsPayloadArrives() {
        // Only the header: the decoder must not wait for 1025 bytes.
        Self.expectError(Self.header(opcode: 0x50, length: 1025), code: .resourceExhausted, containing: "over the maximum frame size 1024")
    }

    @Test func anUnknownVersionOrFlagsAreRefused() {
        Self.expectError(Self.header(version: 1, opcode: 0x02, length: 0), containing: "protocol version 1 is not supported")
        Self.expectError(Self.header(version: 3, opcode: 0x02, length: 0), containing: "protocol version 3 is not supported")
        Self.expectError(Self.header(opcode: 0x02, flags: 1, length: 0), containing: "flags must be 0")
    }

    @Test func unknownAndServerOpcodesAreRefused() {
        Self.expectError(Self.header(opcode: 0x7E, length: 0), containing: "unknown opcode")
        Self.expectError(Self.header(opcode: 0x00, length: 0), containing: "not a request opcode")
        Self.expectError(Self.header(opcode: 0xF0, length: 0), containing: "not a request opcode")
    }

    @Test func anEmptyPayloadWhereFieldsAreDueIsTruncated() {
        Self.expectError(Self.header(opcode: 0x40, length: 0), containing: "the payload ends inside project")
    }

    @Test func aConnectionEndingInsideAFrameIsAnError() {
        var bytes = Self.header(opcode: 0x11, length: 10)
        bytes.writeBytes([0, 7, 100, 101])
        Self.expectError(bytes, containing: "the connection ended inside a frame")
        Self.expectError(ByteBuffer(bytes: [1, 2, 0]), requestID: 0, containing: "the connection ended inside a frame (3 bytes)")
    }

    @Test func invalidEncodingsAreRefused() {
        // A string that is not UTF-8.
        var bytes = Self.header(opcode: 0x11, length: 4)
        bytes.writeBytes([0, 2, 0xC3, 0x28])
        Self.expectError(bytes, containing: "project is not valid UTF-8")
        // A bool that is 2.
        var bind = ByteBuffer()
        for text in ["default", "reg", "user"] {
            bind.writeInteger(UInt16(text.utf8.count))
            bind.writeString(text)
        }
        bind.writeInteger(2 as UInt8)
        var frame = Self.header(opcode: 0x30, length: UInt32(bind.readableBytes))
        frame.writeImmutableBuffer(bind)
        Self.expectError(frame, containing: "anonymous is not a bool (2)")
        // A list announcing more elements than bytes.
        var subscribe = ByteBuffer()
        for text in ["default", "news"] {
            subscribe.writeInteger(UInt16(text.utf8.count))
            subscribe.writeString(text)
        }
        subscribe.writeInteger(UInt32(1_000_000))
        var list = Self.header(opcode: 0x40, length: UInt32(subscribe.readableBytes))
        list.writeImmutableBuffer(subscribe)
        Self.expectError(list, containing: "registrations announces 1000000 elements")
        // A list element that is not UTF-8, after one that is: named by its index.
        var badElement = ByteBuffer()
        for text in ["default", "news"] {
            badElement.writeInteger(UInt16(text.utf8.count))
            badElement.writeString(text)
        }
        badElement.writeInteger(UInt32(2))
        badElement.writeBytes([0, 3, 0x61, 0x62, 0x63, 0, 2, 0xC3, 0x28])
        var badList = Self.header(opcode: 0x40, length: UInt32(badElement.readableBytes))
        badList.writeImmutableBuffer(badElement)
        Self.expectError(badList, containing: "registrations[1] is not valid UTF-8")
        // Bytes after the last field.
        var ping = Self.header(opcode: 0x02, length: 1)
        ping.writeInteger(0 as UInt8)
        Self.expectError(ping, containing: "1 bytes after the last field")
        // An optional whose tag is 7.
        var register = ByteBuffer()
        register.writeInteger(UInt16(7))
        register.writeString("default")
        register.writeInteger(7 as UInt8)
        var optional = Self.header(opcode: 0x20, length: UInt32(register.readableBytes))
        optional.writeImmutableBuffer(register)
        Self.expectError(optional, containing: "fid has an invalid optional tag (7)")
    }

    /// REGISTER's options byte may be left out (as before it existed); present, bit 0 asks for
    /// credentials and any other bit is refused.
    @Test func registerOptionsAreOptionalAndChecked() throws {
        let fields = RegistrationFields(token: "t-1", platform: .android, appID: "1:1:android:a")
        let plain = try Self.encode(ClientFrame(requestID: 9, request: .register(project: "default", fields)))
        let withCredentials = try Self.encode(ClientFrame(requestID: 9, request: .register(project: "default", fields, issuingCredentials: true)))
        #expect(withCredentials.readableBytes == plain.readableBytes + 1, "one options byte, left out when 0")
        #expect(try Self.decodeAll(plain, as: ClientRequest.self).map(\.message) == [.register(project: "default", fields, issuingCredentials: false)])
        #expect(try Self.decodeAll(withCredentials, as: ClientRequest.self).map(\.message) == [.register(project: "default", fields, issuingCredentials: true)])
        // An explicit 0 reads as left out; bit 1 is unknown.
        for (options, accepted) in [(0 as UInt8, true), (2, false), (0x81, false)] {
            var payload = plain.getSlice(at: plain.readerIndex + 12, length: plain.readableBytes - 12)!
            payload.writeInteger(options)
            var frame = Self.header(opcode: 0x20, length: UInt32(payload.readableBytes))
            frame.writeImmutableBuffer(payload)
            if accepted {
                #expect(try Self.decodeAll(frame, as: ClientRequest.self).map(\.message) == [.register(project: "default", fields)])
            } else {
                Self.expectError(frame, containing: "options has unknown bits (\(options))")
            }
        }
    }

    @Test func anEncodedFrameOverTheLimitIsNotWritten() throws {
        var buffer = ByteBuffer()
        buffer.writeString("kept")
        let frame = ClientFrame(requestID: 3, request: .send(project: "default", body: [UInt8](repeating: 0x41, count: 2000)))
        #expect(throws: ProtocolError(.resourceExhausted, "a 0x50 frame of 2014 bytes is over the maximum frame size 1024", requestID: 3)) {
            try frame.encode(into: &buffer, maximumPayloadSize: 1024)
        }
        #expect(buffer.readableBytes == 4, "nothing of the refused frame is left in the buffer")
    }
}
