// swift-tools-version: 6.1
import PackageDescription

// Targets follow shared/DESIGN.md ("Package layout"). Targets for later issues
// (DeviceNode, Coordinator, Chaos, Fleet, LoadGenerator, FleetTesting) are added
// by the issues that build them.
let package = Package(
    name: "SignFleet",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "signfleet", targets: ["signfleet"]),
        .library(name: "MessagePack", targets: ["MessagePack"]),
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "FleetProtocol", targets: ["FleetProtocol"]),
        .library(name: "FleetZeroMQTransport", targets: ["FleetZeroMQTransport"]),
        .library(name: "SyncContract", targets: ["SyncContract"]),
        .library(name: "SignatureCapture", targets: ["SignatureCapture"]),
        .library(name: "Envelopes", targets: ["Envelopes"]),
        .library(name: "DeviceNode", targets: ["DeviceNode"]),
        .library(name: "Coordinator", targets: ["Coordinator"]),
        .library(name: "CoordinatorPostgres", targets: ["CoordinatorPostgres"]),
        .library(name: "Fleet", targets: ["Fleet"]),
        .library(name: "Chaos", targets: ["Chaos"]),
        .library(name: "FleetTesting", targets: ["FleetTesting"]),
        .library(name: "LoadGenerator", targets: ["LoadGenerator"]),
        .library(name: "WebhookListener", targets: ["WebhookListener"]),
        .library(name: "Thresholds", targets: ["Thresholds"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // Connect's deliveries to listeners (docs/connect.md).
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // The REST API's OAuth JWT grant verifies RS256 assertions (docs/rest-api.md, "Authentication").
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        // The HTTPS listener and its local certificate authority (docs/rest-api.md, "TLS").
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        // Envelope definitions with their documents as binary parts (docs/rest-api.md).
        .package(url: "https://github.com/vapor/multipart-kit", from: "4.7.1"),
        // `swift package generate-documentation` (make docs): DocC catalogs of the library targets.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // System libraries (pkg-config names; apt providers install them on Debian).
        .systemLibrary(name: "CZeroMQ", pkgConfig: "libzmq", providers: [.apt(["libzmq3-dev"])]),
        .systemLibrary(name: "CMsgPack", pkgConfig: "msgpack", providers: [.apt(["libmsgpack-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CSQLiteSettings", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),

        .target(name: "MessagePack", dependencies: ["CMsgPack"]),
        .target(
            name: "ZeroMQ",
            dependencies: ["CZeroMQ", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "FleetProtocol",
            dependencies: [
                "MessagePack", "ZeroMQ",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The device side of the wire over ZeroMQ: `FleetClient`, the real `ClientTransport`.
        .target(
            name: "FleetZeroMQTransport",
            dependencies: ["FleetProtocol", "ZeroMQ", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "SignatureCapture",
            dependencies: ["CZlib", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .target(name: "Envelopes", dependencies: ["MessagePack", "CZlib"]),
        // The wire contract's signed part: the sync item payload and the rule that verifies it,
        // shared by the device, the coordinator and the fleet checker (docs/sync-payload.md).
        .target(
            name: "SyncContract",
            dependencies: [
                "FleetProtocol", "Envelopes", "SignatureCapture", "MessagePack",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "DeviceNode",
            dependencies: [
                "Envelopes", "SignatureCapture", "FleetProtocol", "FleetZeroMQTransport", "MessagePack", "ZeroMQ", "SyncContract", "CSQLiteSettings",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "Coordinator",
            dependencies: [
                "FleetProtocol", "SyncContract", "SignatureCapture", "Envelopes", "ZeroMQ",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // The captive page renders PDF pages with poppler's pdftoppm as a child process.
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The coordinator store on PostgreSQL (docs/storage.md): the same ``CoordinatorStorage``
        // protocol as the SQLite default, for coordinators that share one database.
        .target(
            name: "CoordinatorPostgres",
            dependencies: [
                "Coordinator", "FleetProtocol", "SyncContract",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "Fleet",
            dependencies: [
                "DeviceNode", "Envelopes", "FleetProtocol", "FleetZeroMQTransport", "ZeroMQ", "SignatureCapture", "SyncContract",
                // The launcher drives the fault proxy with its client.
                "Chaos", "LoadGenerator",
                .product(name: "Logging", package: "swift-log"),
                // The launcher's supervisor starts and signals child processes.
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "SystemPackage", package: "swift-system"),
                // The checker reads the run's stores through their snapshots (the coordinator's on
                // SQLite or PostgreSQL) and verifies payloads with its own implementation of the
                // documented rule (swift-crypto for Ed25519 and SHA-256).
                "Coordinator", "CoordinatorPostgres", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                // Scenario files.
                .product(name: "Yams", package: "Yams"),
                // checks.thresholds: the grammar `signfleet load` uses too.
                "Thresholds",
            ]
        ),
        // The TCP fault proxy (Toxiproxy-compatible control API).
        .target(
            name: "Chaos",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Open-loop load: arrival schedules, coordinated-omission-corrected histograms, thresholds, reports.
        .target(
            name: "LoadGenerator",
            dependencies: [
                "DeviceNode", "Envelopes", "FleetProtocol", "FleetZeroMQTransport", "ZeroMQ", "SignatureCapture", "CZlib", "Thresholds",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // A DocuSign Connect listener for tests and fleets: HMAC checked, receipts written, answers
        // set through its control API (docs/webhooks.md, "A listener for tests").
        .target(
            name: "WebhookListener",
            dependencies: [
                "SignatureCapture",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The threshold grammar (`METRIC OP VALUE`) shared by `signfleet load` and fleet scenarios.
        .target(name: "Thresholds"),
        // Test support shipped as a library: real child processes with deadlines, and the in-process
        // client transport (a coordinator's request router driven without sockets).
        .target(name: "FleetTesting", dependencies: ["MessagePack", "FleetProtocol", "ZeroMQ"]),
        .executableTarget(
            name: "signfleet",
            dependencies: [
                "FleetProtocol", "FleetZeroMQTransport", "ZeroMQ", "MessagePack", "SignatureCapture", "DeviceNode", "Envelopes",
                "Coordinator", "CoordinatorPostgres", "Fleet",
                "Chaos", "LoadGenerator", "FleetTesting", "WebhookListener",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // A second SIGINT/SIGTERM during a graceful shutdown (ShutdownSignals).
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),

        .testTarget(name: "MessagePackTests", dependencies: ["MessagePack", "FleetTesting"]),
        .testTarget(
            name: "WebhookListenerTests",
            dependencies: [
                "WebhookListener", "Coordinator", "FleetTesting",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        .testTarget(
            name: "ZeroMQTests",
            // Logging: docs/zeromq.md's example passes a logger to its I/O loop.
            dependencies: ["ZeroMQ", "FleetTesting", .product(name: "Logging", package: "swift-log")]),
        .testTarget(
            name: "FleetProtocolTests", dependencies: ["FleetProtocol", "FleetZeroMQTransport", "MessagePack", "ZeroMQ", "FleetTesting", "SignatureCapture"]),
        .testTarget(
            name: "SignatureCaptureTests",
            dependencies: ["SignatureCapture", "FleetTesting", .product(name: "Crypto", package: "swift-crypto")]),
        .testTarget(name: "EnvelopesTests", dependencies: ["Envelopes", "FleetTesting", "SignatureCapture", "CZlib"]),
        .testTarget(
            name: "CoordinatorTests",
            dependencies: [
                "Coordinator", "CoordinatorPostgres", "FleetProtocol", "FleetZeroMQTransport", "ZeroMQ", "FleetTesting", "DeviceNode",
                "SignatureCapture", "Envelopes", "SyncContract", .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                // RSA key pairs for the OAuth JWT grant's tests; the HTTPS listener's certificates read back.
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                // Connect's listeners in the delivery tests.
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            exclude: ["browser"]),  // the Selenium scripts of the browser tests
        .testTarget(
            name: "FleetTests",
            dependencies: [
                "Fleet", "FleetTesting", "Thresholds",
                "Coordinator", "CoordinatorPostgres", "DeviceNode", "Envelopes", "SignatureCapture", "FleetProtocol", "SyncContract",
                "MessagePack",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        .testTarget(
            name: "DeviceNodeTests",
            dependencies: [
                "DeviceNode", "Envelopes", "SignatureCapture", "FleetTesting", "MessagePack", "SyncContract", "FleetProtocol",
                "FleetZeroMQTransport", "ZeroMQ", "Coordinator", .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(
            name: "LoadGeneratorTests",
            dependencies: [
                "LoadGenerator", "FleetProtocol", "FleetZeroMQTransport", "ZeroMQ", "FleetTesting", "Coordinator",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(
            name: "ChaosTests",
            dependencies: [
                "Chaos", "ZeroMQ", "FleetTesting", "SignatureCapture", "FleetProtocol", "FleetZeroMQTransport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Runs the built `signfleet` binary as real child processes.
        .testTarget(
            name: "SignfleetCLITests",
            // Yams: the deploy manifests' test parses deploy/kubernetes/*.yaml. WebhookListener and
            // Crypto: the listener command's test reads its receipts and signs what it sends.
            dependencies: [
                "FleetTesting", "Envelopes", "WebhookListener", .product(name: "Yams", package: "Yams"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
