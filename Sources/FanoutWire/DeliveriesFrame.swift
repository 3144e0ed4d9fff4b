package import FanoutModel
package import NIOCore

/// What DELIVERY and DELIVERIES frames are written from: the engine's delivery, or one a cluster
/// node received from the shard's owner.
package protocol DeliveryFrameFields {
    var id: DeliveryID { get }
    var fid: FID { get }
    /// The token a frame writes for it. A `.bytes` token is valid while the delivery lives: the
    /// writers read it only while they borrow the delivery.
    var recipientToken: RecipientToken? { get }
    var apnsToken: APNsDeviceToken? { get }
    var platform: Platform { get }
    var expiry: Timestamp { get }
    var isDeletedMessagesMarker: Bool { get }
    var headers: [DeliveryHeader] { get }
    var payload: [UInt8] { get }

    /// What the DELIVERIES writer reads of each delivery, in one pass, initialized in order from
    /// `start` (room for `deliveries.count`). Implement it where the conforming type is concrete,
    /// reading each delivery's fields in place: the writer's generic code copies a delivery
    /// (retaining its token and message) at every field it reads, and
    /// `DeliveryFrameRecipient(of:)` is not specialised outside this module. Initialized in place
    /// (from another module, through `initializeRecipient`), not appended: an append from another
    /// module copied each recipient through its value witness and destroyed the original.
    static func initializeFrameRecipients(of deliveries: ArraySlice<Self>, at start: UnsafeMutablePointer<DeliveryFrameRecipient>)

    /// The headers and payload of `deliveries[index]` (a group's, written once per group), read in
    /// place where the conforming type is concrete, as `initializeFrameRecipients`.
    static func headersAndPayload(of deliveries: ArraySlice<Self>, at index: Int) -> (headers: [DeliveryHeader], payload: [UInt8])
}

extension WireDelivery: DeliveryFrameFields {
    package var recipientToken: RecipientToken? {
        switch self.token?.text {
        case nil: nil
        case .string(let string): .string(string)
        case .kept(let kept): .bytes(kept.unsafeBytes)  // kept alive by this delivery
        }
    }

    package static func initializeFrameRecipients(of deliveries: ArraySlice<WireDelivery>, at start: UnsafeMutablePointer<DeliveryFrameRecipient>) {
        // Through the buffer: enumerating the slice copied each delivery whole.
        deliveries.withUnsafeBufferPointer { deliveries in
            for position in deliveries.indices {
                (start + position).initialize(to: DeliveryFrameRecipient(of: deliveries[position]))  // specialised here, where both are known
            }
        }
    }

    package static func headersAndPayload(of deliveries: ArraySlice<WireDelivery>, at index: Int) -> (headers: [DeliveryHeader], payload: [UInt8]) {
        (deliveries[index].headers, deliveries[index].payload)
    }
}

/// A poll's deliveries as the slices they were handed out in (none copied to join them), read by
/// one running index over them all.
struct DeliveryChunks<Delivery: DeliveryFrameFields> {
    let slices: [ArraySlice<Delivery>]
    /// The running index of each slice's first delivery.
    private let starts: [Int]
    let count: Int

    init(_ slices: [ArraySlice<Delivery>]) {
        self.slices = slices
        var count = 0
        self.starts = slices.map { slice in
            defer { count += slice.count }
            return count
        }
        self.count = count
    }

    /// The headers and payload of the `index`-th delivery, read in place by the concrete type:
    /// returning the delivery copied it whole (its token, message and strings retained and
    /// released) for every group of a frame, twice.
    func headersAndPayload(at index: Int) -> (headers: [DeliveryHeader], payload: [UInt8]) {
        // A poll has a handful of slices: the last one starting at or before `index` holds it (an
        // empty slice starts where the next one does, so it is never the last such one).
        var slice = self.starts.count - 1
        while self.starts[slice] > index { slice -= 1 }
        let offset = index - self.starts[slice]
        return Delivery.headersAndPayload(of: self.slices[slice], at: self.slices[slice].startIndex + offset)
    }
}

