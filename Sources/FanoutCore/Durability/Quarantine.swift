#if canImport(Glibc)
import Glibc
#endif

/// `DIR/quarantine/`: where start-up and `fanout wal repair` put what they take out of the log,
/// instead of deleting it. Each file is named `<UTC time>-<original name>`, with `.from-<offset>`
/// for the cut-off end of a segment and `.header` for a replaced segment header.
enum Quarantine {
    static let folderName = "quarantine"

    /// Moves a whole file into the quarantine folder; returns its new path.
    @discardableResult
    static func move(_ name: String, in directory: String) throws(FileIO.Error) -> String {
        let target = try Self.path(for: name, in: directory)
        try FileIO.rename("\(directory)/\(name)", target)
        try FileIO.syncDirectory("\(directory)/\(Self.folderName)")
        try FileIO.syncDirectory(directory)
        return target
    }

    /// Copies `bytes` (a part of file `name`) into the quarantine folder under `name` + `suffix`,
    /// durably; returns the copy's path.
    @discardableResult
    static func keep(_ bytes: [UInt8], of name: String, suffix: String, in directory: String) throws(FileIO.Error) -> String {
        let target = try Self.path(for: name + suffix, in: directory)
        try FileIO.replaceDurably(target, with: bytes, directory: "\(directory)/\(Self.folderName)")
        return target
    }

    /// Cuts segment `name` at `offset`, keeping the bytes cut off in the quarantine folder first,
    /// without the zeros that end them (space the log writer filled ahead of its batches).
    /// Returns the path of the kept bytes (nil when nothing but zeros followed `offset`).
    @discardableResult
    static func cut(_ name: String, at offset: Int, in directory: String) throws(FileIO.Error) -> String? {
        let path = "\(directory)/\(name)"
        var tail = try FileIO.readAll(path, from: offset)
        tail.removeLast(tail.reversed().prefix { $0 == 0 }.count)
        let kept = tail.isEmpty ? nil : try Self.keep(tail, of: name, suffix: ".from-\(offset)", in: directory)
        try FileIO.truncate(path, to: offset)
        return kept
    }

    private static func path(for name: String, in directory: String) throws(FileIO.Error) -> String {
        let folder = "\(directory)/\(Self.folderName)"
        try FileIO.makeDirectory(folder)
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let stamp = "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
        var target = "\(folder)/\(stamp)-\(name)"
        var attempt = 1
        while FileIO.exists(target) {
            attempt += 1
            target = "\(folder)/\(stamp)-\(attempt)-\(name)"
        }
        return target
    }
}
