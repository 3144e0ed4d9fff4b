@testable import FanoutCore
import FanoutTestSupport
import Foundation
import Synchronization
import Testing

/// The data directory's lock under concurrent process spawns: a spawned child holds a copy of
/// every descriptor until its `exec` closes it, so a lock just closed can look taken for a moment.
@Suite("Directory lock")
struct DirectoryLockTests {
    /// Few: the lock loop spins a core for as long as they take, and on this 2-core machine a
    /// long spin starved the rest of the test process (server tests timed out idle).
    static let spawns = 20

    /// Locks and unlocks a file while another thread spawns 20 processes; every attempt must get
    /// the lock (without the retry, about 8 attempts per spawn found it taken by a spawning child).
    @Test func aLockClosedBeforeASpawnIsTakenAgain() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let path = "\(directory)/LOCK"
            let spawned = SpawnCounter()
            Thread {
                for _ in 0..<Self.spawns {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: "/bin/true")
                    try? process.run()
                    process.waitForExit(within: .seconds(60))
                    spawned.increment()
                }
            }.start()
            // Both loops on threads of their own: a busy loop on the test's task would hold one of
            // the concurrency pool's threads (two on this machine) for as long as the spawns take.
            let refused = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
                Thread {
                    var refused = 0
                    while spawned.count < Self.spawns {
                        do {
                            let descriptor = try FileIO.lockExclusively(path)
                            close(descriptor)
                        } catch {
                            refused += 1
                        }
                    }
                    continuation.resume(returning: refused)
                }.start()
            }
            #expect(refused == 0)
        }
    }

    /// A lock held by a live owner is still refused (after the short retry).
    @Test func aHeldLockIsRefused() throws {
        try TemporaryDirectory.with { directory in
            let engine = try Engine(directory: directory, durability: .none)
            defer { try? engine.close() }
            #expect(throws: FanoutError.self) { try Engine(directory: directory, durability: .none) }
        }
    }
}

/// A count one thread raises and another reads.
private final class SpawnCounter: Sendable {
    private let value = Atomic<Int>(0)
    var count: Int { self.value.load(ordering: .acquiring) }
    func increment() { self.value.add(1, ordering: .releasing) }
}
