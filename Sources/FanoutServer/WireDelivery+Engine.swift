internal import FanoutCore
internal import FanoutWire

extension WireDelivery {
    /// The engine's delivery as it travels.
    init(_ delivery: Delivery) {
        self.init(
            id: delivery.id,
            fid: delivery.fid,
            token: delivery.token,
            apnsToken: delivery.apnsToken,
            platform: delivery.platform,
            expiry: delivery.expiry,
            isInFlight: delivery.isInFlight,
            isDeletedMessagesMarker: delivery.isDeletedMessagesMarker,
            headers: delivery.headers,
            payload: delivery.payload
        )
    }
}