/// One delivery as a DELIVERIES frame carries it: its group's envelope, and what it writes as a
/// recipient (slot, FID, token, APNs token).
package struct DeliveryFrameRecipient {
    // `Optional<T>`, not `T?`: see `RegistrationRequest`.
    var envelope: DeliveryEnvelope
    var slot: UInt32
    var fid: FID
    var token: Optional<RecipientToken>
    var apnsToken: Optional<String>

    package init(envelope: DeliveryEnvelope, slot: UInt32, fid: FID, token: RecipientToken?, apnsToken: String?) {
        self.envelope = envelope
        self.slot = slot
        self.fid = fid
        self.token = token
        self.apnsToken = apnsToken
    }

    init(of delivery: some DeliveryFrameFields) {
        self.init(
            envelope: DeliveryEnvelope(of: delivery), slot: delivery.id.slot, fid: delivery.fid, token: delivery.recipientToken,
            apnsToken: delivery.apnsToken?.hex
        )
    }
}

extension UnsafeMutablePointer where Pointee == DeliveryFrameRecipient {
    /// Initializes the recipient here from its fields (for the server's module, which builds a
    /// frame's recipients in place).
    package func initializeRecipient(
        sequence: UInt64, platform: Platform, expiry: Timestamp, isDeletedMessagesMarker: Bool,
        slot: UInt32, fid: FID, token: consuming RecipientToken?, apnsToken: consuming String?
    ) {
        self.initialize(to: DeliveryFrameRecipient(
            envelope: DeliveryEnvelope(sequence: sequence, platform: platform, expiry: expiry, isDeletedMessagesMarker: isDeletedMessagesMarker),
            slot: slot, fid: fid, token: token, apnsToken: apnsToken
        ))
    }
}

/// A recipient's registration token as the writer gets it: a string (a delivery that came over
/// the wire), or bytes in the engine's storage (the engine's own deliveries, copied nowhere before
/// the frame), borrowed from the delivery that keeps them alive (see `recipientToken`): the
/// writer neither retains nor releases their owner.
package enum RecipientToken {
    case string(String)
    case bytes(UnsafeRawBufferPointer)
}

/// What the deliveries of one group of a DELIVERIES frame share: one message (or one "deleted
/// messages" marker) rendered for one platform. Deliveries with equal envelopes have equal headers
/// and payloads: a sequence names one message of the project, rendered once per platform.
package struct DeliveryEnvelope: Equatable {
    var sequence: UInt64
    var platform: Platform
    var expiry: Timestamp
    var isDeletedMessagesMarker: Bool

    package init(sequence: UInt64, platform: Platform, expiry: Timestamp, isDeletedMessagesMarker: Bool) {
        self.sequence = sequence
        self.platform = platform
        self.expiry = expiry
        self.isDeletedMessagesMarker = isDeletedMessagesMarker
    }

    init(of delivery: some DeliveryFrameFields) {
        self.init(
            sequence: delivery.id.messageSequence, platform: delivery.platform, expiry: delivery.expiry,
            isDeletedMessagesMarker: delivery.isDeletedMessagesMarker
        )
    }
}

/// The deliveries of one poll grouped by envelope: `order` lists their indices group after group
/// (the groups in the order of their first delivery, each group's deliveries in their own order),
/// and `groups` are the ranges of `order` that make each group.
struct DeliveryGrouping {
    var order: [Int]
    var groups: [Range<Int>]

