// swift-tools-version:6.1
import PackageDescription

// A separate package, so that neither the library nor `swift test` resolves package-benchmark.
// Run with `cd Benchmarks && swift package benchmark` (or `make benchmark` at the root).
let package = Package(
    name: "fanout-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "fanout", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .systemLibrary(name: "CBenchmarkMalloc", path: "Sources/CBenchmarkMalloc"),
        .target(
            name: "BenchmarkSupport",
            dependencies: [
                .product(name: "FanoutCore", package: "fanout"),
                .product(name: "FanoutTestSupport", package: "fanout"),
                "CBenchmarkMalloc",
            ]
        ),
    ]
)

// One executable per suite, each with the shared fixtures.
for suite in ["TopicIndexBenchmarks", "DeliveryBenchmarks", "MessageBenchmarks", "DurabilityBenchmarks", "ProtocolBenchmarks", "AllocationBenchmarks"] {
    var dependencies: [Target.Dependency] = [
        .product(name: "FanoutCore", package: "fanout"),
        .product(name: "FanoutTestSupport", package: "fanout"),
        .product(name: "Benchmark", package: "benchmark"),
        "BenchmarkSupport",
    ]
    if suite == "ProtocolBenchmarks" {
        // The server and the client over loopback, in one process.
        dependencies += ["FanoutServer", "FanoutKeys", "FanoutClient", "FanoutWire"].map { .product(name: $0, package: "fanout") }
    }
    package.targets.append(
        .executableTarget(
            name: suite,
            dependencies: dependencies,
            path: "Benchmarks/\(suite)",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    )
}
