import Crypto
import Foundation
import FleetProtocol
import FleetZeroMQTransport
import GRDB
import Logging
import SignatureCapture
import ZeroMQ

/// One attacker of a hostile group (``HostileBehaviour``). It runs until cancelled, one attempt
/// every ``HostilePlan/every`` seconds, and appends each attempt with the coordinator's answer to
/// the hostile log. Which target and which variant come from the device's seed; the keys it makes
/// are fresh random keys (an attacker's keys are its own).
struct HostileDevice: Sendable {
    let id: String
    let behaviour: HostileBehaviour
    let plan: NodePlan
    let hostile: HostilePlan
    let seed: UInt64
    let loop: ZMQIOLoop
    let log: HistoryWriter
    let logger: Logger
    /// What its pauses sleep on and its measurements read.
    var clock: any FleetClock = ContinuousClock()
    /// What its attempt lines are stamped with.
    var wall: WallClock = .system

    /// The pause after an attempt (``HostilePlan/every``, kept within the scenario's bounds: a plan
    /// file is input too).
    var pause: Duration { .milliseconds(Int64(min(max(hostile.every, 0.05), 3_600) * 1_000)) }

    /// The coordinator's CURVE key; nil when it serves plain TCP (then every claim of an id is
    /// believed, and the attempts record it as breaches).
    var serverKey: [UInt8]? { plan.serverKey.flatMap(Z85.decode) }

    func run() async throws {
        var random = SeededRandom(mixing: seed, 0xBAD_5EED)
        switch behaviour {
        case .slowReader:
            await survive { try await floodWithoutReading() }
            try await holdUntilCancelled()  // after a local failure of the flood
        case .squat:
            try await squat()
        case .impersonate, .junkPush, .replay:
            var round = 0
            // Its own identity, enrolled in the rival account: a legitimate device of someone else.
            let own = try await enrollOwnIdentity()
            defer { own?.stop() }
            while !Task.isCancelled {
                guard let target = hostile.targets.randomElement(using: &random) else { return }
                await survive {
                    switch behaviour {
                    case .impersonate: try await impersonate(target, variant: round % 3)
                    case .junkPush: try await pushJunk(at: target, from: round % 2 == 0 ? nil : own)
                    default: try await replay(to: target, from: round % 2 == 0 ? nil : own)
                    }
                }
                round += 1
                try await clock.sleep(for: pause)
            }
        }
    }

    // MARK: - Attacks

    /// Variant 0: from an unknown key, ask for the target's `sync.results`. Variant 1: a raw
    /// connection that names itself after the target (its routing id). Variant 2: enroll the
    /// target's id in its own account with new keys, once the target is enrolled (it has synced).
    private func impersonate(_ target: String, variant: Int) async throws {
        switch variant {
        case 0:
            let client = try Connection(self, deviceID: target, keys: nil)
            defer { client.stop() }
            let result = await Self.outcome { try await client.client.request(SyncResultsQuery(deviceID: target)) }
            try record(.impersonate, "results_as_target", target: target, result, mustBeRefused: true)
        case 1:
            let result = try await claimRoutingID(target)
            try record(.impersonate, "routing_id_of_target", target: target, result, mustBeRefused: true)
        default:
            guard try TargetStore(hostile, target)?.hasSynced() == true else { return }
            let client = try Connection(self, deviceID: target, keys: nil)
            defer { client.stop() }
            let result = await enroll(target, on: client, asRival: false)
            try record(.impersonate, "enroll_target_id_with_new_keys", target: target, result, mustBeRefused: true)
        }
    }

