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
            dependencies: [.product(name: "FanoutCore", package: "fanout"), "CBenchmarkMalloc"]
        ),
        .executableTarget(
            name: "TopicIndexBenchmarks",
            dependencies: [
                .product(name: "FanoutCore", package: "fanout"),
                .product(name: "Benchmark", package: "benchmark"),
                "BenchmarkSupport",
            ],
            path: "Benchmarks/TopicIndexBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "DeliveryBenchmarks",
            dependencies: [
                .product(name: "FanoutCore", package: "fanout"),
                .product(name: "Benchmark", package: "benchmark"),
                "BenchmarkSupport",
            ],
            path: "Benchmarks/DeliveryBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "MessageBenchmarks",
            dependencies: [
                .product(name: "FanoutCore", package: "fanout"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/MessageBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "DurabilityBenchmarks",
            dependencies: [
                .product(name: "FanoutCore", package: "fanout"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/DurabilityBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
