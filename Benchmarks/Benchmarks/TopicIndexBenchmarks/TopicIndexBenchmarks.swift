import Benchmark
import BenchmarkSupport
@_spi(Storage) import FanoutCore

#if canImport(Glibc)
import Glibc
#endif

// The topic index's hot paths, at the sizes of issue 2:
//   - batch subscribe (1000 registrations by 163-byte token per call) into topics of 1k / 100k / 1M;
//   - resolving a 1M-subscriber topic to a slot array, next to copying 4 MB (the yardstick);
//   - a 5-atom condition over topics of 1M, 500k, 100k, 10k and 1k in a 2M-installation project;
//   - heap bytes per installation and per subscription at 1M installations x 20 topics.
// Fixtures are built once per process in `setup`, outside every measurement.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 2,
        maxDuration: .seconds(3),
        maxIterations: 200
    )

    // MARK: - Batch subscribe

    for size in [1_000, 100_000, 1_000_000] {
        Benchmark(
            "Subscribe.batch1000.topic\(Fixtures.label(size))",
            closure: { benchmark in
                let fixture = SubscribeFixture.shared
                let topic = fixture.topic(size)
                var batch = 0
                for _ in benchmark.scaledIterations {
                    let tokens = fixture.freshBatches[batch % fixture.freshBatches.count]
                    batch += 1
                    benchmark.startMeasurement()
                    // The strings are parsed in the measurement, as before the engine took addresses.
                    let addresses = tokens.map { RegistrationAddress(parsing: $0)! }
                    let results = try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.subscribe(addresses, to: topic) }
                    benchmark.stopMeasurement()
                    blackHole(results)
                    // Restore the topic's size, unmeasured.
                    _ = try! fixture.engine.blocking { (changes: inout Engine.Changes) throws(FanoutError) in try changes.unsubscribe(addresses, from: topic) }
                }
            },
            setup: { _ = SubscribeFixture.shared }
        )
    }

    // MARK: - Audience resolution

    Benchmark(
        "Baseline.copy4MB",
        closure: { benchmark in
            let source = AudienceFixture.shared.fourMegabytes
            var destination = [UInt32](repeating: 0, count: source.count)
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations {
                destination.withUnsafeMutableBytes { out in
                    source.withUnsafeBytes { input in out.copyMemory(from: input) }
                }
                blackHole(destination)
            }
        },
        setup: { _ = AudienceFixture.shared }
    )

    // The same copy into a new array, as `SlotSet.slots` must allocate one (page faults included).
    Benchmark(
        "Baseline.copy4MB.freshArray",
        closure: { benchmark in
            let source = AudienceFixture.shared.fourMegabytes
            for _ in benchmark.scaledIterations {
                let copy = [UInt32](unsafeUninitializedCapacity: source.count) { out, initialized in
                    source.withUnsafeBytes { input in UnsafeMutableRawBufferPointer(out).copyMemory(from: input) }
                    initialized = source.count
                }
                blackHole(copy)
            }
        },
        setup: { _ = AudienceFixture.shared }
    )

    Benchmark(
        "Audience.topic1M.slots",
        closure: { benchmark in
            let fixture = AudienceFixture.shared
            for _ in benchmark.scaledIterations {
                let slots = try! fixture.engine.audience(of: fixture.topics[0]).slots
                precondition(slots.count == 1_000_000)
                blackHole(slots)
            }
        },
        setup: { _ = AudienceFixture.shared }
    )

    Benchmark(
        "Audience.condition5.2M",
        closure: { benchmark in
            let fixture = AudienceFixture.shared
            for _ in benchmark.scaledIterations {
                blackHole(try! fixture.engine.audience(of: fixture.condition).count)
            }
        },
        setup: { _ = AudienceFixture.shared }
    )

    Benchmark(
        "Audience.condition5.2M.slots",
        closure: { benchmark in
            let fixture = AudienceFixture.shared
            for _ in benchmark.scaledIterations {
                blackHole(try! fixture.engine.audience(of: fixture.condition).slots)
            }
        },
        setup: { _ = AudienceFixture.shared }
    )

    // MARK: - Memory

    for layout in MemoryFixture.Layout.allCases {
        Benchmark(
            "Memory.1Mx20.\(layout)",
            configuration: .init(
                metrics: [
                    .custom("heap bytes per installation", useScalingFactor: false),
                    .custom("heap bytes per 1000 subscriptions", useScalingFactor: false),
                ],
                warmupIterations: 0,
                maxIterations: 1
            ),
            closure: { benchmark in
                let figures = MemoryFixture.measure(layout)
                benchmark.measurement(.custom("heap bytes per installation", useScalingFactor: false), figures.perInstallation)
                benchmark.measurement(
                    .custom("heap bytes per 1000 subscriptions", useScalingFactor: false),
                    figures.perThousandSubscriptions
                )
            }
        )
    }
}