    /// Garbage items at the target's next sequence numbers (its store's highest + 1 …), from an
    /// unknown key or from this attacker's own enrolled identity.
    private func pushJunk(at target: String, from own: Connection?) async throws {
        let next = (try TargetStore(hostile, target)?.highestSequence() ?? 0) + 1
        var random = SystemRandomNumberGenerator()
        let items = (0..<3).map { offset in
            SyncItem(
                sequence: next + UInt64(offset), transactionID: UUID().uuidString,
                payload: (0..<96).map { _ in UInt8.random(in: 0...255, using: &random) },
                signature: (0..<64).map { _ in UInt8.random(in: 0...255, using: &random) })
        }
        let result = await push(SyncPush(deviceID: target, items: items), from: own, as: target)
        try record(.junkPush, own == nil ? "push_junk_unknown_key" : "push_junk_own_key", target: target, result, mustBeRefused: true)
    }

    /// The target's latest signed items, byte for byte as it sent them, pushed again. They are read
    /// from the coordinator's store, as if captured: a device deletes a payload once it is synced.
    private func replay(to target: String, from own: Connection?) async throws {
        guard let items = try CapturedItems.latest(of: target, in: hostile.capturedItemsStore, limit: 3), !items.isEmpty else { return }
        let result = await push(SyncPush(deviceID: target, items: items), from: own, as: target)
        try record(.replay, own == nil ? "replay_unknown_key" : "replay_own_key", target: target, result, mustBeRefused: true)
    }

    /// Enrolls each of its share of the targets in the rival account, from the start (the original
    /// attack: first come, the honest device refused for ever). Allowed: ids are per account; the
    /// verdict on the honest devices shows it harmed nobody. The squatters of the whole group share
    /// the targets; an attempt without an answer is tried again (its keys come from the seed, so a
    /// second enrollment, or one after a restart of this process, is the same one).
    private func squat() async throws {
        let index = hostile.squatters.firstIndex(of: id) ?? 0
        let share = hostile.targets.enumerated().filter { $0.offset % max(1, hostile.squatters.count) == index }.map(\.element)
        for target in share {
            for _ in 0..<5 {
                try Task.checkCancellation()
                var result: (result: String, detail: String?) = ("error", nil)
                await survive {
                    let client = try Connection(self, deviceID: target, keys: try keys(for: target).transport)
                    defer { client.stop() }
                    result = await enroll(target, on: client, asRival: true)
                    try record(.squat, "enroll_target_id_in_rival_account", target: target, result, mustBeRefused: false)
                }
                if result.result != "no_reply" && result.result != "error" { break }
                try await clock.sleep(for: pause)
            }
        }
        try await holdUntilCancelled()
    }

