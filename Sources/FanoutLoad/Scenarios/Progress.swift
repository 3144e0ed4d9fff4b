import Foundation

/// Progress on standard error while a phase runs: rewritten in place on a terminal every half
/// second, a line every five seconds otherwise; nothing when quiet.
public struct Progress: Sendable {
    public var quiet: Bool

    public init(quiet: Bool) {
        self.quiet = quiet
    }

    func track<R: Sendable>(_ name: String, total: Int, done: Counter, _ body: () async -> R) async -> R {
        guard !self.quiet else { return await body() }
        let terminal = isatty(2) != 0
        let start = ContinuousClock.now
        let reporter = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: terminal ? .milliseconds(500) : .seconds(5))
                guard !Task.isCancelled else { break }
                Self.report(name, done: done.current, total: total, since: start, terminal: terminal)
            }
        }
        let result = await body()
        reporter.cancel()
        await reporter.value
        if terminal {
            FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        }
        return result
    }

    private static func report(_ name: String, done: Int, total: Int, since start: ContinuousClock.Instant, terminal: Bool) {
        let elapsed = ContinuousClock.now - start
        let seconds = elapsed / .seconds(1)
        let rate = seconds > 0 ? Int(Double(done) / seconds) : 0
        let percent = total > 0 ? done * 100 / total : 100
        let line = "\(name): \(done)/\(total) (\(percent)%), \(rate)/s"
        FileHandle.standardError.write(Data((terminal ? "\r\u{1B}[K" + line : line + "\n").utf8))
    }
}
