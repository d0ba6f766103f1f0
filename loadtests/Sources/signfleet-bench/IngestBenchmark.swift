import Coordinator
import Crypto
import DeviceNode
import Envelopes
import FleetProtocol
import Foundation
import SyncContract
import GRDB
import SignatureCapture

/// `signfleet-bench ingest [--items N] [--batch B] [--seconds S]`: sustained sync ingest —
/// signed envelopes per second verified (Ed25519 payload + binding signatures, document hashes)
/// and committed by `SyncIngest.apply` into a fresh coordinator store, from 1, 10 and 100
/// concurrent devices, each pushing its items in order in batches of B (default 10); then p50
/// and p99 ack latency of open-loop paced pushes at 50% and 90% of the best measured rate
/// and at 5,000/s, S seconds each (default 5; latency counted from each push's scheduled time, so
/// queueing behind a slow push counts).
///
/// References in the same run: raw SQLite inserts of the same rows (envelope + sync result +
/// device sequence update, one transaction per batch, same pragmas: WAL, synchronous NORMAL)
/// and raw Ed25519 verification of the same payload, one core.
///
/// Items are pre-generated: one envelope signed by a real `DeviceNode`, copied per device and
/// sequence and re-signed with each simulated device's key (the tests' `Forger`).
func ingestBenchmark(_ arguments: [String]) async throws {
    func option(_ name: String) -> Double? {
        guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count else { return nil }
        return Double(arguments[i + 1])
    }
    let itemsPerScenario = Int(option("--items") ?? 6000)
    let batch = Int(option("--batch") ?? 10)
    // Five seconds per latency run: two-second runs ended before a queue near capacity had
    // grown, and gave p99s at 5,000/s several times lower than five-second runs in the same hour.
    let latencySeconds = option("--seconds") ?? 5
    let bench = "ingest"
    let root = NSTemporaryDirectory() + "signfleet-bench-ingest-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }

    let base = try await IngestBench.realItem(directory: root)
    Report.emit(bench, "ingest.payload_bytes", Double(base.payload.count), "bytes")
    // Ed25519 verifications per item: the payload signature and one per signature binding.
    let verificationsPerItem = 1 + (try SyncPayload(canonicalBytes: base.payload)).signatures.count
    Report.emit(bench, "ingest.ed25519_verifications_per_item", Double(verificationsPerItem), "count")

    // References: raw Ed25519 verification of the same payload, and raw inserts of the same rows.
    let referenceKey = Curve25519.Signing.PrivateKey()
    let referenceSignature = try referenceKey.signature(for: base.payload)
    let publicKey = referenceKey.publicKey
    let verifyRate = measureRate(seconds: 1) {
        blackHole(publicKey.isValidSignature(referenceSignature, for: base.payload))
    }
    Report.emit(bench, "ref.ed25519_verify_per_s", verifyRate, "ops/s")
    let sqliteRate = try IngestBench.rawSQLiteRate(
        path: "\(root)/raw.sqlite", item: base, items: itemsPerScenario * 2, batch: batch)
    Report.emit(bench, "ref.sqlite_inserts_per_s", sqliteRate, "ops/s")  // items: an envelope row + a result row each

    // Throughput with 1, 10 and 100 devices, each scenario in a fresh store, with the defaults
    // (every signature verified, synchronous = NORMAL); then 100 devices with payload-only
    // verification and with synchronous = FULL (an fsync per group commit).
    func throughput(
        devices: Int, name: String, verification: IngestVerification = .everySignature,
        durability: CoordinatorStore.Durability = .processCrash
    ) async throws -> Double {
        let perDevice = max(batch, itemsPerScenario / devices)
        let rig = try await IngestRig(
            path: "\(root)/ingest-\(name).sqlite", devices: devices, items: perDevice, base: base,
            verification: verification, durability: durability)
        let pushes = rig.pushes(batch: batch)
        let start = ContinuousClock.now
        let applied = try await withThrowingTaskGroup(of: Int.self) { group in
            for (index, devicePushes) in pushes.enumerated() {
                group.addTask {
                    var applied = 0
                    for push in devicePushes {
                        let ack = try await rig.services.ingest.apply(push, routingID: rig.forgers[index].id)
                        applied += ack.results.filter { $0.outcome == .applied }.count
                    }
                    return applied
                }
            }
            return try await group.reduce(0, +)
        }
        let rate = Double(applied) / IngestBench.seconds(start.duration(to: .now))
        guard applied == devices * perDevice else {
            fatalError("ingest: \(applied) of \(devices * perDevice) items applied")
        }
        let counts = await rig.services.ingest.commitCounts()
        Report.emit(bench, "ingest.\(name).envelopes_per_s", rate, "ops/s")
        Report.emit(bench, "ingest.\(name).pushes_per_commit", Double(counts.pushes) / Double(max(1, counts.transactions)), "ratio")
        return rate
    }
    var best = 0.0
    for devices in [1, 10, 100] {
        best = max(best, try await throughput(devices: devices, name: "devices\(devices)"))
    }
    _ = try await throughput(devices: 100, name: "payload_verify.devices100", verification: .payloadSignature)
    _ = try await throughput(devices: 100, name: "fsync.devices100", durability: .powerLoss)
    _ = try await throughput(devices: 100, name: "fsync_payload_verify.devices100", verification: .payloadSignature, durability: .powerLoss)
    Report.emit(bench, "ingest.vs_sqlite_inserts", best / sqliteRate, "ratio")
    Report.emit(bench, "ingest.vs_ed25519_verify", best / verifyRate, "ratio")

    // Ack latency at 50% and 90% of the best rate: 100 devices, open-loop schedule.
    for (percent, fixed) in [(50, nil), (90, nil), (0, 5000.0)] as [(Int, Double?)] {
        let target = fixed ?? best * Double(percent) / 100
        let label = fixed.map { "\(Int($0))" } ?? "\(percent)pct"
        let devices = 100
        let totalPushes = max(devices, Int(target * latencySeconds) / batch)
        let perDevice = (totalPushes + devices - 1) / devices * batch
        let rig = try await IngestRig(
            path: "\(root)/latency-\(label).sqlite", devices: devices, items: perDevice, base: base)
        let pushes = rig.pushes(batch: batch)
        let interval = Double(batch) / target  // seconds between pushes, fleet-wide
        let start = ContinuousClock.now + .milliseconds(50)
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for (index, devicePushes) in pushes.enumerated() {
                group.addTask {
                    var latencies: [Double] = []
                    for (j, push) in devicePushes.enumerated() {
                        let scheduled = start + .seconds(Double(j * devices + index) * interval)
                        try await Task.sleep(until: scheduled, clock: .continuous)
                        _ = try await rig.services.ingest.apply(push, routingID: rig.forgers[index].id)
                        latencies.append(IngestBench.seconds(scheduled.duration(to: .now)) * 1000)
                    }
                    return latencies
                }
            }
            return try await group.reduce(into: [Double]()) { $0 += $1 }.sorted()
        }
        let achieved = Double(pushes.reduce(0) { $0 + $1.count } * batch) / IngestBench.seconds(start.duration(to: .now))
        Report.emit(bench, "ingest.offered_envelopes_per_s_at\(label)", target, "ops/s")
        Report.emit(bench, "ingest.achieved_envelopes_per_s_at\(label)", achieved, "ops/s")
        Report.emit(bench, "ingest.p50_ms_at\(label)", IngestBench.percentile(latencies, 0.50), "ms")
        Report.emit(bench, "ingest.p99_ms_at\(label)", IngestBench.percentile(latencies, 0.99), "ms")
    }
}

