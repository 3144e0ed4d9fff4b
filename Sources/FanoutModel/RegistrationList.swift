/// The registrations of a batch request (strings that should each be a FID or a registration
/// token, as FCM's topic API takes them), packed: their bytes back to back in one buffer. A
/// thousand 163-byte tokens cost two allocations instead of a thousand strings, and reach the
/// registry's hash index as the bytes the frame carried.
///
/// A collection of `String` (each made when read), so `for registration in list` works; hot paths
/// read `withBytes(at:_:)` instead.
public struct RegistrationList: RandomAccessCollection, Hashable, Sendable, ExpressibleByArrayLiteral {
    /// Every registration's bytes, one after another.
    @usableFromInline var bytes: [UInt8] = []
    /// Where each registration ends in `bytes`.
    @usableFromInline var ends: [UInt32] = []
    /// Whether every registration is known to be visible ASCII (`ASCII.isVisibleBytes`): the
    /// wire's decoder checks each one, and then a batch need not look at the bytes again to tell
    /// a token from an invalid item. Not part of the list's value.
    @usableFromInline package private(set) var isKnownVisibleASCII = true

    @inlinable
    public init() {}

    /// Inlinable: unspecialized, the generic walk allocated twice per string.
    @inlinable
    public init(_ registrations: some Collection<String>) {
        self.reserveCapacity(registrations.count, bytes: registrations.reduce(0) { $0 + $1.utf8.count })
        for registration in registrations { self.append(registration) }
    }

    public init(arrayLiteral registrations: String...) {
        self.init(registrations)
    }

    @inlinable
    public mutating func append(_ registration: String) {
        self.bytes.append(contentsOf: registration.utf8)
        self.ends.append(UInt32(self.bytes.count))
        self.isKnownVisibleASCII = false
    }

    /// Appends a registration given as its UTF-8 bytes (a decoder's). Inlinable, as the rest of
    /// the list's hot calls: from another module, generic code runs unspecialized.
    @inlinable
    public mutating func append(bytes: some Collection<UInt8>) {
        self.bytes.append(contentsOf: bytes)
        self.ends.append(UInt32(self.bytes.count))
        self.isKnownVisibleASCII = false
    }

    /// Appends a registration whose bytes the caller found to be visible ASCII.
    @inlinable
    package mutating func append(visibleASCII bytes: UnsafeRawBufferPointer) {
        self.bytes.append(contentsOf: bytes)
        self.ends.append(UInt32(self.bytes.count))
    }

    /// Makes room for `count` more registrations of `bytes` bytes in all.
    @inlinable
    public mutating func reserveCapacity(_ count: Int, bytes: Int) {
        self.ends.reserveCapacity(self.ends.count + count)
        self.bytes.reserveCapacity(self.bytes.count + bytes)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { self.ends.count }

    /// The registration at `position` as a `String`.
    public subscript(position: Int) -> String {
        self.withBytes(at: position) { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the bytes of the registration at `position`, in place.
    @inlinable
    public func withBytes<Result>(at position: Int, _ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        let range = self.byteRange(at: position)
        return try self.bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// The bytes of all the registrations together.
    public var totalByteCount: Int { Int(self.ends.last ?? 0) }

    /// The byte count of the registration at `position`.
    public func byteCount(at position: Int) -> Int {
        self.byteRange(at: position).count
    }

    /// Calls `body` with every registration's bytes, back to back (`byteRange(at:)` says where each is).
    package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try self.bytes.withUnsafeBytes(body)
    }

    /// Where the registration at `position` is in the list's bytes.
    @inlinable
    package func byteRange(at position: Int) -> Range<Int> {
        (position == 0 ? 0 : Int(self.ends[position - 1]))..<Int(self.ends[position])
    }
}

extension RegistrationList {
    /// The same registrations, whatever is known of them.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.ends == rhs.ends && lhs.bytes == rhs.bytes
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.ends)
        hasher.combine(self.bytes)
    }
}
