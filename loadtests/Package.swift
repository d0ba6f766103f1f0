// swift-tools-version: 6.1
import PackageDescription

// Benchmarks live in their own package (as swift-nio's Benchmarks/ do) so the
// main build and test suite never pay for them. Build in release: `loadtests/run`.
let package = Package(
    name: "SignFleetBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "SignFleet", path: ".."),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // The connect benchmark's listener.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        .executableTarget(
            name: "signfleet-bench",
            dependencies: [
                .product(name: "MessagePack", package: "SignFleet"),
                .product(name: "ZeroMQ", package: "SignFleet"),
                .product(name: "FleetProtocol", package: "SignFleet"),
                .product(name: "FleetZeroMQTransport", package: "SignFleet"),
                .product(name: "SignatureCapture", package: "SignFleet"),
                .product(name: "DeviceNode", package: "SignFleet"),
                .product(name: "SyncContract", package: "SignFleet"),
                .product(name: "Envelopes", package: "SignFleet"),
                .product(name: "Coordinator", package: "SignFleet"),
                .product(name: "CoordinatorPostgres", package: "SignFleet"),
                .product(name: "Chaos", package: "SignFleet"),
                .product(name: "LoadGenerator", package: "SignFleet"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
