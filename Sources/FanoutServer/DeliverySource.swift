internal import FanoutCore
internal import FanoutModel
internal import FanoutWire

/// What a connection's attachment takes deliveries from: its engine's consumer, or on a cluster
/// node the consumer over the shards the node owns.
enum DeliverySource {
    case engine(DeliveryConsumer)
    case cluster(ClusterConsumer)

    func grant(_ credit: Int) throws(FanoutError) {
        switch self {
        case .engine(let consumer): try consumer.grant(credit)
        case .cluster(let consumer): try consumer.grant(credit)
        }
    }

    func detach() {
        switch self {
        case .engine(let consumer): consumer.detach()
        case .cluster(let consumer): consumer.detach()
        }
    }
}

extension Delivery: DeliveryFrameFields {
    /// The token's bytes borrowed from the delivery, in place (its batch's references keep them).
    var recipientToken: RecipientToken? { self.tokenEntry.map { .bytes(Delivery.tokenBytes(ofEntry: $0)) } }

    /// Each delivery's fields read in place, with `Delivery` concrete (see the requirement).
    static func initializeFrameRecipients(of deliveries: ArraySlice<Delivery>, at start: UnsafeMutablePointer<DeliveryFrameRecipient>) {
        // Through the buffer: subscripting the slice, even by index and field by field, copied
        // each delivery whole (its token's owner, message and strings retained and released).
        deliveries.withUnsafeBufferPointer { deliveries in
            // Tokens asked for a few deliveries ahead: each is a cache miss of its own.
            guard let first = deliveries.baseAddress else { return }
            let ahead = 8
            func prefetchToken(_ position: Int) {
                if position < deliveries.count, let entry = (first + position).pointee.tokenEntry { Delivery.prefetchToken(ofEntry: entry) }
            }
            for position in 0..<ahead { prefetchToken(position) }
            for position in deliveries.indices {
                prefetchToken(position + ahead)
                let delivery = first + position
                (start + position).initializeRecipient(
                    sequence: delivery.pointee.id.messageSequence, platform: delivery.pointee.platform,
                    expiry: delivery.pointee.expiry, isDeletedMessagesMarker: delivery.pointee.isDeletedMessagesMarker,
                    slot: delivery.pointee.id.slot, fid: delivery.pointee.fid,
                    token: delivery.pointee.recipientToken,
                    apnsToken: delivery.pointee.apnsToken?.hex
                )
            }
        }
    }

    static func headersAndPayload(of deliveries: ArraySlice<Delivery>, at index: Int) -> (headers: [DeliveryHeader], payload: [UInt8]) {
        deliveries.withUnsafeBufferPointer { buffer in
            let delivery = buffer.baseAddress! + (index - deliveries.startIndex)
            return (delivery.pointee.headers, delivery.pointee.payload)
        }
    }
}
