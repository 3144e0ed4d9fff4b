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
    /// For each slot, the ids of the topics it is subscribed to.
    private var topicsBySlot = SlotTopicLists()
    private(set) var subscriptionCount = 0

    let maximumTopicsPerInstallation: Int

    /// - Parameter maximumTopicsPerInstallation: clamped to 0...65535 (the reverse map counts in 16 bits).
    init(maximumTopicsPerInstallation: Int = Self.defaultMaximumTopicsPerInstallation) {
        self.maximumTopicsPerInstallation = min(max(maximumTopicsPerInstallation, 0), Int(UInt16.max))
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
        self.topicsBySlot.ids(of: slot).compactMap { self.names[Int($0)] }.sorted()
    }

    func topicCount(of slot: UInt32) -> Int {
        self.topicsBySlot.count(of: slot)
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
        // The slots with room for another topic (each slot's list entry is a cache miss of its
        // own: asked for ahead).
        var admitted: [UInt32] = []
        admitted.reserveCapacity(slots.count)
        for (position, slot) in slots.enumerated() {
            if position + 16 < slots.count { self.topicsBySlot.prefetchEntry(of: slots[position + 16]) }
            if self.topicsBySlot.count(of: slot) < self.maximumTopicsPerInstallation {
                admitted.append(slot)
            } else if !self.subscribers[Int(id)].contains(slot) {
                results[position] = .tooManyTopics
            }
        }
        // All at once into the topic's set, then the topic into the list of each slot it gained
        // (each has room: the limit is at most what a list holds).
        let added = self.subscribers[Int(id)].insert(contentsOf: admitted)
        _ = self.topicsBySlot.append(id, toEach: added)
        self.subscriptionCount += added.count
        self.dropIfEmpty(id)
        return results
    }

    /// Loads a topic that has no subscribers yet with `slots` (strictly ascending) in bulk, as a
    /// snapshot restores it; returns false (changing nothing) when the topic already exists or a
    /// slot would pass the per-installation limit.
    mutating func restore(_ slots: [UInt32], to topic: TopicName) -> Bool {
        guard self.idByName[topic] == nil,
            slots.allSatisfy({ self.topicsBySlot.count(of: $0) < self.maximumTopicsPerInstallation })
        else { return false }
        guard !slots.isEmpty else { return true }
        let id = self.id(creating: topic)
        self.subscribers[Int(id)] = SlotSet(sortedUnique: slots)
        for slot in slots { self.topicsBySlot.append(id, to: slot) }
        self.subscriptionCount += slots.count
        return true
    }

    /// Unsubscribes every slot of `slots` from `topic`. Not being subscribed is fine.
    mutating func unsubscribe(_ slots: [UInt32], from topic: TopicName) {
        guard let id = self.idByName[topic] else { return }
        for slot in slots where self.subscribers[Int(id)].remove(slot) {
            _ = self.topicsBySlot.remove(id, from: slot)
            self.subscriptionCount -= 1
        }
        self.dropIfEmpty(id)
    }

    /// Removes every subscription of `slot` (installation deleted).
    mutating func removeAll(of slot: UInt32) {
        for id in self.topicsBySlot.removeAll(of: slot) {
            self.subscribers[Int(id)].remove(slot)
            self.subscriptionCount -= 1
            self.dropIfEmpty(id)
        }
    }

    // MARK: - Replay

    /// Adds `slots` to `topic`'s set as a logged subscription is replayed: without the
    /// per-installation limit, which admitted them when the record was logged (the limit may have
    /// been lowered since; nothing acknowledged is dropped). Returns the topic's id and the slots
    /// it gained, whose reverse-list entries are still to be made: `appendReplayed`, or on another
    /// thread (`takeReverseLists`).
    mutating func insertReplayed(_ slots: [UInt32], into topic: TopicName) -> (id: UInt32, added: [UInt32]) {
        let id = self.id(creating: topic)
        let added = self.subscribers[Int(id)].insert(contentsOf: slots)
        self.subscriptionCount += added.count
        self.dropIfEmpty(id)
        return (id, added)
    }

    /// Makes the reverse-list entries of the slots a replayed subscription added to topic `id`.
    /// - Returns: the first slot whose list is full (65535 topics, which no log this engine wrote
    ///   holds), with no entry made for it or after it; nil when all were made.
    mutating func appendReplayed(_ id: UInt32, to added: [UInt32]) -> UInt32? {
        self.topicsBySlot.append(id, toEach: added)
    }

    /// Takes the reverse lists out, for another thread to make a replay's entries in while this
    /// one goes on with the sets (`insertReplayed`): until `restoreReverseLists`, the index holds
    /// empty lists, and nothing but `insertReplayed` may be called on it.
    mutating func takeReverseLists() -> SlotTopicLists {
        var lists = SlotTopicLists()
        swap(&lists, &self.topicsBySlot)
        return lists
    }

    /// Puts back the reverse lists `takeReverseLists` took, with the entries made since.
    mutating func restoreReverseLists(_ lists: SlotTopicLists) {
        self.topicsBySlot = lists
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
}