/// A fresh coordinator store with `devices` enrolled simulated devices and their signed items.
struct IngestRig: Sendable {
    /// The bench account's user.
    static let email = "ann@bench.example"
    static let secret = "secret-123"
    let services: CoordinatorServices
    let forgers: [Forger]
    /// `items[device]`: that device's items, sequences 1...n.
    let items: [[SyncItem]]

    init(
        path: String, devices: Int, items count: Int, base: SyncItem, verification: IngestVerification = .everySignature,
        durability: CoordinatorStore.Durability = .processCrash, curveKeys: [[UInt8]]? = nil
    ) async throws {
        let store = try CoordinatorStore(path: path, durability: durability)
        var services = CoordinatorServices(store: store)
        services.ingest.verification = verification
        try await self.init(services: services, devices: devices, items: count, base: base, curveKeys: curveKeys)
    }

    /// The same on services over any store (`signfleet-bench store` passes PostgreSQL ones).
    init(services: CoordinatorServices, devices: Int, items count: Int, base: SyncItem, curveKeys: [[UInt8]]? = nil) async throws {
        self.services = services
        _ = try await services.accounts.createAccount(
            id: "bench", name: "Bench", offlineSigning: true,
            rateLimits: RateLimits(hourly: 1_000_000_000, burst: 1_000_000_000, burstWindowSeconds: 30))
        _ = try await services.accounts.createUser(
            accountID: "bench", name: "Ann", email: Self.email, secret: Self.secret)
        let token = try await services.auth.issueToken(email: Self.email, secret: Self.secret).accessToken
        let forgers = (0..<devices).map { Forger(id: "bench-\($0)") }
        self.forgers = forgers
        for (index, forger) in forgers.enumerated() {
            // Under CURVE the enrollment binds the client's transport key, as over the wire.
            let credential: PeerCredential = curveKeys.map { .curveKey($0[index]) } ?? .claimedName(forger.id)
            _ = try await services.devices.enroll(
                EnrollDevice(accessToken: token, deviceID: forger.id, publicKey: forger.publicKey), credential: credential)
        }
        // Signing the copies is the slow part of the setup: spread it over the cores.
        items = try await withThrowingTaskGroup(of: (Int, [SyncItem]).self) { group in
            for (index, forger) in forgers.enumerated() {
                group.addTask {
                    (index, try (1...count).map { try forger.item(from: base, sequence: UInt64($0), transaction: "\(forger.id)-\($0)") })
                }
            }
            var items = [[SyncItem]](repeating: [], count: devices)
            for try await (index, list) in group { items[index] = list }
            return items
        }
    }

