// swift-tools-version:6.1
import PackageDescription

// MARK: - Dependencies

let argumentParser: Target.Dependency = .product(name: "ArgumentParser", package: "swift-argument-parser")
let dequeModule: Target.Dependency = .product(name: "DequeModule", package: "swift-collections")
let nioCore: Target.Dependency = .product(name: "NIOCore", package: "swift-nio")
let nioPosix: Target.Dependency = .product(name: "NIOPosix", package: "swift-nio")
let nioEmbedded: Target.Dependency = .product(name: "NIOEmbedded", package: "swift-nio")
let nioTestUtils: Target.Dependency = .product(name: "NIOTestUtils", package: "swift-nio")
let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")
let serviceLifecycle: Target.Dependency = .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
let unixSignals: Target.Dependency = .product(name: "UnixSignals", package: "swift-service-lifecycle")
let nioTLS: Target.Dependency = .product(name: "NIOTLS", package: "swift-nio")
let nioSSL: Target.Dependency = .product(name: "NIOSSL", package: "swift-nio-ssl")
let hummingbird: Target.Dependency = .product(name: "Hummingbird", package: "hummingbird")
let hummingbirdHTTP2: Target.Dependency = .product(name: "HummingbirdHTTP2", package: "hummingbird")
let hummingbirdTesting: Target.Dependency = .product(name: "HummingbirdTesting", package: "hummingbird")
let histogram: Target.Dependency = .product(name: "Histogram", package: "hdrhistogram-swift")
let httpTypes: Target.Dependency = .product(name: "HTTPTypes", package: "swift-http-types")
let nioHTTPTypes: Target.Dependency = .product(name: "NIOHTTPTypes", package: "swift-nio-extras")
let nioHTTPTypesHTTP1: Target.Dependency = .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras")
let nioHTTP1: Target.Dependency = .product(name: "NIOHTTP1", package: "swift-nio")
let metrics: Target.Dependency = .product(name: "CoreMetrics", package: "swift-metrics")
let prometheus: Target.Dependency = .product(name: "Prometheus", package: "swift-prometheus")

// MARK: - Compile-time flags
//
// FANOUT_INTERNAL_CHECKS: data structures verify their invariants after every mutation
// (`_checkInvariants()`). On in debug builds, so `swift test` runs with it; off in release.
let internalChecks: SwiftSetting = .define("FANOUT_INTERNAL_CHECKS", .when(configuration: .debug))

