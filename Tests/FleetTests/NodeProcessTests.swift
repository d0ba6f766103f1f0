import FleetTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import Fleet

/// `signfleet node --plan` as a real process against a real `signfleet coordinator`
/// (ZeroMQ, SQLite, history file, stats lines, SIGUSR1 drain, SIGKILL and restart).
@Suite(.serialized) struct NodeProcessTests {
    static let seed: UInt64 = testSeed("NodeProcessTests")

    static func binary() throws -> String {
        guard let path = ProcessInfo.processInfo.environment["SIGNFLEET_BIN"], FileManager.default.isExecutableFile(atPath: path) else {
            throw TestSetupError(message: "set SIGNFLEET_BIN to the built signfleet binary")
        }
        return path
    }

    struct TestSetupError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// A plan with `devices` devices `n-1`, `n-2`, …, seeded from `seed`.
    static func plan(
        directory: String, endpoint: String, devices: Int, seed: UInt64, behaviour: Behaviour = Behaviour(),
        connectivity: Connectivity = Connectivity(), serverKey: String? = nil
    ) -> NodePlan {
        NodePlan(
            process: "node-n-1", group: "n", endpoint: endpoint, dataDirectory: directory + "/devices",
            historyFile: directory + "/history/node-n-1.jsonl", runStart: Date().timeIntervalSince1970, duration: 120,
            devices: (1...devices).map { DevicePlan(id: "n-\($0)", seed: seed &* 1000 &+ UInt64($0)) }, behaviour: behaviour,
            connectivity: connectivity, pens: ["applePencil": 2, "finger": 1, "signaturePad": 1], statsInterval: 0.2,
            requestTimeout: 0.3, serverKey: serverKey)
    }

