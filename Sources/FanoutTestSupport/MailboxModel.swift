public import FanoutCore

/// FCM's mailbox rules written as plainly as possible: one array per installation.
public struct MailboxModel {
    public struct Item: Equatable {
        public var sequence: UInt64
        public var collapseKey: String?
        public var expiry: Int64
        public var isNowOrNever: Bool
        public var isMarker: Bool
        public var isInFlight = false

        public init(sequence: UInt64, collapseKey: String?, expiry: Int64, isNowOrNever: Bool, isMarker: Bool) {
            self.sequence = sequence
            self.collapseKey = collapseKey
            self.expiry = expiry
            self.isNowOrNever = isNowOrNever
            self.isMarker = isMarker
        }

        public var isCounted: Bool { !self.isMarker && self.collapseKey == nil && !self.isNowOrNever }
    }

    public struct Consumer {
        public var credit: Int
        public var held: Set<UInt64> = []
        public var received: [UInt64] = []

        public init(credit: Int) { self.credit = credit }
    }

    public struct Installation {
        public let fid: FID
        public let platform: Platform
        public var items: [Item] = []
        public var consumer: Consumer?

        public init(fid: FID, platform: Platform) {
            self.fid = fid
            self.platform = platform
        }
    }

    public var installations: [FID: Installation] = [:]
    public var maximumPendingSeen = 0
    public var exercised: [String: Int] = ["collapse": 0, "marker": 0, "ttl0-taken": 0]

    public init() {}

    public mutating func send(_ sequence: UInt64, to fids: [FID], collapseKey: String?, ttlSeconds: Int64?, now: Int64) {
        for fid in Set(fids) {
            guard var installation = self.installations[fid] else { continue }
            // `ttlSeconds` is `android.ttl`: iOS expires after 30 days, web push after 4 weeks (no `TTL` header given).
            let expiry = switch installation.platform {
            case .android: now + (ttlSeconds ?? 2_419_200) * 1000
            case .ios: now + 30 * 86_400_000
            case .web: now + 2_419_200 * 1000
            }
            let item = Item(sequence: sequence, collapseKey: collapseKey, expiry: expiry, isNowOrNever: expiry <= now, isMarker: false)
            if item.isNowOrNever {
                if var consumer = installation.consumer, consumer.held.count < consumer.credit {
                    var taken = item
                    taken.isInFlight = true
                    installation.items.append(taken)
                    consumer.held.insert(sequence)
                    consumer.received.append(sequence)
                    installation.consumer = consumer
                    self.exercised["ttl0-taken"]! += 1
                }
            } else if let collapseKey {
                let collapsible = installation.items.filter { !$0.isMarker && !$0.isNowOrNever && $0.collapseKey != nil }
                if let same = installation.items.firstIndex(where: { !$0.isMarker && !$0.isNowOrNever && $0.collapseKey == collapseKey }) {
                    installation.items.remove(at: same)
                    self.exercised["collapse"]! += 1
                } else if Set(collapsible.map(\.collapseKey)).count >= 4, let oldest = collapsible.first {
                    installation.items.removeAll { $0 == oldest }
                    self.exercised["collapse"]! += 1
                }
                installation.items.append(item)
            } else if installation.items.filter(\.isCounted).count >= 100 {
                installation.items.removeAll(where: \.isCounted)
                if !installation.items.contains(where: \.isMarker) {
                    var marker = item
                    marker.isMarker = true
                    installation.items.append(marker)
                }
                self.exercised["marker"]! += 1
            } else {
                installation.items.append(item)
            }
            self.maximumPendingSeen = max(self.maximumPendingSeen, installation.items.count)
            self.installations[fid] = Self.filled(installation, now: now)
        }
    }

    public static func filled(_ installation: Installation, now: Int64) -> Installation {
        guard var consumer = installation.consumer else { return installation }
        var installation = installation
        for index in installation.items.indices where !installation.items[index].isInFlight && installation.items[index].expiry > now {
            guard consumer.held.count < consumer.credit else { break }
            installation.items[index].isInFlight = true
            consumer.held.insert(installation.items[index].sequence)
            consumer.received.append(installation.items[index].sequence)
        }
        installation.consumer = consumer
        return installation
    }

    public mutating func attach(_ fid: FID, credit: Int, now: Int64) {
        self.installations[fid]!.consumer = Consumer(credit: credit)
        self.installations[fid] = Self.filled(self.installations[fid]!, now: now)
    }

    public mutating func acknowledge(_ fid: FID, _ sequences: [UInt64], now: Int64) {
        for sequence in sequences where self.installations[fid]!.consumer!.held.remove(sequence) != nil {
            self.installations[fid]!.items.removeAll { $0.sequence == sequence }
        }
        self.installations[fid] = Self.filled(self.installations[fid]!, now: now)
    }

    public mutating func detach(_ fid: FID) {
        guard let consumer = self.installations[fid]!.consumer else { return }
        for index in self.installations[fid]!.items.indices where consumer.held.contains(self.installations[fid]!.items[index].sequence) {
            self.installations[fid]!.items[index].isInFlight = false
        }
        self.installations[fid]!.consumer = nil
    }

    public mutating func expire(now: Int64) {
        for fid in self.installations.keys {
            self.installations[fid]!.items.removeAll { $0.expiry <= now }
        }
    }

    /// A device takes (and acknowledges) everything it can be handed now.
    public mutating func drain(_ fid: FID, now: Int64) {
        self.installations[fid]?.items.removeAll { !$0.isInFlight && $0.expiry > now }
    }

    /// After a restart: no consumers, nothing in flight, and TTL-0 deliveries gone.
    public mutating func restart() {
        for fid in self.installations.keys {
            self.installations[fid]!.consumer = nil
            self.installations[fid]!.items.removeAll(where: \.isNowOrNever)
            for index in self.installations[fid]!.items.indices { self.installations[fid]!.items[index].isInFlight = false }
        }
    }
}
