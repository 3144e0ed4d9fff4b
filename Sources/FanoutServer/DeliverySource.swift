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
    var recipientToken: RecipientToken? { self.storedToken.map { RecipientToken.bytes($0.unsafeBytes) } }

    /// Each delivery's fields read in place, with `Delivery` concrete (see the requirement).
    static func appendFrameRecipients(of deliveries: ArraySlice<Delivery>, to recipients: inout [DeliveryFrameRecipient]) {
        // By index: `for delivery in deliveries` copied each delivery whole (retaining all it holds).
        for index in deliveries.indices {
            recipients.append(DeliveryFrameRecipient(
                envelope: DeliveryEnvelope(
                    sequence: deliveries[index].id.messageSequence, platform: deliveries[index].platform,
                    expiry: deliveries[index].expiry, isDeletedMessagesMarker: deliveries[index].isDeletedMessagesMarker
                ),
                slot: deliveries[index].id.slot, fid: deliveries[index].fid, token: deliveries[index].recipientToken,
                apnsToken: deliveries[index].apnsToken?.hex
            ))
        }
    }
}
