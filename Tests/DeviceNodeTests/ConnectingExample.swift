import DeviceNode
import Envelopes
import FleetTesting
import Foundation
import Logging
import Testing
import ZeroMQ

// The code between the markers is docs/embedding.md's connecting example, verbatim (a test compares them).
// BEGIN EXAMPLE connecting
/// Connects a device to its coordinators, signs and syncs, goes offline and back, and shuts down.
func connectingExample(storePath: String, endpoints: [String], serverKey: String) async throws -> [OutboxItem] {
    // 1. Open the node, then connect it in one call: the connection owns the socket, its I/O
    //    thread and the sync engine. Endpoints are tried in order; the next takes over on failure.
    let node = try await DeviceNode.open(configuration: DeviceConfiguration(storePath: storePath),
                                         accountService: InMemoryAccountService())
    let events = node.events()
    let connection = try await node.connect(
        to: endpoints,
        credentials: .password(email: "ann@acme.example", secret: "secret-123"),
        configuration: try DeviceConnectionConfiguration(serverKey: serverKey, syncPolicy: .whenOnline))

    // 2. Wait until a coordinator answers, then log in over the connection.
    for await state in connection.states() where state.status == .connected {
        print("connected to \(state.endpoint ?? "?")")
        break
    }
    try await connection.login()

    // 3. Sign: with `.whenOnline` the envelope is pushed as soon as it is queued.
    let first = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "order-4712"), mode: .offline)
    _ = try await node.resumeSigning(envelopeId: first, driver: SyntheticSigner(seed: 7))
    for await event in events {
        if case .syncSucceeded(let progress) = event {
            print("item \(progress.sequence) is on the server as \(progress.envelope.serverId ?? "?")")
            break
        }
    }

    // 4. Offline (what your reachability check says): signing goes on, items wait in the outbox.
    try await connection.setReachability(.offline)
    let second = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "order-4713"), mode: .offline)
    _ = try await node.resumeSigning(envelopeId: second, driver: SyntheticSigner(seed: 8))

    // 5. Back online: a new session pushes what waited. `sync()` runs a pass now, whatever the policy.
    try await connection.setReachability(.online)
    let summary = try await connection.sync()
    print("\(summary.remaining) item(s) left to sync")

    // 6. Shut down in order (a pass in flight stops, nothing is lost); `connect()` would start again.
    await connection.shutdown()
    let outbox = try await node.outboxItems()
    try await node.close()
    return outbox
}
// END EXAMPLE

@Suite("docs/embedding.md: connecting")
struct ConnectingExampleTests {
    @Test("the connecting example in docs/embedding.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("connecting", in: "docs/embedding.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the connecting example runs against two real coordinators, the first one dead")
    func runs() async throws {
        let keys = try CurveKeyPair.generate()
        let coordinator = try await TestCoordinator(keys: keys)
        let endpoint = try await coordinator.serve()
        let dead = try RefusingPort()
        let directory = try TempDirectory()
        // The example waits without deadlines, as an app would; the test guards it against a hang.
        // It runs on the real clock, as an app does (a 2 s request timeout on the dead endpoint
        // first), so the guard is generous: a busy machine stretches every one of its waits.
        let outbox = try await withDeadline(.seconds(600), "the connecting example") {
            try await connectingExample(
                storePath: directory.storePath, endpoints: ["tcp://127.0.0.1:\(dead.port)", endpoint], serverKey: try #require(Z85.encode(keys.publicKey)))
        }
        #expect(outbox.map(\.sequence) == [1, 2])
        // Settled on the server: applied, or duplicate when a reply was lost and the push resent.
        #expect(outbox.allSatisfy { [.applied, .duplicate].contains($0.receipt?.outcome) }, "\(outbox.map(\.receipt))")
        let node = try await openDevice(in: directory)
        let recorded = try await coordinator.results(of: node)
        #expect(recorded.map(\.sequence) == [1, 2])
        #expect(recorded.allSatisfy { $0.outcome == .applied }, "each applied once")
        try await node.close()
        await coordinator.tearDown()
        withExtendedLifetime(dead) {}
    }

    /// The URL form cannot be resolved here (its host is an example), so it is checked against the
    /// path form, which `packageLinesResolve` resolves: the same `targets:` line, and a URL whose
    /// package identity (its last component without `.git`) is the `package:` that line names.
    @Test("the documented URL dependency is the resolved manifest's, with a URL that names the package")
    func urlLinesMatchThePathManifest() throws {
        let url = try #require(try DocExample.shown("manifest-url", in: "docs/embedding.md"))
        let path = try #require(try DocExample.shown("manifest-path", in: "docs/embedding.md"))
        let lines = url.split(separator: "\n").map(String.init)
        try #require(lines.count == 2, "\(lines)")
        #expect(path.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.contains(lines[1]), "\(path)")
        let match = try #require(lines[0].wholeMatch(of: #/dependencies: \[\.package\(url: "([^"]+)", branch: "main"\)\],/#), "\(lines[0])")
        let identity = try #require(URL(string: String(match.1))).deletingPathExtension().lastPathComponent
        #expect(identity == "SignFleet")
        #expect(lines[1].contains(#"package: "\#(identity)""#))
    }

    @Test("the documented Package.swift lines name the package whatever the checkout's directory is called")
    func packageLinesResolve() async throws {
        let shown = try #require(try DocExample.shown("manifest-path", in: "docs/embedding.md"), "docs/embedding.md has no path-dependency manifest")
        let directory = try TempDirectory()
        // A checkout under another name than the package's: the case the plain form fails.
        let checkout = directory.path + "/signfleet-checkout"
        try FileManager.default.createSymbolicLink(atPath: checkout, withDestinationPath: DocExample.packageRoot.path)
        let app = directory.path + "/app"
        try FileManager.default.createDirectory(atPath: app + "/Sources/App", withIntermediateDirectories: true)
        try "import DeviceNode\n".write(toFile: app + "/Sources/App/main.swift", atomically: true, encoding: .utf8)
        let manifest = shown.replacingOccurrences(of: "../SignFleet", with: checkout)
        try manifest.write(toFile: app + "/Package.swift", atomically: true, encoding: .utf8)
        let describe = try ChildProcess.launch("/usr/bin/env", ["swift", "package", "--package-path", app, "describe"], name: "swift package describe")
        let status = try await describe.waitForExit(timeout: .seconds(120))
        #expect(status == 0, "\(describe.output)")
    }
}
