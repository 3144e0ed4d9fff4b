public import Foundation

/// A command a test runs, with its standard streams on pipes, that cannot leave the test waiting
/// forever. Three things make `Process` with `readDataToEndOfFile` and `waitUntilExit` hang a
/// test run when many tests spawn processes at once:
/// - a process another test spawns at the same moment can inherit a copy of this one's pipe ends
///   and hold them for its whole life, so the end of file a reader waits for comes only when that
///   other process exits (if its test is itself waiting for a thread of the concurrency pool, never);
/// - a child whose output nobody reads stops at its next write once the pipe is full (64 KiB): a
///   fanoutd that logs that much, read only to its end of file once stopped, never stops;
/// - a child that hangs is waited for without a limit;
/// - `Process` learns that its child exited when a socket the child inherited closes; a process
///   that inherited a copy too (the child's own children, or one another test spawned at that
///   moment) keeps `isRunning` true until it exits as well.
///
/// So every pipe end here is close-on-exec from the moment it is made (only the child's copies, on
/// its standard streams, survive its exec); a thread of the child's own reads its output as it
/// comes, with `poll(2)`, and takes it as complete once the child has exited (as `waitid(2)` says,
/// without reaping it), not once the pipes end; and every wait has a deadline, after which the child is killed (SIGKILL) and the wait
/// reports that it timed out.
public final class ChildProcess: @unchecked Sendable {
    // Safe to share: the reader thread and the callers meet under `lock`.

    /// The running (or exited) process.
    public let process = Process()

    /// What a child has written, and whether it has exited, at one moment.
    public struct Seen {
        public var output: [UInt8]
        public var errorOutput: [UInt8]
        /// How it ended, once it has.
        public var exit: Process.Exit?
        public var hasExited: Bool { self.exit != nil }
        public var outputText: String { String(decoding: self.output, as: UTF8.self) }
        public var errorText: String { String(decoding: self.errorOutput, as: UTF8.self) }
    }

    private let lock = NSCondition()
    private var seen = Seen(output: [], errorOutput: [], exit: nil)
    private var killedForTime = false

    /// Starts `executable` (a path, or a name looked up on PATH) with `arguments`; `input` is
    /// written to its standard input, which is then closed (`nil`: standard input is /dev/null).
    /// A thread of its own reads its output from then on, so a child that writes a lot never
    /// waits for the test to read.
    public init(_ executable: String, _ arguments: [String], input: [UInt8]? = nil, environment: [String: String]? = nil) throws {
        if executable.contains("/") {
            self.process.executableURL = URL(fileURLWithPath: executable)
            self.process.arguments = arguments
        } else {
            self.process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            self.process.arguments = [executable] + arguments
        }
        if let environment { self.process.environment = environment }
        let output = Pipe.closedOnExec()
        let error = Pipe.closedOnExec()
        let inputPipe = input.map { _ in Pipe.closedOnExec() }
        self.process.standardOutput = output
        self.process.standardError = error
        self.process.standardInput = inputPipe ?? FileHandle.nullDevice
        try self.process.run()
        // `run` closed the child's ends in this process. Ours go to the reader thread as copies
        // (close-on-exec from the start); the pipes' handles are closed now, or they would close
        // the descriptors again when released.
        let descriptors = Descriptors(
            output: fcntl(output.fileHandleForReading.fileDescriptor, F_DUPFD_CLOEXEC, 0),
            error: fcntl(error.fileHandleForReading.fileDescriptor, F_DUPFD_CLOEXEC, 0),
            input: inputPipe.map { fcntl($0.fileHandleForWriting.fileDescriptor, F_DUPFD_CLOEXEC, 0) } ?? -1,
            pendingInput: input ?? []
        )
        try? output.fileHandleForReading.close()
        try? error.fileHandleForReading.close()
        try? inputPipe?.fileHandleForWriting.close()
        Thread { [self] in self.read(descriptors) }.start()
    }

    /// What it has written so far, and whether it has exited.
    public var current: Seen { self.lock.withLock { self.seen } }

    /// Whether it has exited.
    public var hasExited: Bool { self.current.hasExited }

    /// Its exit status, or the signal that ended it; nil while it runs.
    public var status: Int32? { self.current.exit?.status }

    /// Whether a wait ran out and killed it.
    public var timedOut: Bool { self.lock.withLock { self.killedForTime } }

    /// Waits until `done` holds for what it has written (true), it exits (then whether `done`
    /// holds), or `timeout` passes (false; it keeps running).
    @discardableResult
    public func wait(for timeout: Duration, until done: (Seen) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        return self.lock.withLock {
            while !done(self.seen) && !self.seen.hasExited {
                guard self.lock.wait(until: deadline) else { return done(self.seen) }
            }
            return done(self.seen)
        }
    }

    /// Waits until it exits; false if it has not within `timeout`: it is then killed (SIGKILL)
    /// and `timedOut` says so.
    @discardableResult
    public func waitForExit(within timeout: Duration) -> Bool {
        if self.wait(for: timeout, until: \.hasExited) { return true }
        self.lock.withLock { self.killedForTime = true }
        self.kill()
        return false
    }

    /// SIGTERM.
    public func terminate() {
        if !self.hasExited { Glibc.kill(self.process.processIdentifier, SIGTERM) }
    }

