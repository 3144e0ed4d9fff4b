public import FanoutCore
import FanoutTestSupport
import Foundation

/// The data of a run, the same for every system it drives and derived from the seed alone:
/// installations (a FID, a 163-byte registration token, a platform and an app), topics whose
/// popularity follows Zipf's law (topic of rank r has about `installations * share / r`
/// subscribers), and the conditions sends go to.
public struct LoadWorkload: Sendable {
    public let seed: UInt64
    public let installations: Int
    public let topics: Int
    /// The share of all installations subscribed to the most popular topic.
    public let headShare: Double
    /// The installations' FIDs and first tokens, made once before any phase: every phase of every
    /// system sends them (a token about four times), and making one costs more than sending it,
    /// so a harness making them during a phase would measure itself as much as the server.
    private let fids: [String]
    private let tokens: [String]

    /// `withBatchInstallations`: make `batchInstallations`' FIDs and tokens too (for a run that
    /// registers them); otherwise they are made when asked for.
    public init(seed: UInt64, installations: Int, topics: Int, headShare: Double = 0.5, withBatchInstallations: Bool = false) {
        self.seed = seed
        self.installations = max(1, installations)
        self.topics = max(1, topics)
        self.headShare = headShare
        let made = withBatchInstallations ? 2 * self.installations : self.installations
        let fids = (0..<made).map { Self.makeFID(seed: seed, index: $0) }
        self.fids = fids
        self.tokens = fids.indices.map { Self.makeToken(seed: seed, index: $0, fid: fids[$0], generation: 0) }
    }

    // MARK: Installations

    /// The installations `register-batch` registers: as many again, past the workload's.
    public var batchInstallations: Range<Int> { self.installations..<2 * self.installations }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static func random(seed: UInt64, _ index: Int, _ stream: UInt64) -> SeededRandomNumberGenerator {
        SeededRandomNumberGenerator(seed: seed &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(index) &* 0xBF58_476D_1CE4_E5B9 ^ stream)
    }

    private func random(_ index: Int, _ stream: UInt64) -> SeededRandomNumberGenerator {
        Self.random(seed: self.seed, index, stream)
    }

