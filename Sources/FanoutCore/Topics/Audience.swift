/// The installations a target reaches now (a topic's subscribers, a condition's, a user's
/// devices), as `Engine.audience(of:)` resolved them. Copy-on-write: holding one is cheap, and it
/// does not change when the index does.
public struct Audience: Hashable, Sendable {
    /// The installations' slots, as the topic index holds them (tests and benchmarks only).
    @_spi(Storage) public let slotSet: SlotSet

    @_spi(Storage)
    public init(_ slotSet: SlotSet) {
        self.slotSet = slotSet
    }

    /// How many installations.
    public var count: Int { self.slotSet.count }

    public var isEmpty: Bool { self.slotSet.isEmpty }

    /// The slots, ascending (tests and benchmarks only).
    @_spi(Storage) public var slots: [UInt32] { self.slotSet.slots }
}