    /// The CURVE public key a coordinator printed, which the plan's devices pin.
    static func serverKey(of coordinator: ChildProcess) async throws -> String {
        let line = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("curve-public-key ") }
        return String(line.dropFirst("curve-public-key ".count))
    }

    static func write(_ plan: NodePlan, to path: String) throws {
        try JSONEncoder().encode(plan).write(to: URL(fileURLWithPath: path))
    }

    static func coordinator(store: String, bind: String = "tcp://127.0.0.1:*", extra: [String] = []) async throws -> (ChildProcess, String) {
        let child = try ChildProcess.launch(
            try binary(), ["coordinator", "--bind", bind, "--heartbeat-ms", "200", "--store", store, "--seed-demo"] + extra,
            name: "coordinator")
        let line = try await child.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }
        return (child, String(line.dropFirst("listening ".count)))
    }

    static func stats(_ line: String) -> NodeStats? {
        guard line.hasPrefix(NodeStats.linePrefix) else { return nil }
        return try? JSONDecoder().decode(NodeStats.self, from: Data(line.dropFirst(NodeStats.linePrefix.count).utf8))
    }

    static func temporaryDirectory(_ name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Envelopes the coordinator's store holds, from `signfleet admin envelopes` (which also checks
    /// every device's sequence is gapless and without duplicates).
    static func coordinatorEnvelopes(store: String) async throws -> (valid: Bool, total: Int, output: String) {
        let check = try ChildProcess.launch(try binary(), ["admin", "envelopes", "--store", store], name: "admin")
        let status = try await check.waitForExit(timeout: .seconds(30))
        let last = check.lines(.standardOutput).last ?? ""
        let total = last.hasPrefix("valid: ") ? Int(last.dropFirst("valid: ".count).prefix { $0.isNumber }) ?? -1 : -1
        return (status == 0 && last.hasPrefix("valid: "), total, check.output)
    }

    @Test func aNodeSignsSyncsRecordsHistoryAndDrainsOnSIGUSR1() async throws {
        print("node-plan seed \(Self.seed) (replay with SIGNFLEET_SEED=\(Self.seed))")
        let directory = try Self.temporaryDirectory("node-plan")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = directory + "/coordinator.sqlite"
        let (coordinator, endpoint) = try await Self.coordinator(store: store)
        let serverKey = try await Self.serverKey(of: coordinator)
        defer { Task { await coordinator.terminate() } }
        let behaviour = Behaviour(
            envelopesPerMinute: 240, templateFraction: 0.4, inPersonSigners: IntRange(1, 2), remoteSigners: IntRange(0, 1),
            signingDuration: ClosedSpan(0.01, 0.1), cancelRate: 0.15, declineRate: 0.15, sync: .whenOnline, maxEnvelopes: 5)
        let plan = Self.plan(
            directory: directory, endpoint: endpoint, devices: 3, seed: Self.seed, behaviour: behaviour,
            connectivity: Connectivity(model: .gilbertElliott(onlineMean: 1, offlineMean: 0.4), startOffline: 0.3), serverKey: serverKey)
        let planPath = directory + "/plan.json"
        try Self.write(plan, to: planPath)

        let node = try ChildProcess.launch(try Self.binary(), ["node", "--plan", planPath], name: "node")
        defer { Task { await node.terminate() } }
        // Every device composes its 5 envelopes, online or not.
        try await node.waitForLine(in: .standardOutput, timeout: .seconds(90)) { Self.stats($0)?.composed == 15 }
        node.signal(SIGUSR1)
        #expect(try await node.waitForExit(timeout: .seconds(90)) == 0, "\(node.output)")
        let output = node.lines(.standardOutput)
        #expect(output.contains("drained"), "\(node.output)")
        let stats = output.compactMap(Self.stats)
        #expect(stats.count >= 2)
        let final = try #require(stats.last)
        #expect(final.pending == 0 && final.devices == 3 && final.online == 3, "\(final)")
        #expect(final.composed == final.signed + final.cancelled + final.declined, "\(final)")

        let events = try HistoryReader.read(path: plan.historyFile).events
        for device in plan.devices.map(\.id) {
            let mine = events.filter { $0.device == device }
            let composeOK = mine.filter { $0.op == .compose && $0.type == .ok }
            #expect(composeOK.map(\.transaction) == (1...5).map { "\(device)-\($0)" }, "\(device) composed \(composeOK)")
            #expect(mine.filter { $0.op == .compose && $0.type == .invoke }.count == 5)
            #expect(!mine.contains { $0.type == .fail }, "\(mine.filter { $0.type == .fail })")
            // Every queued envelope (signed or declined) was synced: one ok per sequence with the server's id.
            let queued = mine.filter { ($0.op == .sign || $0.op == .decline) && $0.type == .ok }.compactMap(\.sequence)
            let syncedOK = mine.filter { $0.op == .sync && $0.type == .ok }
            #expect(Set(syncedOK.compactMap(\.sequence)) == Set(queued), "\(device): queued \(queued), synced \(syncedOK)")
            #expect(syncedOK.allSatisfy { $0.serverEnvelope != nil })
            // Each sync ok follows an invoke of the same sequence.
            for ok in syncedOK {
                let invoked = mine.firstIndex { $0.op == .sync && $0.type == .invoke && $0.sequence == ok.sequence }
                #expect(invoked.map { index in mine[index].time <= ok.time } == true)
            }
            #expect(mine.contains { $0.op == .online } && mine.last { $0.op == .drain }?.type == .ok)
        }
        // Each device's first connectivity event says what its seeded model says then (within 50 ms
        // of a change: the event is written just after the device looked). Whether any device goes
        // offline at all is the seed's business (all three start online about a third of the
        // time, and a loaded machine once saw none go offline before the drain), so it is not
        // expected as such.
        for device in plan.devices {
            let first = try #require(events.first { $0.device == device.id && ($0.op == .offline || $0.op == .online) })
            var model = ConnectivityModel(connectivity: plan.connectivity, outages: plan.outages, seed: device.seed)
            let t = first.time - plan.runStart
            let modelled = [model.state(at: max(0, t - 0.05)).online, model.state(at: max(0, t)).online]
            #expect(modelled.contains(first.op == .online), "\(device.id) first \(first.op) at \(t) s, the model says \(modelled)")
        }
        #expect(events.contains { $0.op == .compose && $0.details?["template"] != nil }, "some envelopes come from templates")
        let queuedTotal = events.filter { ($0.op == .sign || $0.op == .decline) && $0.type == .ok && $0.sequence != nil }.count
        let held = try await Self.coordinatorEnvelopes(store: store)
        #expect(held.valid && held.total == queuedTotal, "\(held.output)\nqueued \(queuedTotal)")
    }

    @Test func aNodeKilledMidRunCarriesOnFromItsStoresAfterARestart() async throws {
        print("node-plan-kill seed \(Self.seed) (replay with SIGNFLEET_SEED=\(Self.seed))")
        let directory = try Self.temporaryDirectory("node-plan-kill")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = directory + "/coordinator.sqlite"
        let (coordinator, endpoint) = try await Self.coordinator(store: store)
        let serverKey = try await Self.serverKey(of: coordinator)
        defer { Task { await coordinator.terminate() } }
        let behaviour = Behaviour(
            envelopesPerMinute: 600, inPersonSigners: IntRange(1, 2), signingDuration: ClosedSpan(0, 0.05),
            declineRate: 0.1, sync: .whenOnline, maxEnvelopes: 12)
        let plan = Self.plan(directory: directory, endpoint: endpoint, devices: 2, seed: Self.seed, behaviour: behaviour, serverKey: serverKey)
        let planPath = directory + "/plan.json"
        try Self.write(plan, to: planPath)

        let first = try ChildProcess.launch(try Self.binary(), ["node", "--plan", planPath], name: "node-1")
        defer { Task { await first.terminate() } }
        let killAt = Int(2 + Self.seed % 6)
        // Killed from the output thread as the line is printed: at that point of its progress
        // however late this test's own task runs.
        first.onLines(1, in: .standardOutput, where: { (Self.stats($0)?.synced ?? 0) >= killAt }) { first.signal(SIGKILL) }
        try await first.waitForLine(in: .standardOutput, timeout: .seconds(60)) { (Self.stats($0)?.synced ?? 0) >= killAt }
        _ = try await first.waitForExit(timeout: .seconds(30))
        let before = try HistoryReader.read(path: plan.historyFile).events

        let second = try ChildProcess.launch(try Self.binary(), ["node", "--plan", planPath], name: "node-2")
        defer { Task { await second.terminate() } }
        // The restarted devices carry on composing where they were. A busy machine may let the
        // first run get far past `killAt` before the kill lands: wait for at most what is left
        // (counted from the compose invokes, which are never fewer than the composed envelopes).
        let invokedBefore = before.filter { $0.op == .compose && $0.type == .invoke }.count
        let left = plan.devices.count * (behaviour.maxEnvelopes ?? 0) - invokedBefore
        let awaited = min(2, max(0, left))
        try await second.waitForLine(in: .standardOutput, timeout: .seconds(60)) { (Self.stats($0)?.composed ?? -1) >= awaited }
        second.signal(SIGUSR1)
        #expect(try await second.waitForExit(timeout: .seconds(90)) == 0, "\(second.output)")
        #expect(second.lines(.standardOutput).contains("drained"))

        let events = try HistoryReader.read(path: plan.historyFile).events
        let after = events.dropFirst(before.count)
        for device in plan.devices.map(\.id) {
            let composed = events.filter { $0.device == device && $0.op == .compose && $0.type == .ok }.compactMap(\.transaction)
            #expect(Set(composed).count == composed.count, "\(device) composed a transaction twice: \(composed)")
            let queued = events.filter { $0.device == device && ($0.op == .sign || $0.op == .decline) && $0.type == .ok }
            let sequences = queued.compactMap(\.sequence)
            #expect(Set(sequences).count == sequences.count, "\(device) queued a sequence twice: \(sequences)")
            let transactions = queued.compactMap(\.transaction)
            #expect(Set(transactions).count == transactions.count, "\(device) signed a transaction twice")
            // The sequence continues: the restarted device's numbers come after the first run's.
            let firstMax = before.filter { $0.device == device && $0.op == .sync && $0.type == .ok }.compactMap(\.sequence).max() ?? 0
            let secondMin = after.filter { $0.device == device && ($0.op == .sign || $0.op == .decline) && $0.type == .ok }
                .compactMap(\.sequence).min()
            if let secondMin { #expect(secondMin > firstMax, "\(device): \(secondMin) after \(firstMax)") }
            let firstComposed = before.filter { $0.device == device && $0.op == .compose && $0.type == .invoke }.count
            let secondTransactions = after.filter { $0.device == device && $0.op == .compose && $0.type == .invoke }.compactMap(\.transaction)
            let secondNumbers = secondTransactions.compactMap { SimulatedDevice.envelopeNumber(inTransaction: $0, device: device) }
            #expect(secondNumbers.count == secondTransactions.count, "\(device)'s ids name its envelopes: \(secondTransactions)")
            if let next = secondNumbers.first { #expect(next >= firstComposed, "\(device) restarted at \(next) after \(firstComposed)") }
            // The second life's ids are its own (`<device>-<n>.<life>`), the first life's plain.
            #expect(secondTransactions.allSatisfy { $0.count == "\(device)-\(SimulatedDevice.envelopeNumber(inTransaction: $0, device: device) ?? 0)".count + 9 })
            let firstTransactions = before.filter { $0.device == device && $0.op == .compose && $0.type == .invoke }.compactMap(\.transaction)
            #expect(firstTransactions.allSatisfy { !$0.contains(".") }, "\(firstTransactions)")
        }
        let held = try await Self.coordinatorEnvelopes(store: store)
        #expect(held.valid, "\(held.output)")
        // Every envelope the coordinator holds is in the history as queued (killed runs may have
        // queued some without recording the ok, never the other way round).
        let queuedTotal = Set(events.filter { ($0.op == .sign || $0.op == .decline) && $0.type == .ok }.compactMap(\.transaction)).count
        #expect(held.total >= queuedTotal && held.total > 0, "\(held.output)\nqueued \(queuedTotal)")
    }

    /// A device that goes offline and comes back opens a new socket (a new `hello`) but keeps its
    /// sync session: the coordinator sees one `device.enroll` per device, however many times each
    /// came back with items to push.
    @Test func devicesThatComeBackOnlineEnrollOncePerCoordinator() async throws {
        print("node-plan-reconnect seed \(Self.seed) (replay with SIGNFLEET_SEED=\(Self.seed))")
        let directory = try Self.temporaryDirectory("node-plan-reconnect")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (coordinator, endpoint) = try await Self.coordinator(store: directory + "/coordinator.sqlite", extra: ["--http", "127.0.0.1:0"])
        let serverKey = try await Self.serverKey(of: coordinator)
        defer { Task { await coordinator.terminate() } }
        let httpLine = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("http ") }
        let behaviour = Behaviour(
            envelopesPerMinute: 300, inPersonSigners: IntRange(1, 1), signingDuration: ClosedSpan(0, 0.02), sync: .whenOnline,
            maxEnvelopes: 30)
        var plan = Self.plan(directory: directory, endpoint: endpoint, devices: 2, seed: Self.seed, behaviour: behaviour, serverKey: serverKey)
        // Every device offline in these windows (seconds after the plan's start) while it composes.
        plan.outages = [Outage(start: 3, end: 3.8), Outage(start: 4.6, end: 5.4), Outage(start: 6.2, end: 7)]
        try Self.write(plan, to: directory + "/plan.json")
        let node = try ChildProcess.launch(try Self.binary(), ["node", "--plan", directory + "/plan.json"], name: "node")
        defer { Task { await node.terminate() } }
        try await node.waitForLine(in: .standardOutput, timeout: .seconds(90)) { Self.stats($0)?.composed == 60 }
        node.signal(SIGUSR1)
        #expect(try await node.waitForExit(timeout: .seconds(60)) == 0, "\(node.output)")

        // Each device came back from an outage with something to push, and pushed it.
        let events = try HistoryReader.read(path: plan.historyFile).events
        for device in plan.devices.map(\.id) {
            let mine = events.filter { $0.device == device }
            let backOnline = mine.indices.filter { mine[$0].op == .online && mine[..<$0].contains { $0.op == .offline } }
            let pushedAfter = backOnline.filter { index in mine[index...].contains { $0.op == .sync && $0.type == .ok } }
            #expect(!pushedAfter.isEmpty, "\(device) never synced after coming back online: \(mine.filter { [.online, .offline].contains($0.op) })")
        }
        let metrics = try await Self.metrics(String(httpLine.dropFirst("http ".count)))
        let enrollments = Self.sum(metrics, "signfleet_requests_total", labelled: "type=\"device.enroll\"")
        let hellos = Self.sum(metrics, "signfleet_requests_total", labelled: "type=\"hello\"")
        #expect(enrollments == Double(plan.devices.count), "device.enroll requests: \(enrollments), hello: \(hellos)")
        #expect(hellos > enrollments, "every return opened a new connection: hello \(hellos)")
    }

    static func metrics(_ address: String) async throws -> String {
        let url = try #require(URL(string: "http://\(address)/metrics"))
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, _) = try await session.data(from: url)
        return String(decoding: data, as: UTF8.self)
    }

    /// The sum of a Prometheus counter's samples whose labels contain `label`.
    static func sum(_ metrics: String, _ name: String, labelled label: String) -> Double {
        metrics.split(separator: "\n").filter { $0.hasPrefix(name + "{") && $0.contains(label) }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }

    /// The same plan run twice on fresh stores and coordinators makes the same decisions;
    /// another seed makes others.
    @Test func theSameSeedGivesTheSameDecisionsAcrossRuns() async throws {
        let behaviour = Behaviour(
            envelopesPerMinute: 600, templateFraction: 0.5, inPersonSigners: IntRange(1, 3), remoteSigners: IntRange(0, 1),
            signingDuration: ClosedSpan(0, 0.02), cancelRate: 0.2, declineRate: 0.2, sync: .every(0.3), maxEnvelopes: 6)
        func decisions(seed: UInt64) async throws -> [String] {
            let directory = try Self.temporaryDirectory("node-plan-seed")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (coordinator, endpoint) = try await Self.coordinator(store: directory + "/coordinator.sqlite")
            let serverKey = try await Self.serverKey(of: coordinator)
            defer { Task { await coordinator.terminate() } }
            let plan = Self.plan(directory: directory, endpoint: endpoint, devices: 2, seed: seed, behaviour: behaviour, serverKey: serverKey)
            try Self.write(plan, to: directory + "/plan.json")
            let node = try ChildProcess.launch(try Self.binary(), ["node", "--plan", directory + "/plan.json"], name: "node")
            defer { Task { await node.terminate() } }
            try await node.waitForLine(in: .standardOutput, timeout: .seconds(60)) { Self.stats($0)?.composed == 12 }
            node.signal(SIGUSR1)
            #expect(try await node.waitForExit(timeout: .seconds(60)) == 0, "\(node.output)")
            // What each device decided, in its order: the operation, its pen and template, and how it ended.
            return try HistoryReader.read(path: plan.historyFile).events
                .filter { [.compose, .sign, .cancel, .decline].contains($0.op) }
                .sorted { ($0.device ?? "", $0.time) < ($1.device ?? "", $1.time) }
                .map { "\($0.device ?? "") \($0.type) \($0.op) \($0.transaction ?? "") \($0.details?["pen"] ?? "") \($0.details?["template"] ?? "") \($0.details?["outcome"] ?? "") \($0.sequence.map(String.init) ?? "")" }
        }
        let first = try await decisions(seed: Self.seed)
        let again = try await decisions(seed: Self.seed)
        let other = try await decisions(seed: Self.seed &+ 7)
        #expect(first.count >= 24, "\(first)")
        #expect(first == again, "seed \(Self.seed)")
        #expect(first != other)
    }
}

