import FanoutKeys
import FanoutServer
import Logging
import ServiceLifecycle
import UnixSignals

/// Rereads the key file on SIGHUP and hands the keys to the server, which closes the connections
/// whose key was revoked. A file that does not parse (or holds no key) changes nothing: the error
/// is logged and the keys in use stay.
struct KeyReloadService: Service {
    let server: FanoutServer
    let keyFile: String
    let logger: Logger

    func run() async throws {
        let hangUps = await UnixSignalsSequence(trapping: .sighup)
        for await _ in hangUps.cancelOnGracefulShutdown() {
            do {
                let keys = try APIKeyFile.read(self.keyFile)
                guard !keys.keys.isEmpty else {
                    self.logger.error("SIGHUP: the key file holds no keys; the keys in use stay", metadata: ["file": "\(self.keyFile)"])
                    continue
                }
                if keys.clearKeyLines > 0 { try APIKeyFile.write(keys, to: self.keyFile) }
                self.server.reloadKeys(keys)
                self.logger.notice("SIGHUP: keys reloaded", metadata: ["file": "\(self.keyFile)", "keys": "\(keys.keys.count)"])
            } catch {
                self.logger.error("SIGHUP: the key file could not be read; the keys in use stay", metadata: ["error": "\(error)"])
            }
        }
    }
}
