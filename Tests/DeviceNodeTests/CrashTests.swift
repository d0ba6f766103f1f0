import DeviceNode
import Envelopes
import FleetTesting
import Foundation
import Testing


/// The `signfleet` binary: `SIGNFLEET_BIN`, else `.build/debug/signfleet` under the package.
func signfleetBinary() throws -> String {
    if let path = ProcessInfo.processInfo.environment["SIGNFLEET_BIN"] { return path }
    let candidates = [
        FileManager.default.currentDirectoryPath + "/.build/debug/signfleet",
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/signfleet").path,
    ]
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw CrashTestError(message: "signfleet binary not found (tried \(candidates)); run `swift build --product signfleet` or set SIGNFLEET_BIN")
    }
    return found
}

struct CrashTestError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

@Suite("Crash safety")
struct CrashTests {
    @Test("kill -9 at seeded random points loses nothing signed and leaves nothing half-written")
    func killNine() async throws {
        let seed = testSeed("CrashTests")
        print("crash test seed \(seed) (replay with SIGNFLEET_SEED=\(seed))")
        let binary = try signfleetBinary()
        let directory = try TempDirectory()
        var random = SeededGenerator(seed: seed)
        var printed: [UInt64: String] = [:]
        let kills = 24
        var outputs: [String] = []

        for run in 0..<kills {
            let child = try ChildProcess.launch(binary, [
                "device-worker", "--store", directory.storePath, "--seed", "\(seed &+ UInt64(run) &* 1000)", "--count", "1000000",
            ], name: "worker-\(run)")
            // The count is never reached: the worker must still be running when the kill lands,
            // even if this test process is held up for seconds by the rest of the suite.
            // The kill point: after 0-3 commits of this run, then 0-20 ms further into the next envelope.
            let commits = Int(random.next() % 4)
            if commits == 0 {
                try await child.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("ready ") }
            } else {
                try await child.waitForLines(commits, in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("committed ") }
            }
            // Not synchronisation: this jitter only spreads the kill over the worker's write path.
            try await Task.sleep(for: .microseconds(Int(random.next() % 20_000)))
            child.signal(SIGKILL)
            let status = try await child.waitForExit(timeout: .seconds(10))
            #expect(status != 0, "worker \(run) should have been killed (seed \(seed))")
            for line in child.lines(.standardOutput) where line.hasPrefix("committed ") {
                let parts = line.split(separator: " ")
                guard parts.count == 3, let sequence = UInt64(parts[1]) else {
                    Issue.record("unreadable line '\(line)' (seed \(seed))")
                    continue
                }
                if let earlier = printed[sequence], earlier != String(parts[2]) {
                    Issue.record("sequence \(sequence) printed for \(earlier) and \(parts[2]) (seed \(seed))")
                }
                printed[sequence] = String(parts[2])
            }
            outputs.append(child.output)
        }
        #expect(printed.count >= kills / 2, "too few commits to be meaningful (seed \(seed))")

        // Reopen the store the way an integrator would and check everything.
        let node = try await DeviceNode.open(configuration: DeviceConfiguration(storePath: directory.storePath),
                                             accountService: InMemoryAccountService())
        let items = try await node.outboxItems()
        let sequences = items.map(\.sequence)
        #expect(sequences == Array(1...UInt64(max(1, items.count))), "outbox not gapless: \(sequences) (seed \(seed))")
        let bySequence = Dictionary(uniqueKeysWithValues: items.map { ($0.sequence, $0) })
        for (sequence, transactionId) in printed.sorted(by: { $0.key < $1.key }) {
            guard let item = bySequence[sequence] else {
                Issue.record("committed item \(sequence) (\(transactionId)) is missing (seed \(seed))")
                continue
            }
            #expect(item.envelope.transactionId == transactionId, "seed \(seed)")
            #expect(item.hasValidSignature(publicKey: node.publicKey), "item \(sequence) signature (seed \(seed))")
            let payload = try item.decodedPayload()
            #expect(payload.sequence == sequence && payload.transactionId == transactionId)
            #expect(payload.recipients.allSatisfy { $0.status == "signed" }, "item \(sequence) (seed \(seed))")
            #expect(payload.signatures.count == payload.recipients.count, "item \(sequence) (seed \(seed))")
        }
        for item in items {
            #expect(item.hasValidSignature(publicKey: node.publicKey), "item \(item.sequence) (seed \(seed))")
        }

        // Every cached envelope is whole: queued ones have their outbox row; signed recipients have
        // every signature and unsigned ones none.
        let queued = Set(items.filter { $0.status == .pending }.map(\.envelope.localId))
        for cached in try await node.cachedEnvelopes() {
            let id = cached.envelope.localId
            #expect(cached.localState == .cached || cached.localState == .pendingSync, "\(id) is \(cached.localState) (seed \(seed))")
            #expect((cached.localState == .pendingSync) == queued.contains(id), "\(id) (seed \(seed))")
            let envelope = try #require(try await node.cachedEnvelope(id: id))
            let signatures = try await node.signatures(envelopeId: id)
            for recipient in envelope.recipients {
                let tabs = envelope.tabs.enumerated().filter { $0.element.recipientId == recipient.recipientId && $0.element.type == .signHere }
                let held = signatures.filter { $0.recipientId == recipient.recipientId }.map(\.tabIndex)
                if recipient.status == .signed {
                    #expect(held == tabs.map(\.offset), "\(id) recipient \(recipient.recipientId) (seed \(seed))")
                } else {
                    #expect(held.isEmpty, "\(id) recipient \(recipient.recipientId) has signatures but is \(recipient.status) (seed \(seed))")
                }
            }
        }
        let audit = try await node.auditStore()
        #expect(audit.isConsistent, "\(audit) (seed \(seed))")
        // The journal records each queued item once, with its sequence.
        let queuedEntries = try await node.journal().filter { $0.kind == .queued }.compactMap(\.sequence)
        #expect(queuedEntries == sequences, "seed \(seed)")
        try await node.close()
        if audit.isConsistent == false { print(outputs.joined(separator: "\n")) }
    }
}
