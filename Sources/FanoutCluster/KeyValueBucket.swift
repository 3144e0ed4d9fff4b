import CNATS
package import FanoutCore

/// A JetStream key-value bucket (libnats' `kvStore`): the cluster keeps its layout, its members
/// and its shards' owners in three of them (docs/scale-out.md). Blocking calls, like `JetStream`'s.
package final class KeyValueBucket: @unchecked Sendable {
    /// Kept open while the bucket is: the store lives on its connection.
    private let jetStream: JetStream
    private let store: OpaquePointer
    /// The context the store was opened on, when the bucket's requests have a wait of their own.
    private let context: OpaquePointer?
    package let name: String

    /// An entry: its value and the revision that wrote it.
    package struct Entry: Hashable, Sendable {
        package var value: [UInt8]
        package var revision: UInt64
    }

    /// Opens (creating it when missing) the bucket `name` with `replicas` copies, keeping one
    /// revision per key; with `ttl`, an entry is removed `ttl` after its last write. Each request
    /// waits at most `requestWait` for its answer (JetStream's default: 5 s).
    package init(_ jetStream: JetStream, name: String, ttl: Duration? = nil, replicas: Int = 1, requestWait: Duration? = nil) throws(FanoutError) {
        var context: OpaquePointer? = nil
        if let requestWait { context = try jetStream.makeContext(wait: requestWait) }
        var configuration = kvConfig()
        kvConfig_Init(&configuration)
        var store: OpaquePointer?
        let status = name.withCString { bucket in
            configuration.Bucket = bucket
            configuration.History = 1
            if let ttl { configuration.TTL = ttl.nanoseconds }
            configuration.Replicas = Int32(replicas)
            return js_CreateKeyValue(&store, context ?? jetStream.context, &configuration)
        }
        guard status == NATS_OK, let store else {
            if let context { jsCtx_Destroy(context) }
            throw JetStream.error("cannot open the key-value bucket \(name)", status)
        }
        self.jetStream = jetStream
        self.store = store
        self.context = context
        self.name = name
    }

    /// Opens the bucket `name` as it exists, whatever its configuration.
    /// - Throws: `UNAVAILABLE` when it does not exist or NATS does not answer.
    package init(_ jetStream: JetStream, existing name: String) throws(FanoutError) {
        var store: OpaquePointer?
        let status = js_KeyValue(&store, jetStream.context, name)
        guard status == NATS_OK, let store else { throw JetStream.error("cannot open the key-value bucket \(name)", status) }
        self.jetStream = jetStream
        self.store = store
        self.context = nil
        self.name = name
    }

    deinit {
        kvStore_Destroy(self.store)
        if let context = self.context { jsCtx_Destroy(context) }
    }

    /// The entry at `key`, or nil when there is none (never written, deleted or expired).
    package func entry(_ key: String) throws(FanoutError) -> Entry? {
        var entry: OpaquePointer?
        let status = kvStore_Get(&entry, self.store, key)
        defer { kvEntry_Destroy(entry) }
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let entry else { throw JetStream.error("cannot read \(key) in \(self.name)", status) }
        let count = Int(kvEntry_ValueLen(entry))
        let value = kvEntry_Value(entry).map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
        return Entry(value: value, revision: kvEntry_Revision(entry))
    }

    /// Writes `value` at `key` only if the key has no entry; its revision, or nil when it has one.
    package func create(_ key: String, _ value: [UInt8]) throws(FanoutError) -> UInt64? {
        var revision: UInt64 = 0
        let status = value.withUnsafeBytes { kvStore_Create(&revision, self.store, key, $0.baseAddress, Int32($0.count)) }
        if status == NATS_OK { return revision }
        // Refused because the key has an entry, or NATS failed: a read says which.
        if try self.entry(key) != nil { return nil }
        throw JetStream.error("cannot create \(key) in \(self.name)", status)
    }

    /// Writes `value` at `key` only if the key's last write is `revision`; the new revision, or
    /// nil when the key moved on (or has no entry). When it moved on to `value` itself, its
    /// revision: the write was applied and its answer lost (a timeout on a slow server).
    package func update(_ key: String, _ value: [UInt8], at revision: UInt64) throws(FanoutError) -> UInt64? {
        var written: UInt64 = 0
        let status = value.withUnsafeBytes { kvStore_Update(&written, self.store, key, $0.baseAddress, Int32($0.count), revision) }
        if status == NATS_OK { return written }
        // Refused because the key moved on, or NATS failed (or the write was applied and its
        // answer lost): a read says which.
        guard let current = try self.entry(key) else { return nil }
        if current.revision != revision, current.value == value { return current.revision }
        if current.revision != revision { return nil }
        throw JetStream.error("cannot update \(key) in \(self.name)", status)
    }

    /// Writes `value` at `key` whatever was there; the new revision.
    @discardableResult
    package func put(_ key: String, _ value: [UInt8]) throws(FanoutError) -> UInt64 {
        var revision: UInt64 = 0
        let status = value.withUnsafeBytes { kvStore_Put(&revision, self.store, key, $0.baseAddress, Int32($0.count)) }
        guard status == NATS_OK else { throw JetStream.error("cannot write \(key) in \(self.name)", status) }
        return revision
    }

    /// The keys that have an entry, in no particular order. libnats reads them through a
    /// consumer it creates on the bucket's stream for the call.
    package func keys() throws(FanoutError) -> [String] {
        var list = kvKeysList()
        let status = kvStore_Keys(&list, self.store, nil)
        defer { kvKeysList_Destroy(&list) }
        if status == NATS_NOT_FOUND { return [] }
        guard status == NATS_OK else { throw JetStream.error("cannot list the keys of \(self.name)", status) }
        return (0..<Int(list.Count)).compactMap { list.Keys[$0].map { String(cString: $0) } }
    }

    /// The keys that have an entry, in no particular order, read in one request to the bucket's
    /// stream (the subjects it holds messages on) that waits `timeout` at most, where `keys()`
    /// creates a consumer and waits JetStream's default 5 s: for a bucket whose keys are only
    /// written and expire (the members'), since a key deleted or purged keeps a marker, which this
    /// counts as an entry.
    package func writtenKeys(timeout: Duration) throws(FanoutError) -> [String] {
        let prefix = "$KV.\(self.name)."
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Wait = max(1, timeout.wholeMilliseconds)
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var code = jsErrCode(rawValue: 0)
        let status = "\(prefix)>".withCString { filter in
            options.Stream.Info.SubjectsFilter = filter
            return js_GetStreamInfo(&info, self.jetStream.context, "KV_\(self.name)", &options, &code)
        }
        defer { jsStreamInfo_Destroy(info) }
        guard status == NATS_OK, let info else { throw JetStream.error("cannot list the keys of \(self.name)", status, code) }
        guard let subjects = info.pointee.State.Subjects else { return [] }
        return UnsafeBufferPointer(start: subjects.pointee.List, count: Int(subjects.pointee.Count)).compactMap { subject in
            guard subject.Msgs > 0, let name = subject.Subject.map({ String(cString: $0) }), name.hasPrefix(prefix) else { return nil }
            return String(name.dropFirst(prefix.count))
        }
    }
}