    init(_ deliveries: [DeliveryFrameRecipient]) {
        var envelopes: [DeliveryEnvelope] = []
        var counts: [Int] = []
        var groupOf = [Int](repeating: 0, count: deliveries.count)
        // Each group's index in an open-addressing table keyed by the envelope's message sequence
        // (the server's own numbers, not a client's choice): hashing every delivery's envelope
        // with `Hasher` cost more than writing the frame.
        let tableSize = 1 << (Int.bitWidth - (max(16, deliveries.count * 2) - 1).leadingZeroBitCount)
        var table = [Int32](repeating: -1, count: tableSize)
        var last = -1
        for index in deliveries.indices {
            let envelope = deliveries[index].envelope
            var group = last
            if last < 0 || envelopes[last] != envelope {  // a send's deliveries come one after the other
                var bucket = Int(truncatingIfNeeded: (envelope.sequence &* 0x9E37_79B9_7F4A_7C15) >> 32) & (tableSize - 1)
                while table[bucket] >= 0 && envelopes[Int(table[bucket])] != envelope {
                    bucket = (bucket + 1) & (tableSize - 1)
                }
                if table[bucket] >= 0 {
                    group = Int(table[bucket])
                } else {
                    group = envelopes.count
                    table[bucket] = Int32(group)
                    envelopes.append(envelope)
                    counts.append(0)
                }
            }
            groupOf[index] = group
            counts[group] += 1
            last = group
        }
        var groups: [Range<Int>] = []
        groups.reserveCapacity(counts.count)
        var start = 0
        for count in counts {
            groups.append(start..<(start + count))
            start += count
        }
        var next = groups.map(\.lowerBound)
        var order = [Int](repeating: 0, count: deliveries.count)
        for index in deliveries.indices {
            order[next[groupOf[index]]] = index
            next[groupOf[index]] += 1
        }
        self.order = order
        self.groups = groups
    }
}

extension ByteBuffer {
    /// Appends DELIVERIES frames carrying `deliveries` (the server's hot path for ATTACH_GROUPED):
    /// grouped by envelope, each group's envelope (sequence, platform, expiry, marker, headers,
    /// payload) written once and then its recipients; as many frames as the maximum frame size
    /// needs, a group that does not fit continuing in the next frame under its envelope again.
    /// Each frame is sized first and written whole. A delivery that cannot be sent (with its
    /// envelope over the maximum frame size, or a string over 65535 bytes) gets an ERROR frame
    /// with the attachment's request id instead, as on a DELIVERY stream.
    package mutating func writeDeliveriesFrames<Delivery: DeliveryFrameFields>(
        attachID: UInt32,
        _ deliveries: [Delivery],
        maximumPayloadSize: Int
    ) {
        self.writeDeliveriesFrames(attachID: attachID, chunks: [deliveries[...]], maximumPayloadSize: maximumPayloadSize)
    }

