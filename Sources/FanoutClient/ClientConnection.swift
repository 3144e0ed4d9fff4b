internal import FanoutModel
internal import FanoutWire
internal import NIOCore
internal import Synchronization

/// A request encoded and on its way to the event loop: its frame, and who waits for its reply.
struct OutgoingRequest: Sendable {
    let id: UInt32
    let frame: ByteBuffer
    /// A prepared request's payload, written after `frame` (its header).
    var payload: ByteBuffer? = nil
    let reply: UnsafeContinuation<ServerMessage, any Error>
    /// For ATTACH: where the attachment's deliveries go.
    let deliveries: DeliveryStream?

    /// Ends the request unsent: its caller (and its attachment's stream) get `error`.
    func fail(_ error: any Error) {
        self.deliveries?.finish(throwing: error)
        self.reply.resume(throwing: error)
    }
}

/// One connection's request path. A caller encodes its frame on its own thread and queues it;
/// the first request queued since the event loop last took the queue schedules one task there,
/// which hands everything queued to the `ClientHandler` to write with one flush. A request costs
/// the event loop no task of its own when others are queued with it, and no promise at all: the
/// handler resumes the caller's continuation when the reply comes (or fails it with the
/// connection).
final class ClientConnection: Sendable {
    /// Frames up to this payload size are sent; the server refuses what is over its own maximum.
    static let maximumPayloadSize = 64 * 1024 * 1024

    let channel: any Channel
    private let handler: NIOLoopBound<ClientHandler>
    private let outbox = Locked(Outbox())
    /// The next request id; 0 is left to the handler's keep-alive PINGs.
    private let nextRequestID = Atomic<UInt32>(1)

    private struct Outbox: Sendable {
        var requests: [OutgoingRequest] = []
        /// A task is on the event loop to take `requests`.
        var isScheduled = false
    }

    init(channel: any Channel, handler: NIOLoopBound<ClientHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// Sends a request and waits for its reply (an ERROR reply is returned, not thrown).
    /// - Throws: the request's encoding error (`INVALID_ARGUMENT`, or `RESOURCE_EXHAUSTED` over the
    ///   frame size), `UNAVAILABLE` when the connection is lost (or GOAWAY's reason), or
    ///   `CancellationError` when the calling task is cancelled before the reply comes (a request
    ///   already written may still be applied; its reply is dropped).
    func request(_ request: ClientRequest, deliveries: DeliveryStream? = nil) async throws -> ServerMessage {
        try Task.checkCancellation()
        let id = self.takeRequestID()
        var frame = self.channel.allocator.buffer(capacity: 256)
        do {
            try ClientFrame(requestID: id, request: request).encode(into: &frame, maximumPayloadSize: Self.maximumPayloadSize)
        } catch {
            throw error.fanoutError
        }
        return try await self.send(id: id, frame: frame, deliveries: deliveries)
    }

    /// Sends a request encoded ahead, with a request id of its own, and waits for its reply as
    /// `request(_:deliveries:)` does. The payload is written as it is, not copied.
    func request(_ encoded: EncodedRequest) async throws -> ServerMessage {
        try Task.checkCancellation()
        guard encoded.payload.readableBytes <= Self.maximumPayloadSize else {
            throw ProtocolError.frameTooLarge(encoded.opcode, bytes: encoded.payload.readableBytes, maximum: Self.maximumPayloadSize).fanoutError
        }
        let id = self.takeRequestID()
        var header = self.channel.allocator.buffer(capacity: FrameHeader.size)
        header.writeFrameHeader(encoded.header(requestID: id))
        return try await self.send(id: id, frame: header, payload: encoded.payload, deliveries: nil)
    }

    /// Queues a frame (with the payload after it, if any) and waits for its reply.
    private func send(id: UInt32, frame: ByteBuffer, payload: ByteBuffer? = nil, deliveries: DeliveryStream?) async throws -> ServerMessage {
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                let outgoing = OutgoingRequest(id: id, frame: frame, payload: payload, reply: continuation, deliveries: deliveries)
                let schedule = self.outbox.withLock { outbox in
                    outbox.requests.append(outgoing)
                    defer { outbox.isScheduled = true }
                    return !outbox.isScheduled
                }
                if schedule {
                    self.channel.eventLoop.execute { self.sendQueued() }
                }
            }
        } onCancel: {
            self.cancel(id)
        }
    }

    /// Ends request `id`'s wait with `CancellationError`: taken out of the queue if it has not
    /// gone to the event loop yet, else out of the handler's table (unless its reply came first).
    private func cancel(_ id: UInt32) {
        let queued = self.outbox.withLock { outbox -> OutgoingRequest? in
            guard let index = outbox.requests.firstIndex(where: { $0.id == id }) else { return nil }
            return outbox.requests.remove(at: index)
        }
        if let queued {
            queued.fail(CancellationError())
            return
        }
        self.channel.eventLoop.execute { self.handler.value.cancel(id) }
    }

    /// On the event loop: hands everything queued to the handler.
    private func sendQueued() {
        let requests = self.outbox.withLock { outbox in
            outbox.isScheduled = false
            defer { outbox.requests = [] }
            return outbox.requests
        }
        self.handler.value.send(requests)
    }

    private func takeRequestID() -> UInt32 {
        while true {
            let id = self.nextRequestID.wrappingAdd(1, ordering: .relaxed).oldValue
            if id != 0 { return id }
        }
    }
}
