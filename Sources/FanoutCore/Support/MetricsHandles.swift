public import Synchronization

/// swift-metrics handles made once per key and shared (the labels of a request, a project's
/// gauge): making one goes through the metrics backend's registry, so callers keep them here.
///
/// Public with `package` members, as `Locked` is, so that the lookup is specialized in the
/// modules that call it (unspecialized, it was 1.5-2% of fanoutd's samples while it registered).
public final class MetricsHandles<Key: Hashable & Sendable, Handle: Sendable>: Sendable {
    @usableFromInline
    let handles = Mutex<[Key: Handle]>([:])

    package init() {}

    /// The handle of `key`, made by `make` the first time.
    @inlinable
    package func handle(_ key: Key, make: () -> Handle) -> Handle {
        self.handles.withLock { handles in
            if let handle = handles[key] { return handle }
            let handle = make()
            handles[key] = handle
            return handle
        }
    }

    /// Forgets `key`'s handle; returns it.
    package func remove(_ key: Key) -> Handle? {
        self.handles.withLock { $0.removeValue(forKey: key) }
    }

    /// Forgets every handle; returns them.
    package func removeAll() -> [Handle] {
        self.handles.withLock { handles in
            defer { handles.removeAll() }
            return Array(handles.values)
        }
    }
}
