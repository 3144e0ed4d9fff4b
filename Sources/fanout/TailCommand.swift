import ArgumentParser
import Foundation
import FanoutClient
import FanoutCore
import FanoutModel
import FanoutWire

#if canImport(Glibc)
import Glibc
#endif

struct TailCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tail",
        abstract: "Attach as a consumer and print deliveries as they arrive, acknowledging each once printed.",
        discussion: """
            A worker for a platform (--platform) or a device consumer of installations \
            (--registration, repeatable). One line per delivery: id, message id, platform, FID, \
            headers, payload; with --json an object with the destination (token, apnsToken), the \
            headers, the expiry (milliseconds since the epoch) and the payload. At least once: a delivery is \
            acknowledged only after its line is written and flushed; on SIGINT or SIGTERM tail stops \
            taking, acknowledges what it printed and exits 0, and whatever it had not printed goes \
            to the next consumer. A closed output (EPIPE) exits 2 without acknowledging the lines \
            that could not be written. Stops after --count deliveries.
            """
    )
    @OptionGroup var server: ServerOptions
    @Option(help: "Consume a platform's deliveries as a worker: android, ios or web.") var platform: String?
    @Option(help: "Consume these installations' deliveries (FID or token).") var registration: [String] = []
    @Option(help: "Unacknowledged deliveries to hold at most.") var credit = 100
    @Option(help: "Stop after this many deliveries.") var count: Int?
    @Flag(name: .customLong("no-ack"), help: "Do not acknowledge (they are delivered again later).") var noAcknowledge = false
    @Flag(help: "Connect with the consumer role (for consumer keys).") var consumer = false

    func run() async throws {
        let scope: AttachScope
        if let platform = self.platform {
            guard let platform = Platform(rawValue: platform), self.registration.isEmpty else {
                throw ValidationError("give either --platform android|ios|web or --registration")
            }
            scope = .platform(platform)
        } else if !self.registration.isEmpty {
            scope = .installations(self.registration)
        } else {
            throw ValidationError("give --platform or --registration")
        }
        // A write to a closed pipe fails with EPIPE (and tail says so) rather than killing it.
        signal(SIGPIPE, SIG_IGN)
        try await self.server.withClient(command: "tail", role: self.consumer ? .consumer : .admin) { client in
            let deliveries = try await client.attach(scope, credit: self.credit, in: self.server.project)
            // SIGINT and SIGTERM: a batch being printed is finished and acknowledged, then tail
            // exits; while it waits for deliveries, it detaches, and what the server sent but tail
            // had not printed goes back to waiting.
            let stop = StopSignals(onWait: { Task { try? await client.detach() } })
            defer { stop.cancel() }
            var received = 0
            while stop.beginWaiting() {
                // What has arrived, up to --count: written, flushed, then acknowledged with one ACK.
                let batch = try await deliveries.nextBatch(maximum: self.count.map { $0 - received } ?? .max)
                guard stop.endWaiting(), !batch.isEmpty else { break }
                let text = batch.map(self.line).joined()
                // Into a pipe: acknowledged once the reader has taken the lines out of it, so that a
                // reader killed before it read them does not lose them.
                guard StandardOutput.write(text), StandardOutput.waitUntilRead(unless: { stop.isStopping }) else {
                    writeToStandardError("fanout tail: cannot write to standard output: \(String(cString: strerror(errno)))\n")
                    throw ExitCode(2)  // unacknowledged: they go to the next consumer
                }
                if !self.noAcknowledge {
                    try await client.acknowledge(batch.map(\.id))
                }
                received += batch.count
                if let count = self.count, received >= count { break }
            }
        }
    }

    private func line(_ delivery: WireDelivery) -> String {
        let messageID = messageName(of: delivery.id, in: self.server.project)
        let payload = String(decoding: delivery.payload, as: UTF8.self)
        guard self.server.json else {
            let headers = delivery.headers.map { " \($0.name)=\($0.value)" }.joined()
            return "\(delivery.id) \(messageID) \(delivery.platform) \(delivery.fid)\(headers) \(payload)\n"
        }
        return String(decoding: JSONWriter.encode(.object(JSONObject([
            .init(key: "id", value: .string(delivery.id.description)),
            .init(key: "message", value: .string(messageID)),
            .init(key: "platform", value: .string(delivery.platform.rawValue)),
            .init(key: "fid", value: .string(delivery.fid.string)),
            .init(key: "token", value: delivery.token.map { .string($0.value) } ?? .null),
            .init(key: "apnsToken", value: delivery.apnsToken.map { .string($0.hex) } ?? .null),
            .init(key: "headers", value: .object(JSONObject(delivery.headers.map { .init(key: $0.name, value: .string($0.value)) }))),
            .init(key: "expiry", value: jsonNumber(Int(delivery.expiry.millisecondsSinceEpoch))),
            .init(key: "deletedMessages", value: .bool(delivery.isDeletedMessagesMarker)),
            .init(key: "payload", value: .string(payload)),
        ]))), as: UTF8.self) + "\n"
    }
}