    /// Sends ``HostilePlan/slowReaderMessages`` heartbeats as fast as the socket takes them and
    /// never reads a reply; the socket stays open, unread, until the attacker stops.
    private func floodWithoutReading() async throws {
        var options = SocketOptions()
        if let serverKey { options.curve = .client(serverKey: serverKey, keys: try CurveKeyPair.generate()) }
        options.receiveHighWaterMark = 100
        options.receiveBufferLimit = 100
        options.sendHighWaterMark = Int32(clamping: hostile.slowReaderMessages + 100)
        let socket = try await loop.makeSocket(.dealer, options: options)
        defer { Task { await socket.close() } }
        try await socket.connect(plan.endpoint)
        let codec = WireCodec()
        let started = clock.now
        var sent = 0
        for index in 1...max(1, hostile.slowReaderMessages) where !Task.isCancelled {
            try await socket.send(try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: UInt64(index))))
            sent += 1
        }
        let seconds = clock.elapsed(since: started).seconds
        try record(
            .slowReader, "flood_never_read", target: nil, ("sent", "\(sent) heartbeats in \(String(format: "%.1f", seconds)) s; no reply read"),
            mustBeRefused: false)
        try await holdUntilCancelled()
    }

    // MARK: - Helpers

    /// A connection of this attacker: a ``FleetClient`` with fresh keys (or the given ones),
    /// naming `deviceID` in its `hello`.
    struct Connection: Sendable {
        let client: FleetClient
        let task: Task<Void, Never>

        init(_ device: HostileDevice, deviceID: String, keys: CurveKeyPair?) throws {
            let security: ClientSecurity =
                if let serverKey = device.serverKey { .curve(serverKey: serverKey, keys: try keys ?? CurveKeyPair.generate()) } else { .plaintext }
            var logger = device.logger
            logger[metadataKey: "device"] = "\(device.id)"
            logger.logLevel = .warning
            let client = FleetClient(
                configuration: FleetClientConfiguration(
                    endpoint: device.plan.endpoint, deviceID: deviceID, security: security, requestTimeout: .seconds(2), maxAttempts: 2),
                loop: device.loop, logger: logger)
            self.client = client
            task = Task { await client.run() }
        }

        func stop() {
            task.cancel()
            let client = self.client
            Task { await client.stop() }
        }
    }

    /// Logs in to the rival account and enrolls this attacker's own id with its own keys (from its
    /// seed, so a restarted process is the same device); nil (and an attempt recorded) when that fails.
    private func enrollOwnIdentity() async throws -> Connection? {
        var connection: Connection?
        await survive {
            let candidate = try Connection(self, deviceID: id, keys: try keys(for: id).transport)
            let result = await enroll(id, on: candidate, asRival: true)
            guard result.result == "ok" else {
                candidate.stop()
                try record(behaviour, "enroll_own_id", target: nil, result, mustBeRefused: false)
                return
            }
            connection = candidate
        }
        return connection
    }

    /// Logs in (to the rival account, or to the honest one an insider knows) and enrolls `deviceID`
    /// with this attacker's signing key for it.
    private func enroll(_ deviceID: String, on connection: Connection, asRival: Bool) async -> (result: String, detail: String?) {
        await Self.outcome {
            let login = asRival
                ? AccessTokenRequest(email: hostile.rivalEmail, secret: hostile.rivalSecret)
                : AccessTokenRequest(email: plan.email, secret: plan.secret)
            let token = try await connection.client.request(login).accessToken
            let key = try keys(for: deviceID).signing.publicKey.rawRepresentation
            return try await connection.client.request(EnrollDevice(accessToken: token, deviceID: deviceID, publicKey: Array(key)))
        }
    }

    /// This attacker's keys for `deviceID`, derived from its seed: the same after a restart.
    func keys(for deviceID: String) throws -> (signing: Curve25519.Signing.PrivateKey, transport: CurveKeyPair) {
        var random = SeededRandom(mixing: seed, FleetLayout.stableHash(deviceID), 0x4B_E75)
        let signing = try Curve25519.Signing.PrivateKey(rawRepresentation: (0..<4).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } })
        let transport = try CurveKeyPair(secretKey: (0..<4).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } })
        return (signing, transport)
    }

    /// Runs `body`; a local failure (a socket, a store being written) is logged and costs this
    /// attempt, not the attacker's process.
    private func survive(_ body: () async throws -> Void) async {
        do {
            try await body()
        } catch is CancellationError {
        } catch {
            logger.warning("hostile attempt failed locally", metadata: ["device": "\(id)", "error": "\(error)"])
        }
    }

    private func holdUntilCancelled() async throws {
        while !Task.isCancelled { try await clock.sleep(for: .seconds(3600)) }
        throw CancellationError()
    }

    /// A push for `target` from a fresh unknown key (`own` nil) or from the attacker's own identity.
    private func push(_ request: SyncPush, from own: Connection?, as target: String) async -> (result: String, detail: String?) {
        if let own { return await Self.outcome { try await own.client.request(request) } }
        do {
            let connection = try Connection(self, deviceID: target, keys: nil)
            defer { connection.stop() }
            return await Self.outcome { try await connection.client.request(request) }
        } catch {
            return ("error", "\(error)")
        }
    }

    /// A raw DEALER that completes the handshake with its own key but sets its routing id to
    /// `target`, then sends a heartbeat and reads one answer.
    private func claimRoutingID(_ target: String) async throws -> (result: String, detail: String?) {
        var options = SocketOptions()
        if let serverKey { options.curve = .client(serverKey: serverKey, keys: try CurveKeyPair.generate()) }
        options.routingID = Array(target.utf8)
        let socket = try await loop.makeSocket(.dealer, options: options)
        defer { Task { await socket.close() } }
        try await socket.connect(plan.endpoint)
        let codec = WireCodec()
        try await socket.send(try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: 1)))
        let reply: [[UInt8]]? = try await withThrowingTaskGroup(of: [[UInt8]]?.self) { group in
            group.addTask { try await socket.receive() }
            group.addTask {
                try await clock.sleep(for: .seconds(3))
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        guard let reply else { return ("no_reply", nil) }
        do {
            let message = try codec.decode(reply)
            if message.header.type == FleetError.messageType {
                let error = try codec.decodeBody(FleetError.self, from: message)
                return (error.code.rawValue, error.message)
            }
            return ("ok", "answered \(message.header.type)")
        } catch {
            return ("malformed_reply", "\(error)")
        }
    }

    /// `ok` when the request succeeded, the error's code when the coordinator refused it,
    /// `no_reply` when it did not answer in time.
    static func outcome(_ body: () async throws -> some Sendable) async -> (result: String, detail: String?) {
        do {
            _ = try await body()
            return ("ok", nil)
        } catch let error as FleetError {
            return (error.code == .timeout ? "no_reply" : error.code.rawValue, error.message)
        } catch is CancellationError {
            return ("cancelled", nil)
        } catch {
            return ("error", "\(error)")
        }
    }

    private func record(
        _ behaviour: HostileBehaviour, _ action: String, target: String?, _ outcome: (result: String, detail: String?), mustBeRefused: Bool
    ) throws {
        guard outcome.result != "cancelled" else { return }
        try log.appendLine(
            HostileAttempt(
                time: wall.secondsSince1970, device: id, behaviour: behaviour, action: action, target: target,
                result: outcome.result, breach: mustBeRefused && outcome.result == "ok", detail: outcome.detail))
    }
}

