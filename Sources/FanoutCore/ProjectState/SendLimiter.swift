/// One project's send quotas in use (`SendQuota`): the project's arrival time and each recently
/// addressed device's two. Not logged and not in snapshots: a restart starts every quota full.
struct SendLimiter: Sendable {
    private let project: RateLimit?
    private let deviceMinute: RateLimit?
    private let deviceHour: RateLimit?
    private let quota: SendQuota
    private var projectArrival: Int64 = .min
    /// Arrival times of the devices sent to lately, by slot; pruned once they are in the past.
    private var devices: [UInt32: (minute: Int64, hour: Int64)] = [:]
    /// Prune `devices` when it grows past this.
    private var pruneAt = 1024

    /// Whether any device quota is on (else callers need not look the device up).
    var limitsDevices: Bool { self.deviceMinute != nil || self.deviceHour != nil }

    init(_ quota: SendQuota) {
        self.quota = quota
        self.project = RateLimit(quota.projectMessagesPerMinute, per: .seconds(60))
        self.deviceMinute = RateLimit(quota.deviceMessagesPerMinute, per: .seconds(60))
        self.deviceHour = RateLimit(quota.deviceMessagesPerHour, per: .seconds(3600))
    }

    /// Takes one message of the project's quota and, for a send to one device, of that device's;
    /// or takes nothing and throws.
    /// - Parameters:
    ///   - device: the slot the send addresses alone, if any; `field` names its input.
    /// - Throws: `RESOURCE_EXHAUSTED` with `retryAfter`; `field` set for a device's quota.
    mutating func take(device: UInt32?, field: String, in projectID: ProjectID, now: Timestamp) throws(FanoutError) {
        let now = now.millisecondsSinceEpoch.multipliedReportingOverflow(by: 1_000_000).partialValue
        if let project = self.project, let wait = project.wait(self.projectArrival, now: now) {
            let limit = self.quota.projectMessagesPerMinute ?? 0
            throw Self.exhausted("Quota exceeded: project \(projectID) may send \(limit) messages a minute", field: nil, wait: wait)
        }
        if let device, self.limitsDevices {
            let arrival = self.devices[device] ?? (.min, .min)
            if let limit = self.deviceMinute, let wait = limit.wait(arrival.minute, now: now) {
                let count = self.quota.deviceMessagesPerMinute ?? 0
                throw Self.exhausted("Device message rate exceeded: at most \(count) messages a minute to one device", field: field, wait: wait)
            }
            if let limit = self.deviceHour, let wait = limit.wait(arrival.hour, now: now) {
                let count = self.quota.deviceMessagesPerHour ?? 0
                throw Self.exhausted("Device message rate exceeded: at most \(count) messages an hour to one device", field: field, wait: wait)
            }
            self.devices[device] = (
                self.deviceMinute?.taking(arrival.minute, now: now) ?? .min,
                self.deviceHour?.taking(arrival.hour, now: now) ?? .min
            )
            if self.devices.count > self.pruneAt { self.prune(now: now) }
        }
        if let project = self.project { self.projectArrival = project.taking(self.projectArrival, now: now) }
    }

    /// Takes one message of the project's quota only, if there is one to take (a send refused as
    /// invalid still counts, as FCM counts 4xx errors).
    mutating func takeRefused(now: Timestamp) {
        let now = now.millisecondsSinceEpoch.multipliedReportingOverflow(by: 1_000_000).partialValue
        guard let project = self.project, project.wait(self.projectArrival, now: now) == nil else { return }
        self.projectArrival = project.taking(self.projectArrival, now: now)
    }

    /// Forgets a deleted installation's counts (its slot may be reused).
    mutating func forget(_ slot: UInt32) {
        self.devices[slot] = nil
    }

    /// Drops devices whose arrival times have passed (their quotas are full again), and lets the
    /// table grow to twice what is left before the next prune: amortised O(1) per send.
    private mutating func prune(now: Int64) {
        self.devices = self.devices.filter { $0.value.minute > now || $0.value.hour > now }
        self.pruneAt = max(1024, self.devices.count * 2)
    }

    private static func exhausted(_ message: String, field: String?, wait: Int64) -> FanoutError {
        let seconds = (wait + 999_999_999) / 1_000_000_000
        var error = FanoutError(.resourceExhausted, "\(message); retry after \(seconds) s", field: field)
        error.retryAfter = .seconds(seconds)
        return error
    }
}
