import Histogram
/// One phase of a scenario on one system, as reported.
public struct PhaseResult: Codable, Sendable {
    /// `fanout` or `redis`.
    public var system: String
    public var phase: String
    /// What an item is in this phase: `registrations`, `subscriptions`, `recipients`, ...
    public var itemName: String
    public var operations: Int
    public var items: Int
    public var seconds: Double
    public var operationsPerSecond: Double
    public var itemsPerSecond: Double
    /// Microseconds.
    public var latency: Latency
    public var errors: [String: Int]
    /// Tries sent again after `UNAVAILABLE` (the send phases retry as firebase-admin does).
    public var retries: Int
    /// The server's CPU time in the phase over its wall time (1.0 = one core busy).
    public var serverCPU: Double?
    /// The harness's own CPU time in the phase over its wall time.
    public var harnessCPU: Double?
    /// The server's resident memory at the end of the phase, bytes.
    public var serverResidentBytes: Int?
    /// The round it ran in, with `compare --rounds N` (N > 1).
    public var round: Int?

    public struct Latency: Codable, Sendable {
        public var p50: UInt64
        public var p90: UInt64
        public var p99: UInt64
        public var p999: UInt64
        public var max: UInt64
    }

    public init(system: String, phase: String, itemName: String, recorder: PhaseRecorder, elapsed: Duration, cpuSeconds: Double?, harnessCPUSeconds: Double? = nil, residentBytes: Int?) {
        let seconds = elapsed / .seconds(1)
        self.system = system
        self.phase = phase
        self.itemName = itemName
        self.operations = recorder.operations
        self.items = recorder.items
        self.seconds = seconds
        self.operationsPerSecond = seconds > 0 ? Double(recorder.operations) / seconds : 0
        self.itemsPerSecond = seconds > 0 ? Double(recorder.items) / seconds : 0
        let histogram = recorder.latencies
        self.latency = Latency(
            p50: histogram.valueAtPercentile(50),
            p90: histogram.valueAtPercentile(90),
            p99: histogram.valueAtPercentile(99),
            p999: histogram.valueAtPercentile(99.9),
            max: histogram.max
        )
        self.errors = recorder.errors
        self.retries = recorder.retries
        self.serverCPU = cpuSeconds.map { seconds > 0 ? $0 / seconds : 0 }
        self.harnessCPU = harnessCPUSeconds.map { seconds > 0 ? $0 / seconds : 0 }
        self.serverResidentBytes = residentBytes
    }
}