/// An honest device's store, opened read-only by an attacker on the same machine: what it would
/// have captured off a compromised device or a log (its signed items), and whether it has synced.
struct TargetStore {
    let queue: DatabaseQueue

    /// Nil while the target has no store yet.
    init?(_ plan: HostilePlan, _ target: String) throws {
        let path = URL(fileURLWithPath: plan.targetStores).appendingPathComponent("\(target).sqlite").path
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        queue = try CheckerDatabase.openReadOnly(path)
    }

    func hasSynced() throws -> Bool {
        defer { try? queue.close() }
        return try queue.read { db in
            try db.tableExists("outbox") && (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE status = 'synced'") ?? 0) > 0
        }
    }

    func highestSequence() throws -> UInt64 {
        defer { try? queue.close() }
        return try queue.read { db in
            guard try db.tableExists("outbox") else { return 0 }
            return UInt64(clamping: try Int64.fetchOne(db, sql: "SELECT MAX(sequence) FROM outbox") ?? 0)
        }
    }
}

/// Signed items as they crossed the wire, read from the coordinator's store (its `envelope` rows
/// keep the payload and the device's signature): what an attacker who captured them would have.
enum CapturedItems {
    static func latest(of device: String, in store: String, limit: Int) throws -> [SyncItem]? {
        guard FileManager.default.fileExists(atPath: store) else { return nil }
        let queue = try CheckerDatabase.openReadOnly(store)
        defer { try? queue.close() }
        return try queue.read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT sequence, transactionID, payload, deviceSignature FROM envelope WHERE deviceID = ?
                ORDER BY sequence DESC LIMIT ?
                """, arguments: [device, limit])
            return rows.reversed().map { row in
                let sequence: Int64 = row["sequence"]
                let payload: Data = row["payload"]
                let signature: Data = row["deviceSignature"]
                return SyncItem(
                    sequence: UInt64(clamping: sequence), transactionID: row["transactionID"], payload: Array(payload),
                    signature: Array(signature))
            }
        }
    }
}
