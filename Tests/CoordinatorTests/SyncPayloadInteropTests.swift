import DeviceNode
import FleetProtocol
import FleetTesting
import Foundation
import SyncContract
import Testing

@testable import Coordinator

/// docs/sync-payload.md is complete enough to build an accepted payload without the Swift code:
/// `Tests/interop/sync_payload.py`, written from the doc alone (Python's msgpack and
/// cryptography), builds one, and the coordinator's own rules accept it.
/// Needs python3 (or `SIGNFLEET_PYTHON`) with msgpack and cryptography (scripts/install-deps.sh
/// installs them); fails, not skips, without.
@Suite("Sync payload interop (docs/sync-payload.md)")
struct SyncPayloadInteropTests {
    /// What the script prints.
    struct ScriptOutput: Decodable {
        var payload: String
        var signature: String
        var publicKey: String
        var deviceID: String
        var transactionID: String
        var sequence: UInt64
        var payloadSHA256: String
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let script = repository.appendingPathComponent("Tests/interop/sync_payload.py")
    static let doc = repository.appendingPathComponent("docs/sync-payload.md")

    /// Runs the script; its output is small, so plain pipes do.
    static func run(_ arguments: [String]) async throws -> ScriptOutput {
        let python = ProcessInfo.processInfo.environment["SIGNFLEET_PYTHON"] ?? "python3"
        let (status, output, errors) = try await ChildProcess.run("/usr/bin/env", [python, script.path] + arguments)
        guard status == 0 else {
            throw ScriptFailure(
                message: """
                    \(python) \(script.path) failed with status \(status) (it needs the msgpack and \
                    cryptography modules: `\(python) -m pip install msgpack cryptography`): \
                    \(errors)
                    """)
        }
        return try JSONDecoder().decode(ScriptOutput.self, from: Data(output.utf8))
    }

    struct ScriptFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        func value(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : (c | 0x20) - 87 }
        return stride(from: 0, to: digits.count - 1, by: 2).map { value(digits[$0]) << 4 | value(digits[$0 + 1]) }
    }

    static func recheck(_ output: ScriptOutput) -> Result<SyncPayload, SyncIngest.RecheckFailure> {
        SyncIngest.recheck(
            payload: bytes(output.payload), signature: bytes(output.signature), deviceID: output.deviceID,
            sequence: output.sequence, transactionID: output.transactionID, publicKey: bytes(output.publicKey))
    }

    @Test func aPayloadBuiltFromTheDocPassesTheIngestChecks() async throws {
        let output = try await Self.run([
            "--seed", "5f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
            "--device-id", "py-device-3", "--sequence", "42", "--transaction-id", "py-tx-42",
        ])
        let payload: SyncPayload
        switch Self.recheck(output) {
        case .success(let decoded): payload = decoded
        case .failure(let failure):
            Issue.record("the coordinator refuses the Python payload: \(failure.reason)")
            return
        }
        #expect(payload.deviceId == "py-device-3")
        #expect(payload.sequence == 42)
        #expect(payload.transactionId == "py-tx-42")
        #expect(payload.documents.count == 1 && payload.recipients.count == 1 && payload.signatures.count == 1)
        // The doc's canonical encoding is the Swift encoder's, byte for byte.
        #expect(try payload.canonicalBytes() == Self.bytes(output.payload))

        // The payload names its own position: pushed at another sequence, it is refused.
        var tampered = output
        tampered.sequence = 43
        guard case .failure(let failure) = Self.recheck(tampered) else {
            Issue.record("a payload pushed at another sequence must not verify")
            return
        }
        #expect(failure.reason.contains("item 42"))
    }

    @Test func theDocsWorkedExampleVerifiesAndMatchesTheScript() async throws {
        let output = try await Self.run(["--example"])
        guard case .success(let payload) = Self.recheck(output) else {
            Issue.record("the worked example does not verify: \(Self.recheck(output))")
            return
        }
        #expect(payload.deviceId == "tablet-7" && payload.sequence == 1 && payload.transactionId == "tx-0001")
        #expect(payload.templateId == nil && payload.completedLocallyAtNanos == 1_795_262_465_000_000_000)
        #expect(try payload.canonicalBytes() == Self.bytes(output.payload))
        // The doc prints the same bytes (its hex blocks, white space removed).
        let doc = try String(contentsOf: Self.doc, encoding: .utf8).filter { !$0.isWhitespace }
        for (name, hex) in [
            ("payload", output.payload), ("payload signature", output.signature), ("public key", output.publicKey),
            ("payload SHA-256", output.payloadSHA256),
        ] {
            #expect(doc.contains(hex), "docs/sync-payload.md lacks the example's \(name) \(hex)")
        }
    }

    @Test func aPayloadBuiltFromTheDocIsAppliedByTheIngest() async throws {
        let output = try await Self.run([
            "--seed", "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf",
            "--device-id", "py-device-1", "--sequence", "1", "--transaction-id", "py-tx-1",
        ])
        let fixture = try await IngestFixture()
        defer { fixture.temporary.remove() }
        try await fixture.enroll("py-device-1", key: Self.bytes(output.publicKey))
        let item = SyncItem(
            sequence: 1, transactionID: "py-tx-1", payload: Self.bytes(output.payload), signature: Self.bytes(output.signature))
        let ack = try await fixture.push("py-device-1", [item])
        #expect(ack.status == .ok && ack.lastApplied == 1)
        #expect(ack.results.map(\.outcome) == [.applied], "\(ack.results)")
        #expect(try await fixture.envelopeCount() == 1)
    }
}