/// SIGTERM and SIGINT reach a plan node through its service group (one signal handling for every
/// command): it stops at once, cleanly — `node stopped`, exit 0, not drained.
extension NodeProcessTests {
    @Test(.timeLimit(.minutes(2)), arguments: [SIGTERM, SIGINT])
    func aPlanNodeStopsCleanlyOnATerminationSignal(signal: Int32) async throws {
        let directory = try Self.temporaryDirectory("node-signal")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (coordinator, endpoint) = try await Self.coordinator(store: directory + "/coordinator.sqlite")
        let serverKey = try await Self.serverKey(of: coordinator)
        defer { Task { await coordinator.terminate() } }
        let plan = Self.plan(directory: directory, endpoint: endpoint, devices: 2, seed: Self.seed, serverKey: serverKey)
        let planPath = directory + "/plan.json"
        try Self.write(plan, to: planPath)
        let node = try ChildProcess.launch(try Self.binary(), ["node", "--plan", planPath], name: "node")
        defer { Task { await node.terminate() } }
        // Up and reporting: its devices run.
        try await node.waitForLine(in: .standardOutput, timeout: .seconds(60)) { Self.stats($0) != nil }
        node.signal(signal)
        #expect(try await node.waitForExit(timeout: .seconds(30)) == 0, "\(node.output)")
        let output = node.lines(.standardOutput)
        #expect(output.last == "node stopped", "\(node.output)")
        #expect(!output.contains("drained"), "a termination signal is not a drain: \(node.output)")
    }
}
