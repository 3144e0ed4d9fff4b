internal import FanoutCore
internal import FanoutKeys
internal import FanoutWire
internal import Logging
internal import NIOCore
internal import NIOPosix
internal import ServiceLifecycle

/// Serves one connection: reads frames in order, applies each request to the engine at once (so a
/// connection's requests take effect in the order sent), and hands each reply that waits for its
/// changes to be durable (through a `BatchQueue`) to a writer task, which writes all the replies an `fdatasync` released
/// at once (the syncs of pipelined requests overlap, and their replies share a write). A
/// consumer's deliveries are pumped by another child task, in batches.
struct Connection {
    let executor: RequestExecutor
    let configuration: ServerConfiguration
    let keys: APIKeyStore
    let welcome: Welcome
    let logger: Logger

    typealias Inbound = NIOAsyncChannelInboundStream<ClientFrame>
    typealias Outbound = NIOAsyncChannelOutboundWriter<ServerFrame>

    func serve(_ channel: NIOAsyncChannel<ClientFrame, ServerFrame>) async {
        do {
            try await channel.executeThenClose { inbound, outbound in
                let ending = try await withGracefulShutdownHandler {
                    try await self.run(inbound: inbound, outbound: outbound)
                } onGracefulShutdown: {
                    // Stop reading at a frame boundary: the loop ends after the frames already
                    // passed on, whose replies are then written.
                    channel.channel.pipeline.fireUserInboundEventTriggered(ConnectionGuardHandler.StopReading())
                }
                if let goAway = ending?.goAway {
                    try await outbound.write(ServerFrame(requestID: 0, message: goAway))
                    // A lingering close (see ConnectionGuardHandler): shut the output, then wait
                    // until the peer closes or the guard's linger time is over.
                    try await channel.channel.close(mode: .output)
                    try await channel.channel.closeFuture.get()
                }
            }
        } catch {
            self.logger.debug("connection ended", metadata: ["error": "\(error)"])
        }
    }

