import Synchronization

/// A count shared by tasks (an `Atomic` that closures can capture).
final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    /// Adds `amount`; returns the value before.
    @discardableResult
    func add(_ amount: Int = 1) -> Int {
        self.value.wrappingAdd(amount, ordering: .relaxed).oldValue
    }

    var current: Int { self.value.load(ordering: .relaxed) }
}