    private static func text(_ count: Int, using random: inout SeededRandomNumberGenerator) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        for _ in 0..<count {
            bytes.append(Self.alphabet[Int(random.next() & 63)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The installation's Firebase Installation ID: 22 characters, the first one of `cdef`.
    public func fid(_ index: Int) -> String {
        index < self.fids.count ? self.fids[index] : Self.makeFID(seed: self.seed, index: index)
    }

    /// The installation's registration token (163 bytes, shaped as FCM's: the FID, `:APA91b`,
    /// then 135 characters); `generation` > 0 gives the token after that many refreshes.
    public func token(_ index: Int, generation: Int = 0) -> String {
        if generation == 0, index < self.tokens.count { return self.tokens[index] }
        return Self.makeToken(seed: self.seed, index: index, fid: self.fid(index), generation: generation)
    }

    private static func makeFID(seed: UInt64, index: Int) -> String {
        var random = Self.random(seed: seed, index, 1)
        let first = ["c", "d", "e", "f"][Int(random.next() & 3)]
        return first + Self.text(21, using: &random)
    }

    private static func makeToken(seed: UInt64, index: Int, fid: String, generation: Int) -> String {
        var random = Self.random(seed: seed, index, 2 &+ UInt64(generation) << 8)
        return fid + ":APA91b" + Self.text(163 - 22 - 7, using: &random)
    }

    /// Android for six in ten, iOS for three, web for one.
    public func platform(_ index: Int) -> Platform {
        var random = self.random(index, 3)
        switch random.next() % 10 {
        case 0..<6: return .android
        case 6..<9: return .ios
        default: return .web
        }
    }

    public static func appID(for platform: Platform) -> String {
        switch platform {
        case .android: "1:1234567890:android:0a1b2c3d4e5f"
        case .ios: "1:1234567890:ios:0a1b2c3d4e5f"
        case .web: "1:1234567890:web:0a1b2c3d4e5f"
        }
    }

    // MARK: Topics

    /// Ranks start at 1 (the most popular topic).
    public func topicName(_ rank: Int) -> String {
        "topic-\(rank)"
    }

    public func subscriberCount(ofRank rank: Int) -> Int {
        max(1, min(self.installations, Int(Double(self.installations) * self.headShare / Double(rank))))
    }

    /// Every subscription of the run.
    public var subscriptionCount: Int {
        (1...self.topics).reduce(0) { $0 + self.subscriberCount(ofRank: $1) }
    }

    /// The installations subscribed to the topic: distinct indices, `offset + k * stride` modulo
    /// the number of installations, with a stride coprime to it.
    public func subscribers(ofRank rank: Int) -> [Int] {
        var random = self.random(rank, 4)
        let n = self.installations
        let offset = Int(random.next() % UInt64(n))
        var stride = Int(random.next() % UInt64(n)) | 1
        while Self.gcd(stride, n) != 1 {
            stride = (stride + 2) % n
            if stride == 0 { stride = 1 }
        }
        return (0..<self.subscriberCount(ofRank: rank)).map { (offset + $0 * stride) % n }
    }

    private static func gcd(_ a: Int, _ b: Int) -> Int {
        b == 0 ? a : Self.gcd(b, a % b)
    }

    /// The subscriptions in batches of at most `size` installations, each batch for one topic.
    public func subscriptionBatches(size: Int = 1000) -> [(rank: Int, members: ArraySlice<Int>)] {
        var batches: [(Int, ArraySlice<Int>)] = []
        for rank in 1...self.topics {
            let members = self.subscribers(ofRank: rank)
            var start = 0
            while start < members.count {
                batches.append((rank, members[start..<min(start + size, members.count)]))
                start += size
            }
        }
        return batches
    }

    // MARK: Sends

    /// The topic of the `index`th send: popular topics get most sends (rank r with probability
    /// proportional to 1/r).
    public func sendRank(_ index: Int) -> Int {
        var random = self.random(index, 5)
        let harmonic = (1...self.topics).reduce(0.0) { $0 + 1 / Double($1) }
        var target = Double(random.next() >> 11) / Double(1 << 53) * harmonic
        for rank in 1...self.topics {
            target -= 1 / Double(rank)
            if target <= 0 { return rank }
        }
        return self.topics
    }

    /// The condition of the `index`th condition send: `'A' in topics && ('B' in topics || 'C' in
    /// topics)` over three distinct topics among the twenty most popular.
    public func condition(_ index: Int) -> LoadCondition {
        var random = self.random(index, 6)
        let pool = min(20, self.topics)
        var ranks: [Int] = []
        while ranks.count < min(3, pool) {
            let rank = 1 + Int(random.next() % UInt64(pool))
            if !ranks.contains(rank) { ranks.append(rank) }
        }
        while ranks.count < 3 { ranks.append(ranks[0]) }
        return LoadCondition(all: self.topicName(ranks[0]), anyOf: [self.topicName(ranks[1]), self.topicName(ranks[2])])
    }

    /// The body of a send: about 300 bytes of data and notification, as a typical alert.
    public static func messageBody(target: String) -> String {
        #"{"message":{\#(target),"notification":{"title":"Your order has shipped","body":"Order 1234-5678 left the warehouse and arrives on Tuesday."},"data":{"order":"1234-5678","kind":"shipping","deeplink":"shop://orders/1234-5678"},"android":{"priority":"high","ttl":"3600s"}}}"#
    }
}

/// `'all' in topics && ('anyOf[0]' in topics || 'anyOf[1]' in topics)`.
public struct LoadCondition: Hashable, Sendable {
    public var all: String
    public var anyOf: [String]

    public var expression: String {
        "'\(self.all)' in topics && (" + self.anyOf.map { "'\($0)' in topics" }.joined(separator: " || ") + ")"
    }
}
