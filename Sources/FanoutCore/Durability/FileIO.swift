import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The few POSIX file operations the log needs, with errors that name the file (and the fault
/// injection of `FileFaults`). A cluster node's shard directories use them too.
package enum FileIO {
    package struct Error: Swift.Error, CustomStringConvertible {
        var operation: String
        var path: String
        var code: Int32
        package var description: String { "\(self.operation) \(self.path): \(String(cString: strerror(self.code)))" }
    }

    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws(Error) -> Int32 {
        if flags & (O_WRONLY | O_RDWR | O_CREAT) != 0 { try FileFaults.check(.open, path) }
        while true {
            let descriptor = Glibc.open(path, flags | O_CLOEXEC, mode)
            if descriptor >= 0 { return descriptor }
            if errno != EINTR { throw Error(operation: "open", path: path, code: errno) }
        }
    }

    /// Writes `bytes` at the file position.
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8], path: String) throws(Error) {
        try Self.writeAll(bytes, count: bytes.count, path: path) { address, _, length in Glibc.write(descriptor, address, length) }
    }

    /// Writes the first `count` of `bytes` (all by default) at `offset` (`pwrite`; the file
    /// position does not move).
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8], count: Int? = nil, at offset: Int, path: String) throws(Error) {
        try Self.writeAll(bytes, count: count ?? bytes.count, path: path) { address, done, length in
            pwrite(descriptor, address, length, off_t(offset + done))
        }
    }

    /// Writes the first `count` of `bytes` with `write(address, done, length)` (the bytes from
    /// `done` on, `done` of them written so far) until all are written; an injected fault writes
    /// half of them first, as a full disk does.
    private static func writeAll(
        _ bytes: [UInt8],
        count: Int,
        path: String,
        _ write: (UnsafeRawPointer?, Int, Int) -> Int
    ) throws(Error) {
        if let fault = FileFaults.fault(.write, path) {
            _ = bytes.withUnsafeBytes { write($0.baseAddress, 0, count / 2) }
            throw Error(operation: "write", path: path, code: fault)
        }
        var done = 0
        while done < count {
            let written = bytes.withUnsafeBytes { write($0.baseAddress! + done, done, count - done) }
            if written < 0 {
                if errno == EINTR { continue }
                throw Error(operation: "write", path: path, code: errno)
            }
            done += written
        }
    }

    /// Writes zeros over `range` of the file.
    static func writeZeros(_ descriptor: Int32, _ range: Range<Int>, path: String) throws(Error) {
        var start = range.lowerBound
        while start < range.upperBound {
            let count = min(range.upperBound - start, Self.zeros.count)
            try Self.writeAll(descriptor, Self.zeros, count: count, at: start, path: path)
            start += count
        }
    }

    private static let zeros = [UInt8](repeating: 0, count: 1 << 20)

    /// A file's bytes from `offset` (0: all of it) to its end.
    package static func readAll(_ path: String, from offset: Int = 0) throws(Error) -> [UInt8] {
        var bytes: [UInt8] = []
        try Self.readAll(path, from: offset, into: &bytes)
        return bytes
    }

    /// Replaces `bytes` with a file's bytes from `offset` to its end, in the storage `bytes` already
    /// has when it is large enough. A scan reads one 64 MiB segment after another: into fresh
    /// memory, each 4 KiB page costs a fault, and on this project's VMs the faults took as long as
    /// the copy from the page cache.
    package static func readAll(_ path: String, from offset: Int = 0, into bytes: inout [UInt8]) throws(Error) {
        let descriptor = try Self.open(path, O_RDONLY)
        defer { Glibc.close(descriptor) }
        if offset > 0 && lseek(descriptor, off_t(offset), SEEK_SET) < 0 {
            throw Error(operation: "lseek", path: path, code: errno)
        }
        var status = stat()
        // Sized from `fstat` with a byte to spare to see the end.
        let wanted = (fstat(descriptor, &status) == 0 ? max(0, Int(status.st_size) - offset) : 0) + 1
        var readError: Int32 = 0
        if bytes.capacity >= wanted {
            if bytes.count > wanted {
                bytes.removeLast(bytes.count - wanted)
            } else {
                bytes.append(contentsOf: repeatElement(0, count: wanted - bytes.count))
            }
            let filled = bytes.withUnsafeMutableBytes { buffer in Self.read(descriptor, into: buffer, error: &readError) }
            bytes.removeLast(bytes.count - filled)
        } else {
            // Straight into new storage, uninitialized until read: no chunk copied into it.
            bytes = [UInt8](unsafeUninitializedCapacity: wanted) { buffer, initialized in
                initialized = Self.read(descriptor, into: UnsafeMutableRawBufferPointer(buffer), error: &readError)
            }
        }
        if readError != 0 { throw Error(operation: "read", path: path, code: readError) }
        guard bytes.count == wanted else { return }
        // The file grew after `fstat`: the rest a chunk at a time.
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Error(operation: "read", path: path, code: errno)
            }
            if count == 0 { return }
            bytes.append(contentsOf: chunk[0..<count])
        }
    }

    /// Reads from `descriptor` until `buffer` is full or the file ends; returns how many bytes it
    /// read (those before a failure, with `error` set).
    private static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, error: inout Int32) -> Int {
        var filled = 0
        while filled < buffer.count {
            let count = Glibc.read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
            if count < 0 {
                if errno == EINTR { continue }
                error = errno
                return filled
            }
            if count == 0 { return filled }
            filled += count
        }
        return filled
    }

    /// A file read front to back in pieces (a snapshot published a chunk at a time, or recovered),
    /// so that only a piece is in memory at once.
    package final class PieceReader {
        private let descriptor: Int32
        private let path: String

        package init(_ path: String) throws(Error) {
            self.descriptor = try FileIO.open(path, O_RDONLY)
            self.path = path
        }

        deinit { Glibc.close(self.descriptor) }

        /// The next `count` bytes, fewer only at the file's end (none there).
        package func next(_ count: Int) throws(Error) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            var filled = 0
            while filled < count {
                let read = bytes.withUnsafeMutableBytes { Glibc.read(self.descriptor, $0.baseAddress! + filled, count - filled) }
                if read < 0 {
                    if errno == EINTR { continue }
                    throw Error(operation: "read", path: self.path, code: errno)
                }
                if read == 0 { break }
                filled += read
            }
            bytes.removeLast(count - filled)
            return bytes
        }
    }

    /// A new file written front to back in pieces (a snapshot downloaded a chunk at a time), then
    /// synced by `finish()`; a file not finished is removed when the writer goes.
    package final class PieceWriter {
        private let descriptor: Int32
        private let path: String
        private var isFinished = false

        /// Creates `path` (replacing a file there).
        package init(_ path: String) throws(Error) {
            self.descriptor = try FileIO.open(path, O_WRONLY | O_CREAT | O_TRUNC)
            self.path = path
        }

        deinit {
            Glibc.close(self.descriptor)
            if !self.isFinished { _ = Glibc.unlink(self.path) }
        }

        package func write(_ bytes: [UInt8]) throws(Error) {
            try FileIO.writeAll(self.descriptor, bytes, path: self.path)
        }

        /// Syncs the file's bytes: it stays once the writer goes.
        package func finish() throws(Error) {
            try FileIO.dataSync(self.descriptor, path: self.path)
            self.isFinished = true
        }
    }

    /// Replaces `bytes` with a log file's bytes, reusing its storage (`readAll(_:from:into:)`), or
    /// throws `UNAVAILABLE` naming the file.
    static func logFile(_ path: String, into bytes: inout [UInt8]) throws(FanoutError) {
        do {
            try Self.readAll(path, into: &bytes)
        } catch {
            throw FanoutError(.unavailable, "cannot read \(path): \(error)")
        }
    }

    /// The first `count` bytes of a file (fewer if it is shorter).
    static func readPrefix(_ path: String, count: Int) throws(Error) -> [UInt8] {
        let descriptor = try Self.open(path, O_RDONLY)
        defer { Glibc.close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + filled, count - filled) }
            if read < 0 {
                if errno == EINTR { continue }
                throw Error(operation: "read", path: path, code: errno)
            }
            if read == 0 { break }
            filled += read
        }
        return Array(bytes[0..<filled])
    }

    static func dataSync(_ descriptor: Int32, path: String) throws(Error) {
        try FileFaults.check(.sync, path)
        guard fdatasync(descriptor) == 0 else { throw Error(operation: "fdatasync", path: path, code: errno) }
    }

    /// `fsync` of a directory, so that renames and new files in it are durable.
    package static func syncDirectory(_ path: String) throws(Error) {
        try FileFaults.check(.sync, path)
        let descriptor = try Self.open(path, O_RDONLY | O_DIRECTORY)
        defer { Glibc.close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Error(operation: "fsync", path: path, code: errno) }
    }

    /// Writes `bytes` to `path` durably: to `path.tmp`, synced, renamed over `path`, the directory
    /// synced. On failure the temporary file is removed and `path` is unchanged.
    package static func replaceDurably(_ path: String, with bytes: [UInt8], directory: String) throws(Error) {
        let temporary = path + ".tmp"
        do throws(Error) {
            let descriptor = try Self.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
            defer { Glibc.close(descriptor) }
            try Self.writeAll(descriptor, bytes, path: temporary)
            try Self.dataSync(descriptor, path: temporary)
        } catch {
            _ = Glibc.unlink(temporary)
            throw error
        }
        do throws(Error) {
            try Self.rename(temporary, path)
        } catch {
            _ = Glibc.unlink(temporary)
            throw error
        }
        try Self.syncDirectory(directory)
    }

    package static func unlink(_ path: String) throws(Error) {
        guard Glibc.unlink(path) == 0 else { throw Error(operation: "unlink", path: path, code: errno) }
    }

    /// The file's size in bytes.
    static func size(of path: String) throws(Error) -> Int {
        var status = stat()
        guard stat(path, &status) == 0 else { throw Error(operation: "stat", path: path, code: errno) }
        return Int(status.st_size)
    }

    package static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    static func rename(_ from: String, _ to: String) throws(Error) {
        try FileFaults.check(.rename, from)
        guard Glibc.rename(from, to) == 0 else { throw Error(operation: "rename", path: from, code: errno) }
    }

    static func truncate(_ path: String, to length: Int) throws(Error) {
        let descriptor = try Self.open(path, O_WRONLY)
        defer { Glibc.close(descriptor) }
        try Self.truncate(descriptor, to: length, path: path)
        try Self.dataSync(descriptor, path: path)
    }

    /// Cuts the open file to `length` bytes (not synced).
    static func truncate(_ descriptor: Int32, to length: Int, path: String) throws(Error) {
        try FileFaults.check(.truncate, path)
        guard ftruncate(descriptor, off_t(length)) == 0 else { throw Error(operation: "ftruncate", path: path, code: errno) }
    }

    static func makeDirectory(_ path: String) throws(Error) {
        if mkdir(path, 0o755) != 0 && errno != EEXIST { throw Error(operation: "mkdir", path: path, code: errno) }
    }

    /// Removes `path` and, when it is a directory, everything in it; nothing when it does not exist.
    package static func removeTree(_ path: String) throws(Error) {
        if Glibc.unlink(path) == 0 || errno == ENOENT { return }
        guard errno == EISDIR || errno == EPERM else { throw Error(operation: "unlink", path: path, code: errno) }
        for name in try Self.list(path) {
            try Self.removeTree("\(path)/\(name)")
        }
        guard rmdir(path) == 0 else { throw Error(operation: "rmdir", path: path, code: errno) }
    }

    /// The names in a directory (without `.` and `..`).
    static func list(_ path: String) throws(Error) -> [String] {
        guard let directory = opendir(path) else { throw Error(operation: "opendir", path: path, code: errno) }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Takes an exclusive `flock` on `path` (created if needed); the descriptor holds it until closed.
    ///
    /// A lock that is taken is tried again for up to 100 ms before giving up: a process that this
    /// one spawns holds a copy of every descriptor until its `exec` closes them (they are
    /// close-on-exec), so a lock closed a moment before a spawn can still be held for that long.
    /// (Measured: a loop that locks and closes while another thread spawns `/bin/true` found the
    /// lock taken 0.4% of the time.) A lock held by another live owner stays refused.
    static func lockExclusively(_ path: String) throws(Error) -> Int32 {
        let descriptor = try Self.open(path, O_RDWR | O_CREAT)
        var attempts = 0
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            attempts += 1
            guard code == EWOULDBLOCK || code == EINTR, attempts < 50 else {
                Glibc.close(descriptor)
                throw Error(operation: "lock", path: path, code: code)
            }
            usleep(2000)
        }
        return descriptor
    }
}

