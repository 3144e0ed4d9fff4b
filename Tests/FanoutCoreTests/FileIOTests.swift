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

    /// Files read one after another into one buffer: each read gives exactly that file (none of a
    /// longer one before it left over), and a file that fits is read into the storage the buffer
    /// already has.
    @Test func readAllIntoABufferReusesItsStorage() throws {
        var random = SeededRandomNumberGenerator(seed: 6)
        let sizes = [3_000_000, 2_999_000, 0, 3_000_001, 1, 3_500_000, 2_000_000]
        let files = sizes.map { size in (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) } }
        try TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var buffer: [UInt8] = []
            var storage: UnsafeRawPointer? = nil
            var largest = 0
            for (index, bytes) in files.enumerated() {
                let path = "\(directory)/file-\(index)"
                #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
                try FileIO.readAll(path, into: &buffer)
                #expect(buffer == bytes, "file \(index)")
                let now = buffer.withUnsafeBytes { $0.baseAddress }
                if bytes.count < largest {
                    #expect(now == storage, "file \(index) fits the buffer: read into the same storage")
                }
                storage = now
                largest = max(largest, bytes.count)
            }
        }
    }
}
