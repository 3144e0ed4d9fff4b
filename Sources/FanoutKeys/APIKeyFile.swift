import Foundation

/// Reading and writing a key file (`APIKeyStore`'s text), as a `SecretFile`.
public enum APIKeyFile {
    /// The keys in the file at `path`.
    public static func read(_ path: String) throws -> APIKeyStore {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw APIKeyFileError(line: 0, message: "cannot read the key file \(path)")
        }
        do {
            return try APIKeyStore(parsing: text)
        } catch {
            throw APIKeyFileError(line: error.line, message: "\(path): \(error.description)")
        }
    }

    /// Replaces the file at `path` with `keys`, every key hashed.
    public static func write(_ keys: APIKeyStore, to path: String) throws {
        try SecretFile.write(keys.text, to: path)
    }
}

/// A file only its owner may read: written to a temporary file in the same directory, made 0600
/// and fsynced, then renamed over the old one, so a reader sees the old file or the new one, never
/// half of either.
public enum SecretFile {
    /// Writes `text` to `path` readable and writable by its owner only (0600), atomically.
    public static func write(_ text: String, to path: String) throws {
        let temporary = path + ".tmp"
        unlink(temporary)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw APIKeyFileError(line: 0, message: "cannot create \(temporary): \(String(cString: strerror(errno)))")
        }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return 0 }
                return Foundation.write(descriptor, base + written, buffer.count - written)
            }
            if count < 0 {
                if errno == EINTR { continue }
                close(descriptor)
                unlink(temporary)
                throw APIKeyFileError(line: 0, message: "cannot write \(temporary): \(String(cString: strerror(errno)))")
            }
            written += count
        }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard synced, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw APIKeyFileError(line: 0, message: "cannot replace \(path): \(String(cString: strerror(errno)))")
        }
    }
}