    /// Serves the connection's frames; returns how it ends once the input has (nil when the
    /// connection failed and is closed at once).
    private func run(inbound: Inbound, outbound: Outbound) async throws -> ConnectionState.Ending? {
        try await withThrowingTaskGroup(of: Void.self) { group -> ConnectionState.Ending? in
            var state = ConnectionState(keys: self.keys, welcome: self.welcome)
            var attachment: DeliveryConsumer?
            let replies = BatchQueue<(requestID: UInt32, applied: Engine.Applied<ServerMessage>)>(limit: self.configuration.maximumInFlight)
            defer {
                attachment?.detach()
                replies.finish()
            }
            group.addTask {
                defer { replies.finish() }
                try await Self.writeReplies(from: replies, to: outbound)
            }
            do {
                for try await frame in inbound {
                    let id = frame.requestID
                    // Every action answers on the connection's task, in the order received, except
                    // the engine's changes (answered once durable, through the reply queue) and
                    // SNAPSHOT (answered when written).
                    let reply: ServerMessage
                    switch state.receive(frame.request) {
                    case .reply(let message):
                        reply = message
                    case .fail(let message):
                        try await outbound.write(ServerFrame(requestID: id, message: message))
                        return nil
                    case .attach(let project, let scope, let credit):
                        let consumer: DeliveryConsumer
                        do throws(FanoutError) {
                            consumer = try self.executor.engine.attachConsumer(
                                try Self.scope(scope),
                                credit: credit,
                                in: try RequestExecutor.project(project)
                            )
                        } catch {
                            reply = .error(error)
                            break
                        }
                        attachment = consumer
                        state.attached(credit: credit)
                        try await outbound.write(ServerFrame(requestID: id, message: .done(.attach)))
                        group.addTask { try await Self.pump(consumer, to: outbound, attachID: id) }
                        continue
                    case .grant(let credit):
                        do throws(FanoutError) {
                            try attachment?.grant(credit)
                            state.granted(credit)
                            reply = .done(.grant)
                        } catch {
                            reply = .error(error)
                        }
                    case .detach:
                        attachment?.detach()
                        attachment = nil
                        reply = .done(.detach)
                    case .snapshot:
                        // File I/O for seconds: on the NIO thread pool, answered when written.
                        let engine = self.executor.engine
                        group.addTask {
                            let reply: ServerMessage
                            do {
                                let path = try await NIOThreadPool.singleton.runIfActive { try engine.snapshot() }
                                // The file's name, not the server's path to it.
                                reply = .names(.snapshot, [String(path.split(separator: "/").last ?? "")])
                            } catch let error as FanoutError {
                                reply = .error(error)
                            } catch {
                                reply = .error(FanoutError(.unavailable, "the snapshot could not be written"))
                            }
                            try await outbound.write(ServerFrame(requestID: id, message: reply))
                        }
                        continue
                    case .acknowledge(let ids):
                        guard let consumer = attachment else {
                            reply = .error(FanoutError(.internal, "no consumer for the attachment"))
                            break
                        }
                        try await self.answerWhenDurable(id, replies: replies, outbound: outbound, self.executor.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) -> ServerMessage in
                            .count(.acknowledge, UInt64(try changes.acknowledge(ids, by: consumer)))
                        })
                        continue
                    case .perform(let request):
                        guard let key = state.key else { return nil }
                        try await self.answerWhenDurable(id, replies: replies, outbound: outbound, self.executor.engine.apply { (changes: inout Engine.Changes) throws(FanoutError) -> ServerMessage in
                            try self.executor.execute(request, key: key, changes: &changes)
                        })
                        continue
                    }
                    try await outbound.write(ServerFrame(requestID: id, message: reply))
                }
            } catch let error as ProtocolError {
                self.logger.debug("protocol error", metadata: ["error": "\(error)"])
                try await outbound.write(ServerFrame(requestID: error.requestID, message: .error(error.fanoutError)))
            }
            // The stream ended (the peer closed, or a graceful shutdown): finish the replies.
            let ending = state.inputEnded(shuttingDown: Task.isShuttingDownGracefully)
            if ending.detach {
                attachment?.detach()
                attachment = nil
            }
            replies.finish()
            try await group.waitForAll()
            return ending
        }
    }

    /// Writes the reply of an applied change at once when nothing waits for the log, else queues it
    /// for the writer task (which waits, without blocking this task, until it is durable).
    private func answerWhenDurable(
        _ id: UInt32,
        replies: BatchQueue<(requestID: UInt32, applied: Engine.Applied<ServerMessage>)>,
        outbound: Outbound,
        _ applied: Engine.Applied<ServerMessage>
    ) async throws {
        if applied.isDurable {
            try await outbound.write(ServerFrame(requestID: id, message: await Self.reply(applied)))
        } else {
            await replies.appendWaitingForRoom((id, applied))
        }
    }

    /// The reply for an applied request, once durable.
    private static func reply(_ applied: Engine.Applied<ServerMessage>) async -> ServerMessage {
        do {
            return try await applied.durable()
        } catch {
            return .error(error)
        }
    }

    /// Writes the queued replies as their changes become durable: everything queued is taken at
    /// once; the log acknowledges in order, so once the newest is durable so are the others, and
    /// they leave in one write.
    private static func writeReplies(
        from queue: BatchQueue<(requestID: UInt32, applied: Engine.Applied<ServerMessage>)>,
        to outbound: Outbound
    ) async throws {
        while case let batch = try await queue.nextBatch(), !batch.isEmpty {
            var frames: [ServerFrame] = []
            frames.reserveCapacity(batch.count)
            for (id, applied) in batch.reversed() {
                frames.append(ServerFrame(requestID: id, message: await Self.reply(applied)))
            }
            try await outbound.write(contentsOf: frames.reversed())
        }
    }

    /// Writes a consumer's deliveries as they arrive, in batches of what is ready.
    private static func pump(_ consumer: DeliveryConsumer, to outbound: Outbound, attachID: UInt32) async throws {
        while let first = await consumer.next() {
            var frames = [ServerFrame(requestID: attachID, message: .delivery(WireDelivery(first)))]
            for delivery in consumer.poll(maximum: 255) {
                frames.append(ServerFrame(requestID: attachID, message: .delivery(WireDelivery(delivery))))
            }
            try await outbound.write(contentsOf: frames)
        }
    }

    private static func scope(_ scope: AttachScope) throws(FanoutError) -> ConsumerScope {
        switch scope {
        case .platform(let platform):
            return .platform(platform)
        case .installations(let registrations):
            var addresses: [RegistrationAddress] = []
            for (index, registration) in registrations.enumerated() {
                addresses.append(try RequestExecutor.address(registration, field: "registrations[\(index)]"))
            }
            return .installations(addresses)
        }
    }
}