/// SIGINT and SIGTERM, caught while tail runs. The first sets `isStopping`, and calls `onWait`
/// if tail is waiting for deliveries (between `beginWaiting` and `endWaiting`), or else lets the
/// batch being printed finish. The handler is installed with `sigaction` at once (a dispatch
/// source arms later, and a signal before then would be lost); it writes a byte to a pipe that a
/// thread of this class reads.
private final class StopSignals: @unchecked Sendable {
    private struct State {
        var stopping = false
        var waiting = false
    }

    private let state = Locked(State())
    private let pipe: (read: Int32, write: Int32)

    init(onWait: @escaping @Sendable () -> Void) {
        var descriptors: [Int32] = [-1, -1]
        _ = Glibc.pipe(&descriptors)
        self.pipe = (descriptors[0], descriptors[1])
        stopSignalPipe = descriptors[1]
        for number in [SIGINT, SIGTERM] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in
                var byte: UInt8 = 1
                _ = Glibc.write(stopSignalPipe, &byte, 1)
            }
            sigaction(number, &action, nil)
        }
        let state = self.state
        let readEnd = self.pipe.read
        Thread.detachNewThread {
            var byte: UInt8 = 0
            while true {
                let count = Glibc.read(readEnd, &byte, 1)
                if count < 0 && errno == EINTR { continue }
                guard count == 1 else { return }  // closed by `cancel`
                let interrupts = state.withLock { state in
                    defer { state.stopping = true }
                    return !state.stopping && state.waiting
                }
                if interrupts { onWait() }
            }
        }
    }

    var isStopping: Bool { self.state.withLock { $0.stopping } }

    /// Tail is about to wait for deliveries; false when it is stopping instead.
    func beginWaiting() -> Bool {
        self.state.withLock { state in
            state.waiting = !state.stopping
            return state.waiting
        }
    }

    /// Tail has deliveries to print; false when a signal came while it waited (it detached: what
    /// arrived goes back to waiting, unprinted).
    func endWaiting() -> Bool {
        self.state.withLock { state in
            state.waiting = false
            return !state.stopping
        }
    }

    /// Ends the reading thread; a signal from now on is ignored.
    func cancel() {
        for number in [SIGINT, SIGTERM] { signal(number, SIG_IGN) }
        close(self.pipe.write)
    }
}

/// The write end of `StopSignals`' pipe, for the signal handler (which cannot capture).
nonisolated(unsafe) private var stopSignalPipe: Int32 = -1

/// Standard output written with `write(2)`, unbuffered, so that a line counts as printed only
/// once the system took all of it (and, into a pipe, once the reader took it out).
enum StandardOutput {
    /// When standard output is a pipe, waits until its reader has read everything written (the
    /// pipe holds no unread bytes), or until `stopping` says to stop waiting; false when the reader
    /// closed its end first (`errno` is `EPIPE`). Returns at once for files and terminals.
    static func waitUntilRead(unless stopping: () -> Bool) -> Bool {
        var status = stat()
        guard fstat(1, &status) == 0, status.st_mode & S_IFMT == S_IFIFO else { return true }
        while true {
            var unread: Int32 = 0
            // Linux answers FIONREAD on either end of a pipe with the bytes not yet read.
            guard ioctl(1, UInt(FIONREAD), &unread) == 0, unread > 0 else { return true }
            var descriptor = pollfd(fd: 1, events: 0, revents: 0)
            _ = poll(&descriptor, 1, 5)  // POLLERR at once when the reader is gone; otherwise a 5 ms nap
            if descriptor.revents & Int16(POLLERR) != 0 {
                errno = EPIPE
                return false
            }
            if stopping() { return true }
        }
    }

    /// Writes all of `text` to descriptor 1; false when a write failed (`errno` says why).
    static func write(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return true }
            var offset = 0
            while offset < bytes.count {
                let count = Glibc.write(1, base + offset, bytes.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += count
            }
            return true
        }
    }
}
