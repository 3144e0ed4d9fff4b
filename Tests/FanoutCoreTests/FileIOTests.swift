@testable import FanoutCore
import FanoutTestSupport
import Foundation
import Testing

@Suite("FileIO")
struct FileIOTests {
    /// A file read whole and from offsets is its bytes, at sizes around the read's sizing.
    @Test(arguments: [0, 1, 4095, 65_536, 3_000_017])
    func readAllGivesTheFile(size: Int) throws {
        var random = SeededRandomNumberGenerator(seed: UInt64(size))
        let bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
        try TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let path = "\(directory)/file"
            #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
            #expect(try FileIO.readAll(path) == bytes)
            for offset in [1, size / 2, size] where offset <= size && offset > 0 {
                #expect(try FileIO.readAll(path, from: offset) == Array(bytes[offset...]))
            }
        }
    }

    /// A file whose size `fstat` does not know (a FIFO reports 0) is still read to its end.
    @Test func readAllReadsPastTheSizeItWasGiven() throws {
        var random = SeededRandomNumberGenerator(seed: 5)
        let bytes = (0..<2_500_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        try TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let path = "\(directory)/fifo"
            #expect(mkfifo(path, 0o600) == 0)
            let writer = Thread {
                guard let handle = FileHandle(forWritingAtPath: path) else { return }
                handle.write(Data(bytes))
                try? handle.close()
            }
            writer.start()
            #expect(try FileIO.readAll(path) == bytes)
        }
    }
}
