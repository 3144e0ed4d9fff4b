import ArgumentParser
import FanoutCore

struct FIDCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fid",
        abstract: "Generate and check Firebase Installation IDs.",
        subcommands: [Generate.self, Check.self]
    )

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print new FIDs, made as the Firebase Installations SDKs make them (CSPRNG, 0111 header, base64url)."
        )

        @Option(name: .shortAndLong, help: "How many FIDs to print (1...1000000).")
        var count = 1

        @Flag(help: "Print a JSON array of the FIDs.") var json = false

        func validate() throws {
            guard (1...1_000_000).contains(self.count) else {
                throw ValidationError("--count must be between 1 and 1000000")
            }
        }

        func run() throws {
            if self.json {
                printJSON(.array(try (0..<self.count).map { _ in .string(try FID.generate().string) }))
                return
            }
            var output = ""
            for _ in 0..<self.count {
                output += try FID.generate().string
                output += "\n"
                if output.utf8.count > 1 << 16 {
                    print(output, terminator: "")
                    output = ""
                }
            }
            print(output, terminator: "")
        }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check that a string is a modern FID (^[cdef][A-Za-z0-9_-]{21}$); exit 0 valid, 1 invalid."
        )

        @Argument(help: "The FID to check.")
        var fid: String

        @Flag(help: "Print JSON: {\"valid\":true,\"fid\":...} or FCM's error object.") var json = false

        func run() throws {
            let fid = FID(self.fid)
            try printCheck(
                json: self.json, key: "fid", value: fid?.string ?? "", line: "valid FID \(self.fid)",
                error: fid == nil ? "invalid FID: expected 22 characters of [A-Za-z0-9_-] starting with c, d, e or f" : nil, field: "fid"
            )
        }
    }
}