    /// Each device's pushes, in order.
    func pushes(batch: Int) -> [[SyncPush]] {
        zip(forgers, items).map { forger, items in
            stride(from: 0, to: items.count, by: batch).map {
                SyncPush(deviceID: forger.id, items: Array(items[$0..<min($0 + batch, items.count)]))
            }
        }
    }
}

/// A simulated device that re-signs a real payload as its own (copied from the tests' `Forger`).
struct Forger: Sendable {
    let id: String
    let key = Curve25519.Signing.PrivateKey()
    var publicKey: [UInt8] { Array(key.publicKey.rawRepresentation) }

    func item(from base: SyncItem, sequence: UInt64, transaction: String) throws -> SyncItem {
        var payload = try SyncPayload(canonicalBytes: base.payload)
        payload.deviceId = id
        payload.sequence = sequence
        payload.transactionId = transaction
        payload.signatures = try payload.signatures.map { signature in
            var resigned = signature
            resigned.bindingSignature = try SignatureBinding(canonicalBytes: signature.binding).sign(privateKey: Array(key.rawRepresentation))
            return resigned
        }
        let bytes = try payload.canonicalBytes()
        return SyncItem(sequence: sequence, transactionID: transaction, payload: bytes, signature: Array(try key.signature(for: bytes)))
    }
}

enum IngestBench {
    /// One envelope (one in-person signer) signed by a real DeviceNode, as its sync item.
    static func realItem(directory: String) async throws -> SyncItem {
        var configuration = DeviceConfiguration(storePath: "\(directory)/device.sqlite")
        configuration.deviceId = "bench-device"
        let user = UserInfo(accountId: "bench", accountName: "Bench", userId: "u1", userName: "Ann Host", email: "host@example.com", host: "h")
        let node = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: ["t": user]))
        try await node.login(accessToken: "t")
        let id = try await node.compose(try SampleEnvelope.inPerson(signers: 1, transactionId: "bench-tx"), mode: .offline)
        _ = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: 1))
        let items = try await node.pendingOutboxItems().compactMap(\.syncItem)
        try await node.close()
        guard let item = items.first else { fatalError("ingest: the device produced no sync item") }
        return item
    }

    /// Rows per second of raw inserts of what ingest writes per item — an `envelope` row with
    /// the payload blob and a `syncResult` row — plus the device's sequence update per batch,
    /// one transaction per batch, into a store with the coordinator's pragmas.
    static func rawSQLiteRate(path: String, item: SyncItem, items: Int, batch: Int) throws -> Double {
        var configuration = Configuration()
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try pool.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE device (id TEXT PRIMARY KEY, lastAppliedSequence INTEGER NOT NULL);
                    CREATE TABLE envelope (id TEXT PRIMARY KEY, accountID TEXT NOT NULL, deviceID TEXT NOT NULL,
                      sequence INTEGER NOT NULL, transactionID TEXT NOT NULL, localEnvelopeID TEXT NOT NULL,
                      name TEXT NOT NULL, status TEXT NOT NULL, payload BLOB NOT NULL, deviceSignature BLOB NOT NULL,
                      createdAt DATETIME NOT NULL, UNIQUE (accountID, transactionID), UNIQUE (deviceID, sequence));
                    CREATE INDEX envelope_accountID ON envelope(accountID);
                    CREATE TABLE syncResult (deviceID TEXT NOT NULL, sequence INTEGER NOT NULL, outcome TEXT NOT NULL,
                      envelopeID TEXT, reason TEXT, recordedAt DATETIME NOT NULL, PRIMARY KEY (deviceID, sequence));
                    INSERT INTO device VALUES ('raw', 0);
                    """)
        }
        let payload = Data(item.payload)
        let signature = Data(item.signature)
        let start = ContinuousClock.now
        var sequence = 0
        while sequence < items {
            try pool.write { db in
                for _ in 0..<batch {
                    sequence += 1
                    let id = "env-raw-\(sequence)"
                    try db.execute(
                        sql: "INSERT INTO envelope VALUES (?, 'bench', 'raw', ?, ?, 'local', 'Agreement', 'completed', ?, ?, ?)",
                        arguments: [id, sequence, "tx-\(sequence)", payload, signature, Date()])
                    try db.execute(
                        sql: "INSERT INTO syncResult VALUES ('raw', ?, 'applied', ?, NULL, ?)", arguments: [sequence, id, Date()])
                }
                try db.execute(sql: "UPDATE device SET lastAppliedSequence = ? WHERE id = 'raw'", arguments: [sequence])
            }
        }
        return Double(sequence) / seconds(start.duration(to: .now))
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// The `fraction` percentile of `sorted` (nearest rank).
    static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }
}
