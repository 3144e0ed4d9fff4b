import Foundation
import Testing

/// The `fanout` executable's offline commands and exit codes (0 valid, 1 invalid, 2 usage).
@Suite("fanout CLI")
struct FanoutCLITests {
    struct Outcome {
        var status: Int32
        var output: String
        var error: String
    }

    /// Runs the `fanout` binary built next to this test bundle.
    func fanout(_ arguments: String...) throws -> Outcome {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let process = Process()
        process.executableURL = directory.appendingPathComponent("fanout")
        process.arguments = arguments
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Outcome(
            status: process.terminationStatus,
            output: String(decoding: out, as: UTF8.self),
            error: String(decoding: err, as: UTF8.self)
        )
    }

    @Test func conditionCheckPrintsTheCanonicalForm() throws {
        let valid = try self.fanout("condition", "check", "'A' in topics || 'B' in topics && !'C' in topics")
        #expect(valid.status == 0)
        #expect(valid.output == "(('A' in topics || 'B' in topics) && !('C' in topics))\n")

        let invalid = try self.fanout("condition", "check", "'A' in topics ||")
        #expect(invalid.status == 1)
        #expect(invalid.error.hasPrefix("Invalid condition expression provided."))
    }

    @Test func fidGenerateAndCheck() throws {
        let generated = try self.fanout("fid", "generate", "--count", "5")
        #expect(generated.status == 0)
        let fids = generated.output.split(separator: "\n").map(String.init)
        #expect(fids.count == 5)
        for fid in fids {
            #expect(try self.fanout("fid", "check", fid).status == 0)
        }
        #expect(try self.fanout("fid", "check", "ccccccccccc").status == 1)
    }

    @Test func topicCheckStripsThePrefix() throws {
        let valid = try self.fanout("topic", "check", "/topics/news")
        #expect(valid.status == 0 && valid.output == "news\n")
        #expect(try self.fanout("topic", "check", "/topics/private/x").status == 1)
    }

    @Test func usageErrorsExitWith2() throws {
        #expect(try self.fanout("fid", "generate", "--count", "0").status == 2)
        #expect(try self.fanout("condition", "check").status == 2)
        #expect(try self.fanout("no-such-command").status == 2)
    }

    @Test func demoRuns() throws {
        let demo = try self.fanout("demo")
        #expect(demo.status == 0)
        #expect(demo.output.contains("reaches 2 installations"))
        #expect(demo.output.contains("old token: UNREGISTERED"))
    }
}
