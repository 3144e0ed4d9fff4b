extension Engine {
    // MARK: - Sends

    /// Sends an FCM HTTP v1 body (`{"validate_only":..., "message":{...}}` or a bare message):
    /// validates it, resolves its target and puts one delivery per recipient in their mailboxes;
    /// returns once the send is as durable as the engine's durability says. Consumers receive its
    /// deliveries only from then on.
    ///
    /// Installations without a registration token get no delivery, nor stale ones when `options`
    /// says to skip them; the result counts them per platform, and explains each refused
    /// recipient of a token, FID or multicast target. With `validate_only` nothing is resolved or
    /// changed, the id is FCM's `fake_message_id`, and the result reports each platform's rendered
    /// size against its limit.
    /// - Throws: `INVALID_ARGUMENT` with every violation (`FanoutError.violations`) for a message
    ///   FCM would refuse; `NOT_FOUND` for an unknown project.
    @discardableResult
    public func send(_ body: [UInt8], in project: ProjectID = .default, options: SendOptions = SendOptions()) async throws(FanoutError) -> SendResult {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.send(body, in: project, options: options) }.durable()
    }

    // MARK: - Deliveries

    /// The deliveries waiting for an installation, oldest first, including those a consumer holds
    /// unacknowledged (`isInFlight`). Expired ones are not listed (a sweep removes them).
    public func pendingDeliveries(for address: RegistrationAddress, in project: ProjectID = .default) throws(FanoutError) -> [Delivery] {
        let now = self.clock.now()
        return try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.pendingDeliveries(of: try state.slot(for: address), now: now)
        }
    }

    /// Removes every delivery whose TTL has run out by the clock's now; returns how many. A server
    /// calls this periodically; tests call it after moving their clock.
    @discardableResult
    public func expireDeliveries(in project: ProjectID = .default) async throws(FanoutError) -> Int {
        try await self.apply { (changes: inout Changes) throws(FanoutError) in try changes.expireDeliveries(in: project) }.durable()
    }

    /// Delivery counts of a project since the engine opened, and what is pending now.
    public func deliveryStatistics(in project: ProjectID = .default) throws(FanoutError) -> DeliveryStatistics {
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in state.deliveries.statistics }
    }

    // MARK: - Consumers

    /// Attaches a consumer. It receives the backlog first, then deliveries as they are enqueued,
    /// never holding more than `credit` unacknowledged; what it holds when it detaches is delivered
    /// again (at-least-once).
    /// - Throws: `INVALID_ARGUMENT` for a credit outside 1...65536 or a bad installation list;
    ///   `NOT_FOUND` / `UNREGISTERED` for an unknown installation or project; `UNAVAILABLE` once
    ///   the engine is closed (its consumers were finished, and its acknowledgements would fail).
    public func attachConsumer(_ scope: ConsumerScope, credit: Int, in project: ProjectID = .default) throws(FanoutError) -> DeliveryConsumer {
        let sink = DeliverySink()
        let now = self.clock.now()
        let id = try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            // Checked under the project's lock: `close` finishes the consumers after it lets go
            // of the directory, so one attached before that is finished with the others.
            guard !self.isClosed else { throw FanoutError(.unavailable, "the engine is closed") }
            return try state.attachConsumer(scope, credit: credit, sink: sink, now: now)
        }
        return DeliveryConsumer(engine: self, project: project, id: id, sink: sink)
    }

    func grant(_ credit: Int, consumer: UInt64, in project: ProjectID) throws(FanoutError) {
        let now = self.clock.now()
        try self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            try state.grant(credit, to: consumer, now: now)
        }
    }

    func detach(consumer: UInt64, in project: ProjectID) {
        let now = self.clock.now()
        try? self.withProject(project) { (state: inout ProjectState) throws(FanoutError) in
            state.detachConsumer(consumer, now: now)
        }
    }

    /// Ends every consumer's stream (on close).
    func finishConsumers() {
        for box in self.projects.withLock({ Array($0.values) }) {
            box.state.withLock { $0.finishConsumers() }
        }
    }
}