    /// SIGKILL, and waits until it is gone.
    public func kill() {
        if !self.hasExited { Glibc.kill(self.process.processIdentifier, SIGKILL) }
        self.wait(for: .seconds(60), until: \.hasExited)
    }

    /// The reader thread's descriptors.
    private struct Descriptors {
        var output: Int32
        var error: Int32
        var input: Int32
        var pendingInput: [UInt8]
    }

    /// Reads both outputs (and writes the input) until the child has exited, then takes what is
    /// left in the pipes without waiting for their ends (another child may hold a copy).
    private func read(_ descriptors: Descriptors) {
        var descriptors = descriptors
        var pending = descriptors.pendingInput[...]
        if pending.isEmpty { Self.close(&descriptors.input) }
        for descriptor in [descriptors.output, descriptors.error, descriptors.input] where descriptor >= 0 {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        }
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let exit = self.process.exit()
            let exited = exit != nil
            var polled = [pollfd(fd: descriptors.output, events: Int16(POLLIN), revents: 0), pollfd(fd: descriptors.error, events: Int16(POLLIN), revents: 0)]
            if descriptors.input >= 0 { polled.append(pollfd(fd: descriptors.input, events: Int16(POLLOUT), revents: 0)) }
            if !exited { _ = poll(&polled, nfds_t(polled.count), 20) }
            let output = Self.drain(&descriptors.output, &chunk)
            let error = Self.drain(&descriptors.error, &chunk)
            if descriptors.input >= 0 {
                let written = pending.withUnsafeBytes { write(descriptors.input, $0.baseAddress, $0.count) }
                if written > 0 { pending = pending.dropFirst(written) }
                if pending.isEmpty || (written < 0 && errno == EPIPE) { Self.close(&descriptors.input) }
            }
            self.lock.withLock {
                self.seen.output += output
                self.seen.errorOutput += error
                if let exit { self.seen.exit = exit }
                if exited || !output.isEmpty || !error.isEmpty { self.lock.broadcast() }
            }
            if exited { break }
        }
        Self.close(&descriptors.output)
        Self.close(&descriptors.error)
        Self.close(&descriptors.input)
    }

    /// What `descriptor` holds now, read without waiting; closes it (-1) at its end.
    private static func drain(_ descriptor: inout Int32, _ chunk: inout [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        while descriptor >= 0 {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += chunk[0..<count]
            } else if count == 0 {
                Self.close(&descriptor)
            } else if errno != EINTR {
                break
            }
        }
        return bytes
    }

    private static func close(_ descriptor: inout Int32) {
        guard descriptor >= 0 else { return }
        Glibc.close(descriptor)
        descriptor = -1
    }
}

extension ChildProcess {
    /// How a command run to its end ended.
    public struct Outcome: Sendable {
        public var status: Int32
        public var output: String
        public var error: String
        /// It ran past its time and was killed.
        public var timedOut: Bool
    }

    /// Runs a command to its exit with `input` on its standard input, at most `timeout` (then it
    /// is killed and `timedOut` says so).
    public static func run(_ executable: String, _ arguments: [String], input: String = "", environment: [String: String]? = nil, timeout: Duration = .seconds(180)) throws -> Outcome {
        let child = try ChildProcess(executable, arguments, input: Array(input.utf8), environment: environment)
        child.waitForExit(within: timeout)
        let seen = child.current
        return Outcome(status: child.status ?? -1, output: seen.outputText, error: seen.errorText, timedOut: child.timedOut)
    }
}

extension Pipe {
    /// A pipe whose two ends are closed on exec: a child spawned by any thread gets neither, but
    /// for the copy a `Process` makes on its own standard stream.
    public static func closedOnExec() -> Pipe {
        let pipe = Pipe()
        _ = fcntl(pipe.fileHandleForReading.fileDescriptor, F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipe.fileHandleForWriting.fileDescriptor, F_SETFD, FD_CLOEXEC)
        return pipe
    }
}

extension Process {
    /// How a child process ended.
    public enum Exit: Equatable, Sendable {
        case exited(Int32)
        case signalled(Int32)

        /// The exit status, or the signal's number (as `terminationStatus` gives them).
        public var status: Int32 {
            switch self {
            case .exited(let status), .signalled(let status): status
            }
        }
    }

    /// How it ended, or nil while it runs, from `waitid(2)` without reaping it (`Process` reaps it
    /// when it notices; its `isRunning` may say true longer: see `ChildProcess`).
    public func exit() -> Exit? {
        var info = siginfo_t()
        if waitid(P_PID, id_t(self.processIdentifier), &info, WEXITED | WNOWAIT | WNOHANG) == 0 {
            guard info._sifields._sigchld.si_pid != 0 else { return nil }  // still running
            let status = info._sifields._sigchld.si_status
            return info.si_code == CLD_EXITED ? .exited(status) : .signalled(status)
        }
        // Reaped already, by `Process`, which has its status once `isRunning` turns false.
        guard errno == ECHILD, !self.isRunning else { return nil }
        return self.terminationReason == .exit ? .exited(self.terminationStatus) : .signalled(self.terminationStatus)
    }

    /// Waits until it has exited, at most `timeout`; false if it still runs. (Polls `exit()`
    /// instead of `waitUntilExit`, which runs the thread's run loop and has no limit.)
    @discardableResult
    public func waitForExit(within timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while self.exit() == nil {
            guard ContinuousClock.now < deadline else { return false }
            usleep(5000)
        }
        return true
    }
}