    /// `writeDeliveriesFrames` of deliveries in slices, grouped together as if they were one
    /// array (the server's: the slices of the engine's hand-outs one poll takes, so that no
    /// delivery is copied on its way to the frame).
    package mutating func writeDeliveriesFrames<Delivery: DeliveryFrameFields>(
        attachID: UInt32,
        chunks: [ArraySlice<Delivery>],
        maximumPayloadSize: Int
    ) {
        let deliveries = DeliveryChunks(chunks)
        guard deliveries.count > 0 else { return }
        let recipients = [DeliveryFrameRecipient](unsafeUninitializedCapacity: deliveries.count) { buffer, initialized in
            for chunk in chunks {
                Delivery.initializeFrameRecipients(of: chunk, at: buffer.baseAddress! + initialized)
                initialized += chunk.count
            }
        }
        let grouping = DeliveryGrouping(recipients)
        // The frame being planned: its groups, each the delivery whose envelope it writes and its
        // range of `carried` (the deliveries it carries).
        var pieces: [(head: Int, carried: Range<Int>)] = []
        var carried: [Int] = []
        carried.reserveCapacity(deliveries.count)
        var length = 4  // the group count
        for group in grouping.groups {
            let head = grouping.order[group.lowerBound]
            let envelopeSize: Int
            do throws(ProtocolError) {
                let (headers, payload) = deliveries.headersAndPayload(at: head)
                envelopeSize = try Self.envelopeSize(headers: headers, payload: payload)
            } catch {
                for _ in group { self.writeDeliveryError(error, attachID: attachID, maximumPayloadSize: maximumPayloadSize) }
                continue
            }
            var isOpen = false  // this group has a piece in the frame being planned
            for position in group {
                let index = grouping.order[position]
                let recipientSize: Int
                do throws(ProtocolError) {
                    recipientSize = try Self.recipientSize(recipients[index])
                    guard 4 + envelopeSize + recipientSize <= maximumPayloadSize else {
                        throw .frameTooLarge(.deliveries, bytes: 4 + envelopeSize + recipientSize, maximum: maximumPayloadSize, requestID: attachID)
                    }
                } catch {
                    self.writeDeliveryError(error, attachID: attachID, maximumPayloadSize: maximumPayloadSize)
                    continue
                }
                if length + (isOpen ? 0 : envelopeSize) + recipientSize > maximumPayloadSize {
                    self.writeDeliveriesFrame(attachID: attachID, pieces, carried, of: deliveries, recipients, length: length)
                    pieces.removeAll(keepingCapacity: true)
                    carried.removeAll(keepingCapacity: true)
                    length = 4
                    isOpen = false
                }
                carried.append(index)
                if isOpen {
                    pieces[pieces.count - 1].carried = pieces[pieces.count - 1].carried.lowerBound..<carried.count
                } else {
                    pieces.append((head, (carried.count - 1)..<carried.count))
                    length += envelopeSize
                    isOpen = true
                }
                length += recipientSize
            }
        }
        if !pieces.isEmpty {
            self.writeDeliveriesFrame(attachID: attachID, pieces, carried, of: deliveries, recipients, length: length)
        }
    }

    /// One DELIVERIES frame of `length` payload bytes, planned by `writeDeliveriesFrames`.
    private mutating func writeDeliveriesFrame<Delivery: DeliveryFrameFields>(
        attachID: UInt32,
        _ pieces: [(head: Int, carried: Range<Int>)],
        _ carried: [Int],
        of deliveries: DeliveryChunks<Delivery>,
        _ recipients: [DeliveryFrameRecipient],
        length: Int
    ) {
        self.writeSizedFrame(opcode: .deliveries, requestID: attachID, payloadLength: length) { out in
            out.integer(UInt32(pieces.count))
            for piece in pieces {
                let envelope = recipients[piece.head].envelope
                out.integer(envelope.sequence)
                out.integer(envelope.platform.code)
                out.integer(envelope.expiry.millisecondsSinceEpoch)
                out.bool(envelope.isDeletedMessagesMarker)
                let (headers, payload) = deliveries.headersAndPayload(at: piece.head)
                out.headers(headers)
                out.lengthPrefixed(payload)
                out.integer(UInt32(piece.carried.count))
                for index in carried[piece.carried] {
                    out.integer(recipients[index].slot)
                    out.fid(recipients[index].fid)
                    out.optionalToken(recipients[index].token)
                    out.optionalString(recipients[index].apnsToken)
                }
            }
        }
    }

    private mutating func writeDeliveryError(_ error: ProtocolError, attachID: UInt32, maximumPayloadSize: Int) {
        try? ServerFrame(requestID: attachID, message: .error(error.fanoutError)).encode(into: &self, maximumPayloadSize: maximumPayloadSize)
    }

    /// A group's bytes before its recipients: sequence, platform, expiry, marker, headers,
    /// payload, and the recipient count.
    private static func envelopeSize(headers: [DeliveryHeader], payload: [UInt8]) throws(ProtocolError) -> Int {
        try 8 + 1 + 8 + 1 + RawWriter.headersSize(headers) + 4 + payload.count + 4
    }

    /// A recipient's bytes: slot, FID, token, APNs token.
    private static func recipientSize(_ recipient: DeliveryFrameRecipient) throws(ProtocolError) -> Int {
        try 4 + RawWriter.fidSize(recipient.fid) + RawWriter.optionalTokenSize(recipient.token)
            + RawWriter.optionalStringSize(recipient.apnsToken, "apnsToken")
    }
}
