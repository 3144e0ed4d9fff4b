/// The topics of one project: topic -> subscriber `SlotSet` and slot -> topic ids.
///
/// Topics are interned to dense `UInt32` ids, created by the first subscription and dropped with
/// the last one (ids are recycled). The reverse map keeps each slot's topic ids, so that the
/// 2000-topic limit, "topics of an installation" and deletion do not scan the topics. Not
/// thread-safe: the engine serialises access.
struct TopicIndex {
    /// The most topics one installation may be subscribed to (FCM's limit).
    static let defaultMaximumTopicsPerInstallation = 2000

    private var idByName: [TopicName: UInt32] = [:]
    private var names: [TopicName?] = []
    private var subscribers: [SlotSet] = []
    private var freeIDs: [UInt32] = []
    /// `topicsBySlot[slot]`: the ids of the topics `slot` is subscribed to, unordered.
    private var topicsBySlot: [[UInt32]] = []
    private(set) var subscriptionCount = 0

    let maximumTopicsPerInstallation: Int

    init(maximumTopicsPerInstallation: Int = Self.defaultMaximumTopicsPerInstallation) {
        self.maximumTopicsPerInstallation = maximumTopicsPerInstallation
    }

    /// The number of topics with at least one subscriber.
    var topicCount: Int { self.idByName.count }

    // MARK: - Reads

    /// The subscribers of `topic` (empty when nobody is subscribed). A CoW copy: cheap to take.
    func subscribers(of topic: TopicName) -> SlotSet {
        guard let id = self.idByName[topic] else { return SlotSet() }
        return self.subscribers[Int(id)]
    }

    func subscriberCount(of topic: TopicName) -> Int {
        guard let id = self.idByName[topic] else { return 0 }
        return self.subscribers[Int(id)].count
    }

    func isSubscribed(_ slot: UInt32, to topic: TopicName) -> Bool {
        guard let id = self.idByName[topic] else { return false }
        return self.subscribers[Int(id)].contains(slot)
    }

    /// The topics `slot` is subscribed to, sorted by name.
    func topics(of slot: UInt32) -> [TopicName] {
        guard Int(slot) < self.topicsBySlot.count else { return [] }
        return self.topicsBySlot[Int(slot)].compactMap { self.names[Int($0)] }.sorted()
    }

    func topicCount(of slot: UInt32) -> Int {
        guard Int(slot) < self.topicsBySlot.count else { return 0 }
        return self.topicsBySlot[Int(slot)].count
    }

    /// Every topic with its subscriber count, sorted by name.
    func allTopics() -> [(name: TopicName, subscribers: Int)] {
        self.idByName.map { (name: $0.key, subscribers: self.subscribers[Int($0.value)].count) }
            .sorted { $0.name < $1.name }
    }

    // MARK: - Mutations

    /// Subscribes every slot of `slots` (in order) to `topic`. A slot already subscribed is fine.
    /// Returns, per slot, nil on success or `TOO_MANY_TOPICS`.
    mutating func subscribe(_ slots: [UInt32], to topic: TopicName) -> [FanoutError.Code?] {
        let id = self.id(creating: topic)
        var results = [FanoutError.Code?](repeating: nil, count: slots.count)
        for (position, slot) in slots.enumerated() {
            if self.subscribers[Int(id)].contains(slot) { continue }
            self.growReverseMap(to: slot)
            guard self.topicsBySlot[Int(slot)].count < self.maximumTopicsPerInstallation else {
                results[position] = .tooManyTopics
                continue
            }
            self.subscribers[Int(id)].insert(slot)
            self.topicsBySlot[Int(slot)].append(id)
            self.subscriptionCount += 1
        }
        self.dropIfEmpty(id)
        return results
    }

    /// Unsubscribes every slot of `slots` from `topic`. Not being subscribed is fine.
    mutating func unsubscribe(_ slots: [UInt32], from topic: TopicName) {
        guard let id = self.idByName[topic] else { return }
        for slot in slots where self.subscribers[Int(id)].remove(slot) {
            self.removeReverse(slot: slot, id: id)
        }
        self.dropIfEmpty(id)
    }

    /// Removes every subscription of `slot` (installation deleted).
    mutating func removeAll(of slot: UInt32) {
        guard Int(slot) < self.topicsBySlot.count else { return }
        let ids = self.topicsBySlot[Int(slot)]
        self.topicsBySlot[Int(slot)] = []
        for id in ids {
            self.subscribers[Int(id)].remove(slot)
            self.subscriptionCount -= 1
            self.dropIfEmpty(id)
        }
    }

    // MARK: - Helpers

    private mutating func id(creating topic: TopicName) -> UInt32 {
        if let id = self.idByName[topic] { return id }
        let id: UInt32
        if let free = self.freeIDs.popLast() {
            id = free
            self.names[Int(id)] = topic
        } else {
            id = UInt32(self.names.count)
            self.names.append(topic)
            self.subscribers.append(SlotSet())
        }
        self.idByName[topic] = id
        return id
    }

    private mutating func dropIfEmpty(_ id: UInt32) {
        guard self.subscribers[Int(id)].isEmpty, let name = self.names[Int(id)] else { return }
        self.idByName[name] = nil
        self.names[Int(id)] = nil
        self.subscribers[Int(id)] = SlotSet()
        self.freeIDs.append(id)
    }

    private mutating func removeReverse(slot: UInt32, id: UInt32) {
        if let position = self.topicsBySlot[Int(slot)].firstIndex(of: id) {
            self.topicsBySlot[Int(slot)].swapAt(position, self.topicsBySlot[Int(slot)].count - 1)
            self.topicsBySlot[Int(slot)].removeLast()
            self.subscriptionCount -= 1
        }
    }

    private mutating func growReverseMap(to slot: UInt32) {
        if Int(slot) >= self.topicsBySlot.count {
            self.topicsBySlot.append(contentsOf: repeatElement([], count: Int(slot) + 1 - self.topicsBySlot.count))
        }
    }

    // MARK: - Size

    /// Heap bytes held by subscriber sets and the reverse map (payloads and array headers, without
    /// allocator rounding): what the index costs per subscription.
    var payloadBytes: Int {
        let forward = self.subscribers.reduce(0) { $0 + $1.payloadBytes }
        let arrayHeader = 32
        let reverse = self.topicsBySlot.reduce(0) { $0 + ($1.capacity == 0 ? 0 : arrayHeader + $1.capacity * 4) }
        return forward + reverse + self.topicsBySlot.capacity * MemoryLayout<[UInt32]>.stride
    }
}
