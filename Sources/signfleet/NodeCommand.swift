import ArgumentParser
import DeviceNode
import Fleet
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import SignatureCapture
import Logging
import UnixSignals
import ZeroMQ

/// `signfleet node`: hosts simulated devices. With `--plan <file>` it runs a launcher's
/// ``NodePlan`` (behaviour and connectivity models, history, `stats` lines, SIGUSR1 drain).
/// With `--envelopes N` each device logs in, signs N envelopes offline and syncs them;
/// with neither each device only keeps its connection (hello, heartbeats, reconnect with back-off).
struct NodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "node",
        abstract: "Run a device node hosting one or more simulated devices.",
        discussion: """
            All devices of one node share one ZeroMQ I/O thread; each has its own DEALER socket whose \
            routing id is its device id. Stops cleanly on SIGINT or SIGTERM, after --duration, or, with \
            --envelopes, once every device has signed and synced them all (whichever comes first).
            With --plan (written by `signfleet run`), prints `stats <json>` every statsInterval, appends \
            the devices' operations to the plan's history file, and on SIGUSR1 drains (stops composing, \
            syncs every outbox empty), prints `drained` and exits 0. See docs/fleet-devices.md.
            """
    )

    @Option(help: "A node plan (JSON, written by the launcher); the other device options are then ignored.")
    var plan: String?

    @Option(help: "The coordinator's ZeroMQ endpoint.")
    var connect: String = "tcp://127.0.0.1:5555"

    @Option(help: "How many devices this node hosts.")
    var devices: Int = 1

    @Option(help: "Device ids are <prefix>-<n>.")
    var devicePrefix: String = "device"

    @Option(help: "Stop after this many seconds at most (default: run until signalled or, with --envelopes, until every device is done).")
    var duration: Double?

    @Option(help: "Per-request reply timeout in milliseconds.")
    var requestTimeoutMs: Int = 2000

    @Option(help: "Envelopes each device signs and syncs (0: only keep the connection alive).")
    var envelopes: Int = 0

    @Option(help: "Mean milliseconds between a device's envelopes (exponentially distributed).")
    var intervalMs: Int = 500

    @Option(help: "Directory of the devices' SQLite stores (a restarted node carries on from them).")
    var dataDir: String = "runs/node-data"

    @Option(help: "The user the devices log in as.")
    var email: String = "user1@demo.example"

    @Option(help: "That user's secret.")
    var secret: String = "demo-secret"

    @Option(help: "Seed of every random choice (default: random, printed).")
    var seed: UInt64?

    @OptionGroup var logging: LoggingOptions

    @OptionGroup var transport: TransportOptions

    func validate() throws {
        guard (1...10_000).contains(devices) else { throw ValidationError("--devices must be between 1 and 10000") }
        guard !devicePrefix.isEmpty, devicePrefix.utf8.count <= 200 else {
            throw ValidationError("--device-prefix must be 1 to 200 bytes")
        }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        guard requestTimeoutMs >= 10 else { throw ValidationError("--request-timeout-ms must be at least 10") }
        guard envelopes >= 0 else { throw ValidationError("--envelopes must not be negative") }
        guard intervalMs >= 0 else { throw ValidationError("--interval-ms must not be negative") }
        // Checked here, not converted blindly: `--duration 1e300` or `nan` used to trap the node.
        if let duration, !(duration.isFinite && duration >= 0 && duration <= 1e9) {
            throw ValidationError("--duration must be 0 to 1000000000 seconds, not \(duration)")
        }
    }

    /// Connects once, watching the CURVE handshake: throws when it fails (the coordinator's key is
    /// not `serverKey`, or it does not serve CURVE); returns when `hello` is answered, or after
    /// `patience` without either (a coordinator not up yet: the devices keep trying).
    static func checkServerKey(
        _ serverKey: [UInt8], at endpoint: String, loop: ZMQIOLoop, logger: Logger, patience: Duration = .seconds(10),
        clock: any FleetClock = ContinuousClock()
    ) async throws {
        let client = FleetClient(
            configuration: FleetClientConfiguration(
                endpoint: endpoint, deviceID: "key-check", security: .curve(serverKey: serverKey, keys: try CurveKeyPair.generate())),
            loop: loop, logger: logger, clock: clock)
        let events = client.events
        let connection = Task { await client.run() }
        defer { connection.cancel() }
        let outcome = await withTaskGroup(of: ConnectionEvent?.self) { group in
            group.addTask {
                for await event in events {
                    switch event {
                    case .connected, .handshakeFailed: return event
                    case .lost, .reconnecting: continue
                    }
                }
                return nil
            }
            group.addTask {
                try? await clock.sleep(for: patience)
                return nil
            }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        await client.stop()
        switch outcome {
        case .handshakeFailed(let reason):
            throw ValidationError("cannot use the coordinator at \(endpoint): \(reason) (a plain TCP coordinator needs --plaintext)")
        case .connected:
            return
        default:
            logger.notice("the coordinator did not answer yet; starting the devices, which keep trying", metadata: ["endpoint": "\(endpoint)"])
        }
    }

    func run() async throws {
        if let plan {
            try await runPlan(path: plan)
            return
        }
        let logger = try logging.makeLogger(label: "node")
        let serverKey = try transport.serverKeyBytes()
        if serverKey == nil { logger.warning("PLAIN TCP: the coordinator cannot tell these devices from any peer claiming their ids") }
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "node-io")
        let seed = self.seed ?? UInt64.random(in: 1...999_999)
        announce("node started devices=\(devices) endpoint=\(connect) seed=\(seed)")
        let duration = self.duration
        let work: [@Sendable () async throws -> Void]
        if envelopes > 0 {
            // Fleet devices do not watch their handshakes (a monitor per device costs memory): one
            // connection checks the pinned key first, so a wrong one is an error, not silence.
            if let serverKey { try await Self.checkServerKey(serverKey, at: connect, loop: loop, logger: logger) }
            try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
            try await refuseOrphanedStores()
            let roundTrips = RoundTripMemory()
            work = (1...devices).map { index in
                var deviceSeeds = SeededRandom(mixing: seed, UInt64(index))
                var configuration = SimulatedDeviceConfiguration(
                    deviceID: "\(devicePrefix)-\(index)", endpoint: connect, storeDirectory: dataDir, email: email,
                    secret: secret, seed: deviceSeeds.next(), envelopes: envelopes,
                    meanInterval: .milliseconds(intervalMs), requestTimeout: .milliseconds(requestTimeoutMs), serverKey: serverKey)
                configuration.roundTrips = roundTrips
                let device = SimulatedDevice(configuration: configuration, loop: loop, logger: logger)
                return { try await device.run() }
            }
        } else {
            work = try (1...devices).map { index in
                var deviceLogger = logger
                deviceLogger[metadataKey: "device"] = "\(devicePrefix)-\(index)"
                // Connection-only devices keep no store: each proves a fresh key for this run.
                let security: ClientSecurity = try serverKey.map { .curve(serverKey: $0, keys: try CurveKeyPair.generate()) } ?? .plaintext
                let client = FleetClient(
                    configuration: FleetClientConfiguration(
                        endpoint: connect, deviceID: "\(devicePrefix)-\(index)", security: security,
                        requestTimeout: .milliseconds(requestTimeoutMs)),
                    loop: loop, logger: deviceLogger)
                return { await client.run() }
            }
        }
        let hosted = CancellableWork {
            // `true` from the timer, `false` from a device: the node stops when every device is
            // done, or at --duration (the first device done used to stop all the others).
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for body in work {
                    group.addTask {
                        try await body()
                        return false
                    }
                }
                if let duration {
                    group.addTask {
                        // The process's own clock: --duration is wall time, at the command's edge
                        // (checked finite and at most 1e9 s above).
                        try? await ContinuousClock().sleep(for: .seconds(duration))
                        return !Task.isCancelled
                    }
                }
                var done = 0
                while let timerEnded = try await group.next() {
                    if timerEnded { break }
                    done += 1
                    if done == work.count { break }
                }
                group.cancelAll()
            }
        }
        // SIGTERM/SIGINT cancel the devices, so their sockets close cleanly (LINGER 0) before the exit.
        try await ShutdownSignals.run([hosted], logger: logger, finishing: true)
        await loop.shutdown()
        context.shutdown()
        announce("node stopped")
    }

    /// Refuses to run fewer devices than `dataDir` holds stores for when a store left out still has
    /// signed items waiting for sync: running anyway would exit 0 with them orphaned (issue #14).
    private func refuseOrphanedStores() async throws {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dataDir)) ?? []
        let prefix = "\(devicePrefix)-"
        var orphaned: [(device: String, pending: Int)] = []
        var highest = devices
        for name in names.sorted() where name.hasPrefix(prefix) && name.hasSuffix(".sqlite") {
            let device = String(name.dropLast(".sqlite".count))
            guard let index = Int(device.dropFirst(prefix.count)), index > devices else { continue }
            var configuration = DeviceConfiguration(storePath: URL(fileURLWithPath: dataDir).appendingPathComponent(name).path)
            configuration.deviceId = device
            let node = try await DeviceNode.open(configuration: configuration, accountService: InMemoryAccountService(tokens: [:]))
            let pending = try await node.pendingOutboxItems(limit: Int.max).count
            try await node.close()
            if pending > 0 {
                orphaned.append((device, pending))
                highest = max(highest, index)
            }
        }
        guard orphaned.isEmpty else {
            let list = orphaned.map { "\($0.device) (\($0.pending) pending)" }.joined(separator: ", ")
            throw ValidationError(
                "\(dataDir) holds signed items not yet synced for devices this run would not start: \(list); run with --devices \(highest) or more so they sync, or use another --data-dir")
        }
    }

    /// Runs a launcher's plan until SIGUSR1 has drained it (exit 0) or SIGTERM/SIGINT stops it.
    private func runPlan(path: String) async throws {
        let logger = try logging.makeLogger(label: "node")
        let plan: NodePlan
        do {
            plan = try NodePlan.load(path: path)
        } catch let error as NodePlanError {
            throw ValidationError(error.description)
        }
        var priority: Task<Void, Never>?
        if let niceness = plan.niceness, niceness > 0 {
            // Before the devices start their work, and again for the threads libdispatch starts later.
            do {
                priority = try ProcessPriority.keepLowered(to: niceness)
            } catch {
                logger.warning("node priority unchanged", metadata: ["niceness": "\(niceness)", "error": "\(error)"])
            }
        }
        defer { priority?.cancel() }
        let host = NodeHost(plan: plan, logger: logger)
        // Trapped before `node started`: the launcher sends SIGUSR1 only after it saw the node up.
        // (Ignored first, as before: never its default action, which ends the process.)
        signal(SIGUSR1, SIG_IGN)
        let drains = await UnixSignalsSequence(trapping: .sigusr1)
        announce("node started process=\(plan.process) devices=\(plan.devices.count) endpoint=\(plan.endpoint) pid=\(getpid())")
        // SIGTERM/SIGINT cancel the host: it stops at once, cleanly. A drained host ends the group.
        let work = CancellableWork {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in drains { host.requestDrain() }
                }
                group.addTask { try await host.run(output: announce) }
                try await group.next()
                group.cancelAll()
            }
        }
        try await ShutdownSignals.run([work], logger: logger, finishing: true)
        announce("node stopped")
    }
}
