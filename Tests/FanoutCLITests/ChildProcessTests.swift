import FanoutTestSupport
import Foundation
import Testing

/// `ChildProcess`, which every test here runs commands with: none of its waits can hang a test run.
@Suite("Child processes in tests")
struct ChildProcessTests {
    /// A process the child leaves behind holds its output pipe: the run ends when the child exits,
    /// not when the pipe does (as `readDataToEndOfFile` would, here only when the sleep ends).
    @Test func aRunEndsWithTheChildNotWithItsPipe() throws {
        let outcome = try ChildProcess.run("/bin/sh", ["-c", "sleep 600 & echo $!"])
        let leftBehind = try #require(Int32(outcome.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        defer { kill(leftBehind, SIGKILL) }
        #expect(outcome.status == 0 && !outcome.timedOut)
        #expect(kill(leftBehind, 0) == 0, "the process holding the pipe still runs")
    }

    /// Output and input well past a pipe's 64 KiB go through whole, both ways at once.
    @Test func largeInputAndOutputPassWhole() throws {
        let input = String((0..<300_000).map { Character(UnicodeScalar(UInt8(97 + $0 % 26))) })
        let outcome = try ChildProcess.run("cat", [], input: input)
        #expect(outcome.status == 0)
        #expect(outcome.output == input)
    }

    /// A child past its time is killed, and the wait says so.
    @Test func aChildPastItsTimeIsKilled() throws {
        let child = try ChildProcess("sleep", ["600"])
        #expect(!child.waitForExit(within: .milliseconds(100)))
        #expect(child.timedOut && child.hasExited)
        #expect(child.current.exit == .signalled(SIGKILL))
    }

    /// A wait for a line ends once the line is there, with the child still running.
    @Test func aWaitEndsWhenWhatItWaitsForArrives() throws {
        let child = try ChildProcess("/bin/sh", ["-c", "echo ready >&2; exec sleep 600"])
        defer { child.kill() }
        #expect(child.wait(for: .seconds(120)) { $0.errorText.contains("ready\n") })
        #expect(!child.hasExited)
    }
}