/// Fault injection for tests: file operations on paths containing a given string fail with a
/// chosen `errno` (ENOSPC, EIO ...) after a number of successes, until cleared. Faults are keyed
/// by path so that tests running in parallel (each on its own directory) do not disturb each other.
/// When none is armed, each operation pays one atomic load.
package enum FileFaults {
    package enum Operation: Sendable {
        /// Opening a file for writing (reads are not refused by a full disk).
        case open
        case write, sync, rename, truncate
    }

    package struct Fault: Sendable {
        package var operation: Operation
        package var pathContains: String
        package var code: Int32
        /// Matching operations that succeed before the fault fires.
        package var skip: Int

        package init(_ operation: Operation, pathContains: String, code: Int32, skip: Int = 0) {
            self.operation = operation
            self.pathContains = pathContains
            self.code = code
            self.skip = skip
        }
    }

    private static let armed = Atomic<Int>(0)
    private static let faults = Mutex<[Fault]>([])

    /// Makes matching operations fail from now on (after `fault.skip` successes).
    package static func inject(_ fault: Fault) {
        self.faults.withLock { faults in
            faults.append(fault)
            self.armed.store(faults.count, ordering: .releasing)
        }
    }

    /// Removes the faults on paths containing `pathContains`: those operations succeed again.
    package static func clear(pathContains: String) {
        self.faults.withLock { faults in
            faults.removeAll { $0.pathContains == pathContains }
            self.armed.store(faults.count, ordering: .releasing)
        }
    }

    /// The `errno` the operation on `path` fails with, if a fault applies.
    static func fault(_ operation: Operation, _ path: String) -> Int32? {
        guard self.armed.load(ordering: .acquiring) > 0 else { return nil }
        return self.faults.withLock { faults -> Int32? in
            guard let index = faults.firstIndex(where: { $0.operation == operation && path.contains($0.pathContains) }) else { return nil }
            if faults[index].skip > 0 {
                faults[index].skip -= 1
                return nil
            }
            return faults[index].code
        }
    }

    /// Paths whose matching operations wait (`hold`) until `release`.
    private static let held = ConditionLock()
    nonisolated(unsafe) private static var holds: [(operation: Operation, pathContains: String)] = []
    private static let holding = Atomic<Bool>(false)

    /// Makes matching operations wait from now on until `release(pathContains:)`: a slow disk on
    /// demand, so a test can look at the engine while a write or sync has not finished.
    package static func hold(_ operation: Operation, pathContains: String) {
        self.held.withLock {
            self.holds.append((operation, pathContains))
            self.holding.store(true, ordering: .releasing)
        }
    }

    /// Lets the operations held on paths containing `pathContains` go on.
    package static func release(pathContains: String) {
        self.held.withLock {
            self.holds.removeAll { $0.pathContains == pathContains }
            self.holding.store(!self.holds.isEmpty, ordering: .releasing)
            self.held.broadcast(.work)
        }
    }

    private static func waitWhileHeld(_ operation: Operation, _ path: String) {
        guard self.holding.load(ordering: .acquiring) else { return }
        self.held.lock()
        defer { self.held.unlock() }
        while self.holds.contains(where: { $0.operation == operation && path.contains($0.pathContains) }) {
            self.held.wait(.work)
        }
    }

    static func check(_ operation: Operation, _ path: String) throws(FileIO.Error) {
        self.waitWhileHeld(operation, path)
        if let code = self.fault(operation, path) {
            throw FileIO.Error(operation: "\(operation)", path: path, code: code)
        }
    }
}
