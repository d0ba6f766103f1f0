@testable import DeviceNode
import Envelopes
import FleetProtocol
import CoordinatorPostgres
import Foundation
import GRDB
import SignatureCapture

@testable import Coordinator
@testable import Fleet

/// A real small run directory: a coordinator store, devices that really signed envelopes
/// (real DeviceNode stores, real capture, real keys) and really synced them through the
/// coordinator's ingest, and a history written through HistoryWriter as a node writes it.
///
/// Every envelope has an in-person signer (routing order 1, signed on the device) and a
/// remote signer (order 2, `sent` on the server), so routing has something to check.
struct CheckerRun {
    let root: String
    let run: RunDirectory
    /// Device id → its transactions in sequence order.
    let transactions: [String: [String]]

    /// - Parameters:
    ///   - devices: device ids.
    ///   - envelopes: envelopes each device signs.
    ///   - unsynced: how many of each device's last envelopes are never pushed (the run "ends" first).
    ///   - postgres: a PostgreSQL URL with `?schema=` to keep the coordinator's store in instead of
    ///     `coordinator.sqlite` (written to `coordinator.json` as a `store: postgres` run does).
    ///   - rest: envelopes then created over the REST API's sender (transactions `rest-tx-<n>`,
    ///     one remote signer each), as `POST …/envelopes` creates them.
    static func make(
        devices: [String] = ["a-1", "b-1"], envelopes: Int = 3, unsynced: [String: Int] = [:], postgres: String? = nil, rest: Int = 0
    ) async throws -> CheckerRun {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("checker-\(UUID().uuidString)").path
        let run = try RunDirectory.create(root: root)
        var transactions: [String: [String]] = [:]
        let storage: any CoordinatorStorage
        if let postgres {
            storage = try await PostgresCoordinatorStore(url: postgres)
            let configuration = try JSONSerialization.data(withJSONObject: ["store": postgres])
            try configuration.write(to: URL(fileURLWithPath: run.coordinatorConfigFile))
        } else {
            storage = try CoordinatorStore(path: run.coordinatorStore)
        }
        let services = CoordinatorServices(storage: storage)
        _ = try await services.accounts.createAccount(id: "acme", name: "Acme", offlineSigning: true)
        _ = try await services.accounts.createUser(accountID: "acme", name: "Ann", email: "ann@acme.example", secret: "secret-123")
        let token = try await services.auth.issueToken(email: "ann@acme.example", secret: "secret-123").accessToken
        for (deviceIndex, device) in devices.enumerated() {
            let history = try HistoryWriter(path: run.historyFile(process: "node-\(device)"))
            defer { history.close() }
            func record(_ type: HistoryEvent.Kind, _ op: HistoryEvent.Operation, envelope: String? = nil, transaction: String? = nil,
                        sequence: UInt64? = nil, serverEnvelope: String? = nil) throws {
                try history.append(HistoryEvent(
                    process: "node-\(device)", type: type, op: op, device: device, envelope: envelope, transaction: transaction,
                    sequence: sequence, serverEnvelope: serverEnvelope))
            }
            var configuration = DeviceConfiguration(storePath: run.deviceStore(device: device))
            configuration.deviceId = device
            let user = UserInfo(accountId: "acme", accountName: "Acme", userId: "u1", userName: "Ann Host", email: "host@example.com", host: "h")
            let node = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: ["t": user]))
            try await node.login(accessToken: "t")
            for index in 0..<envelopes {
                let transaction = "\(device)-tx-\(index + 1)"
                transactions[device, default: []].append(transaction)
                let id = try await node.compose(
                    try SampleEnvelope.inPerson(signers: 1, remoteSigners: 1, transactionId: transaction), mode: .offline)
                try record(.invoke, .sign, envelope: id, transaction: transaction)
                let outcome = try await node.resumeSigning(envelopeId: id, driver: SyntheticSigner(seed: UInt64(deviceIndex * 100 + index + 1)))
                guard case .completed(_, let sequence?) = outcome else { throw FixtureError("signing did not queue \(transaction): \(outcome)") }
                try record(.ok, .sign, envelope: id, transaction: transaction, sequence: sequence)
            }
            _ = try await services.devices.enroll(EnrollDevice(accessToken: token, deviceID: device, publicKey: node.publicKey), routingID: device)
            let pending = try await node.pendingOutboxItems()
            let pushed = pending.dropLast(unsynced[device] ?? 0)
            for item in pushed { try record(.invoke, .sync, envelope: item.envelope.localId, transaction: item.envelope.transactionId, sequence: item.sequence) }
            if !pushed.isEmpty {
                try await node.beginSync(sequences: pushed.map(\.sequence))
                let ack = try await services.ingest.apply(SyncPush(deviceID: device, items: pushed.compactMap(\.syncItem)), routingID: device)
                try await node.recordAcknowledgement(ack)
                for (item, result) in zip(pushed, ack.results) {
                    try record(.ok, .sync, envelope: item.envelope.localId, transaction: item.envelope.transactionId, sequence: item.sequence,
                               serverEnvelope: result.envelopeID)
                }
            }
            try await node.close()
        }
        let routes = RESTRoutes(services: services)
        for index in 0..<rest {
            let envelope = try SampleEnvelope.inPerson(signers: 0, remoteSigners: 1, transactionId: "rest-tx-\(index + 1)")
            _ = try await routes.sender.send(envelope, accessToken: token, account: "acme", at: Date())
            transactions[RESTRoutes.senderDeviceID, default: []].append(envelope.transactionId)
        }
        // Closed, so the files can be copied whole (no write-ahead log left behind).
        if let store = storage as? CoordinatorStore { try store.database.close() }
        (storage as? PostgresCoordinatorStore)?.close()
        return CheckerRun(root: root, run: run, transactions: transactions)
    }

    /// A copy of the run directory (or of `source`) to break on purpose.
    func copy(of source: RunDirectory? = nil) throws -> RunDirectory {
        let path = URL(fileURLWithPath: root).appendingPathComponent("copy-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.copyItem(atPath: (source ?? run).path, toPath: path)
        return RunDirectory(path: path)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Runs `body` on a read-write connection to a store of a copy (foreign keys off, so rows can
    /// be broken the way a faulty server would break them).
    static func edit(_ path: String, _ body: (Database) throws -> Void) throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = false
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.writeWithoutTransaction { db in try body(db) }
        try queue.close()
    }

    /// Rebuilds `envelope` without its unique keys (a server that lost them), then copies the row
    /// with `id` under a new id: the same (device, transaction) and (device, sequence) twice.
    static func duplicateEnvelope(_ db: Database, id: String, as newID: String) throws {
        let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(envelope)").map { $0["name"] as String }
        let list = columns.map { "\"\($0)\"" }.joined(separator: ", ")
        try db.execute(sql: "CREATE TABLE envelope_loose AS SELECT \(list) FROM envelope ORDER BY rowid")
        try db.execute(sql: "DROP TABLE envelope")
        try db.execute(sql: "ALTER TABLE envelope_loose RENAME TO envelope")
        let select = columns.map { $0 == "id" ? "?" : "\"\($0)\"" }.joined(separator: ", ")
        try db.execute(sql: "INSERT INTO envelope (\(list)) SELECT \(select) FROM envelope WHERE id = ?", arguments: [newID, id])
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
