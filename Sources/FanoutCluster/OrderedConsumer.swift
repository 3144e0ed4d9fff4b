import CNATS
package import FanoutCore

/// A stream read in order from a sequence on, through a JetStream ordered consumer: ephemeral,
/// without acknowledgements, flow-controlled, and made again by libnats from where it stopped
/// when it misses a message or a heartbeat. JetStream pushes the messages as they are stored;
/// they wait in libnats' queue for this subscription (bounded by flow control) until `next`
/// takes them, so reading a stream costs no request per message.
package final class OrderedConsumer: @unchecked Sendable {
    // Safe to share: libnats' subscription calls are thread-safe.
    private let subscription: OpaquePointer

    /// A message as the stream stores it.
    package struct Message: Sendable {
        /// Its sequence in the stream.
        package var sequence: UInt64
        package var data: [UInt8]
        /// The publisher's `Nats-Msg-Id`, when it gave one.
        package var messageID: String?
    }

    /// Reads `stream` (over `subject`) from message `sequence` on (one after the stream's end
    /// waits for the next message stored).
    /// - Throws: `UNAVAILABLE` when NATS does not make the consumer.
    package init(_ jetStream: JetStream, stream: String, subject: String, from sequence: UInt64) throws(FanoutError) {
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Ordered = true
        options.Config.DeliverPolicy = js_DeliverByStartSequence
        options.Config.OptStartSeq = max(sequence, 1)
        var subscription: OpaquePointer?
        var code = jsErrCode(rawValue: 0)
        let status = stream.withCString { name in
            options.Stream = name
            return js_SubscribeSync(&subscription, jetStream.context, subject, nil, &options, &code)
        }
        guard status == NATS_OK, let subscription else { throw JetStream.error("cannot read stream \(stream) from \(sequence)", status, code) }
        self.subscription = subscription
    }

    deinit {
        natsSubscription_Unsubscribe(self.subscription)
        natsSubscription_Destroy(self.subscription)
    }

    /// The next message, waiting for it at most `timeout` (zero: only one that is here already);
    /// nil when none came.
    /// - Throws: `UNAVAILABLE` when the subscription failed (the connection closed, or libnats
    ///   could not make the consumer again).
    package func next(waiting timeout: Duration = .zero) throws(FanoutError) -> Message? {
        var message: OpaquePointer?
        let status = natsSubscription_NextMsg(&message, self.subscription, timeout.wholeMilliseconds)
        defer { natsMsg_Destroy(message) }
        if status == NATS_TIMEOUT { return nil }
        guard status == NATS_OK, let message else { throw JetStream.error("cannot read the next message of a stream", status) }
        var metadata: UnsafeMutablePointer<jsMsgMetaData>?
        guard natsMsg_GetMetaData(&metadata, message) == NATS_OK, let metadata else {
            throw FanoutError(.internal, "a stream's message came without its JetStream metadata")
        }
        defer { jsMsgMetaData_Destroy(metadata) }
        let count = Int(natsMsg_GetDataLength(message))
        let data = natsMsg_GetData(message).map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
        return Message(sequence: metadata.pointee.Sequence.Stream, data: data, messageID: JetStream.messageID(of: message))
    }
}
