// swift-tools-version: 6.1
import PackageDescription

// Benchmarks live in their own package (as swift-nio's Benchmarks/ do) so the
// main build and test suite never pay for them. Build in release: `loadtests/run`.
let package = Package(
    name: "SignFleetBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "SignFleet", path: "..")],
    targets: [
        .executableTarget(
            name: "signfleet-bench",
            dependencies: [
                .product(name: "MessagePack", package: "SignFleet"),
                .product(name: "ZeroMQ", package: "SignFleet"),
                .product(name: "FleetProtocol", package: "SignFleet"),
                .product(name: "SignatureCapture", package: "SignFleet"),
                .product(name: "DeviceNode", package: "SignFleet"),
                .product(name: "Envelopes", package: "SignFleet"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
