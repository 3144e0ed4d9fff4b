import Glibc

/// An array whose storage grows with `realloc`, for the registry's records: an `Array` that
/// outgrows its block copies every element into a fresh one, and glibc moves a large block's
/// pages to its new place (`mremap`) without touching them. Copy on write, as `Array` is.
///
/// `Element` must be movable bit for bit (no weak references), as Swift's own types are, and
/// aligned to at most 16 bytes (what `malloc` gives).
struct ReallocatedArray<Element>: RandomAccessCollection, MutableCollection, @unchecked Sendable {
    /// The block, shared by copies until one of them changes it.
    private final class Storage {
        var base: UnsafeMutablePointer<Element>?
        var count = 0
        var capacity = 0

        deinit {
            self.base?.deinitialize(count: self.count)
            free(self.base)
        }

        /// A storage of its own with the same elements and `capacity` room.
        func copy(capacity: Int) -> Storage {
            let copy = Storage()
            copy.reallocate(capacity: capacity)
            copy.base?.initialize(from: self.base.unsafelyUnwrapped, count: self.count)
            copy.count = self.count
            return copy
        }

        /// Moves the elements to a block with room for `capacity` (at least `count`).
        func reallocate(capacity: Int) {
            guard capacity > 0 else { return }
            let bytes = capacity * MemoryLayout<Element>.stride
            guard let block = realloc(self.base, bytes) else {
                // As `Array` does when the allocator has no memory left.
                fatalError("out of memory: \(bytes) bytes for a ReallocatedArray")
            }
            self.base = block.bindMemory(to: Element.self, capacity: capacity)
            self.capacity = capacity
        }
    }

    private var storage = Storage()

    init() {
        assert(MemoryLayout<Element>.alignment <= 16)
    }

    init(repeating element: Element, count: Int) {
        self.init()
        self.storage.reallocate(capacity: count)
        self.storage.base?.initialize(repeating: element, count: count)
        self.storage.count = count
    }

    var startIndex: Int { 0 }
    var endIndex: Int { self.storage.count }

    subscript(position: Int) -> Element {
        get {
            precondition(position >= 0 && position < self.storage.count, "index out of range")
            return self.storage.base.unsafelyUnwrapped[position]
        }
        _modify {
            precondition(position >= 0 && position < self.storage.count, "index out of range")
            self.makeUnique()
            yield &self.storage.base.unsafelyUnwrapped[position]
        }
    }

    /// Adds `element` at the end, doubling the block when it is full.
    mutating func append(_ element: consuming Element) {
        self.makeUnique()
        if self.storage.count == self.storage.capacity {
            self.storage.reallocate(capacity: Swift.max(16, self.storage.capacity * 2))
        }
        (self.storage.base.unsafelyUnwrapped + self.storage.count).initialize(to: element)
        self.storage.count += 1
    }

    func withUnsafeBufferPointer<Result, Failure>(
        _ body: (UnsafeBufferPointer<Element>) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let storage = self.storage
        defer { withExtendedLifetime(storage) {} }
        return try body(UnsafeBufferPointer(start: storage.base, count: storage.count))
    }

    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&self.storage) {
            self.storage = self.storage.copy(capacity: self.storage.capacity)
        }
    }
}