let package = Package(
    name: "fanout",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "FanoutModel", targets: ["FanoutModel"]),
        .library(name: "FanoutCore", targets: ["FanoutCore"]),
        // Seeded generator, manual clock and reference models, for tests and the benchmark package (not API).
        .library(name: "FanoutTestSupport", targets: ["FanoutTestSupport"]),
        .library(name: "FanoutWire", targets: ["FanoutWire"]),
        .library(name: "FanoutKeys", targets: ["FanoutKeys"]),
        .library(name: "FanoutServer", targets: ["FanoutServer"]),
        .library(name: "FanoutClient", targets: ["FanoutClient"]),
        .executable(name: "fanoutd", targets: ["fanoutd"]),
        .executable(name: "fanout", targets: ["fanout"]),
        .executable(name: "fanout-load", targets: ["fanout-load"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.29.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.24.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.1.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
    ],
    targets: [
        // MARK: - System libraries (imported `internal` only)
        .systemLibrary(
            name: "CFanoutLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]
        ),
        // libnats, the NATS C client (JetStream), for the cluster's replication.
        .systemLibrary(
            name: "CNATS",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),
        .systemLibrary(
            name: "CFanoutOpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // glibc's <malloc.h>: fanoutd's allocator policy (mallopt).
        .systemLibrary(
            name: "CFanoutMalloc"
        ),

        // MARK: - Targets
        // Instructions Swift cannot spell: AVX-512 (chosen at run time by CPU), prefetch.
        .target(
            name: "CFanoutIntrinsics"
        ),
        // The value types both ends share (names, FIDs, tokens, statuses, errors): no C library.
        .target(
            name: "FanoutModel"
        ),
        .target(
            name: "FanoutCore",
            dependencies: ["FanoutModel", "CFanoutOpenSSL", "CFanoutLZ4", "CFanoutIntrinsics", dequeModule, logging, metrics],
            swiftSettings: [internalChecks]
        ),
        // The TCP protocol's frames and messages, shared by the server and the client.
        .target(
            name: "FanoutWire",
            dependencies: ["FanoutModel", dequeModule, nioCore]
        ),
        // Credentials: the API-key file, installation refresh and auth tokens (ES256 JWTs) and their
        // signing keys, development certificates.
        .target(
            name: "FanoutKeys",
            dependencies: ["FanoutCore", "FanoutWire", "CFanoutOpenSSL"]
        ),
        .target(
            name: "FanoutServer",
            dependencies: ["FanoutCore", "FanoutCluster", "FanoutWire", "FanoutKeys", "CFanoutMalloc", dequeModule, nioCore, nioPosix, nioSSL, logging, metrics, serviceLifecycle]
        ),
        // The HTTP front (Hummingbird 2): FCM's HTTP v1 send, health, the JWK Set.
        .target(
            name: "FanoutHTTP",
            dependencies: ["FanoutCore", "FanoutKeys", "FanoutWire", hummingbird, httpTypes, nioCore, nioHTTP1, nioHTTPTypes, nioHTTPTypesHTTP1, logging, metrics, prometheus]
        ),
        .target(
            name: "FanoutClient",
            dependencies: ["FanoutModel", "FanoutWire", dequeModule, nioCore, nioPosix, nioSSL, nioTLS]
        ),
        // The load harness: scenarios, fanoutd and redis-server as child processes, a RESP client.
        .target(
            name: "FanoutLoad",
            dependencies: ["FanoutCore", "FanoutCluster", "FanoutModel", "FanoutWire", "FanoutClient", "FanoutKeys", "FanoutTestSupport", dequeModule, histogram, nioCore, nioPosix, nioHTTP1]
        ),
        .target(
            name: "FanoutTestSupport",
            dependencies: ["FanoutCore", "FanoutWire", logging, nioCore]
        ),

        // MARK: - Executables
        .executableTarget(
            name: "fanoutd",
            dependencies: ["FanoutCore", "FanoutCluster", "FanoutServer", "FanoutHTTP", "FanoutKeys", "FanoutWire", argumentParser, logging, metrics, prometheus, serviceLifecycle, unixSignals, nioSSL, hummingbird, hummingbirdHTTP2]
        ),
        .executableTarget(
            name: "fanout",
            dependencies: ["FanoutCore", "FanoutCluster", "FanoutClient", "FanoutKeys", "FanoutWire", argumentParser, nioSSL]
        ),
        .executableTarget(
            name: "fanout-load",
            dependencies: ["FanoutLoad", "FanoutModel", argumentParser]
        ),
        // The crash test's child process (not a product).
        .executableTarget(
            name: "fanout-crash-child",
            dependencies: ["FanoutCore", "FanoutTestSupport"]
        ),

        // MARK: - Tests
        // Scale-out (issue 22): a shard's change log replicated through NATS JetStream.
        .target(
            name: "FanoutCluster",
            dependencies: ["FanoutModel", "FanoutCore", "CNATS", metrics],
            swiftSettings: [internalChecks]
        ),
        .testTarget(
            name: "FanoutClusterTests",
            dependencies: [
                "FanoutCluster", "FanoutCore", "FanoutServer", "FanoutClient", "FanoutWire", "FanoutKeys", "FanoutTestSupport", logging,
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "FanoutCoreTests",
            dependencies: ["FanoutCore", "FanoutTestSupport", logging, .product(name: "MetricsTestKit", package: "swift-metrics")],
            exclude: ["Fixtures/generate_firebase_admin_corpus.py"],
            resources: [.copy("Fixtures/firebase-admin"), .copy("Fixtures/wal"), .copy("Fixtures/wal-v1"), .copy("Fixtures/wal-v1.expected.txt")]
        ),
        .testTarget(
            name: "FanoutWireTests",
            dependencies: ["FanoutWire", "FanoutCore", "FanoutTestSupport", nioCore, nioEmbedded, nioTestUtils],
            resources: [.copy("Fixtures")]
        ),
        // Loopback server and client on port 0.
        .testTarget(
            name: "FanoutServerTests",
            dependencies: ["FanoutServer", "FanoutHTTP", "FanoutKeys", "FanoutClient", "FanoutWire", "FanoutCore", "FanoutTestSupport", nioCore, nioPosix, nioEmbedded, nioSSL, logging, serviceLifecycle, hummingbirdTesting, httpTypes, nioHTTPTypes]
        ),
        // Runs the built `fanout` and `fanout-crash-child` binaries (the dependencies make
        // `swift build --build-tests` build them).
        .testTarget(
            name: "FanoutCLITests",
            dependencies: ["fanout", "fanoutd", "fanout-crash-child", "FanoutCore", "FanoutCluster", "FanoutClient", "FanoutWire", "FanoutTestSupport"]
        ),
        // The RESP codec against a reference model, and every scenario against a fanoutd it starts.
        .testTarget(
            name: "FanoutLoadTests",
            dependencies: ["FanoutLoad", "fanoutd", "fanout-load", "FanoutCore", "FanoutKeys", "FanoutTestSupport", nioCore, nioEmbedded, nioTestUtils]
        ),
    ]
)

// ---    settings applied to every target    --- //
for target in package.targets where [.regular, .executable, .test].contains(target.type) {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    settings.append(.enableUpcomingFeature("InternalImportsByDefault"))
    target.swiftSettings = settings
}
