import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import SignatureCapture
import ZeroMQ

/// A simulated signing device: a `DeviceNode` with its own SQLite store and Ed25519 key, a
/// `FleetClient` (its own DEALER socket) while it believes it is online, and a `SyncEngine` made
/// at login and kept across its links (it enrolls once per coordinator instance).
///
/// What it does is decided by a `DeviceStateMachine` (a value: no I/O, no clock, no task);
/// this actor runs it. One loop performs the machine's actions in turn, as one person at one
/// device would, and feeds their results back: envelopes arrive (Poisson, ``BehaviourModel``),
/// are composed from a cached template or from builders, signed by paced synthetic signers (or
/// cancelled, or declined), and synced by the sync policy while the ``ConnectivityModel`` says the
/// device is online. Connectivity changes take effect between operations (a sync pass or a signing
/// in progress finishes first). Offline, the device has no socket at all. Between operations the
/// loop waits once, until the machine's next due moment on the injected ``DeviceClock`` or until a
/// drain or a stop wakes it; a second task turns the node's events into history as they happen.
///
/// Embedded remote signers (``Behaviour/embeddedFraction``) sign by captive signing on this
/// device once their envelope has synced: one ceremony at a time, in routing order, while
/// online (deferred while offline), each with a deadline (`CaptiveWork`).
///
/// After a restart it finds its store and carries on. What is replayed: the number of envelopes
/// it composed (`n`, the highest envelope number of its transaction ids, `<device>-<n>` or
/// `<device>-<n>.<life>`, among its cached envelopes and outbox items), so envelope `n + 1` gets the same decisions as without the restart; the last
/// envelope, when it was composed but neither queued nor (by its decision) cancelled, is signed
/// again; the outbox is synced as before. The connectivity timeline is a function of the seed and
/// the time since the run's start, so it carries on too. Arrival times restart from the restart
/// (the device was down in between); counters for the `stats` line count from the process's start.
/// Captive ceremonies still owed to envelopes synced before the restart are queued again, each
/// checked against the coordinator's copy first (`restored`).
public actor SimulatedDevice {
    public let configuration: SimulatedDeviceConfiguration
    private let loop: ZMQIOLoop
    private let logger: Logger
    private let history: DeviceHistory
    private let counters: NodeCounters
    private let clock: any DeviceClock
    /// The session across links: the engine and the services send over whichever link is open.
    private let session = LinkedClient()
    private let services: LinkedServices
    private let wakeup = DeviceWakeup()
    private var machine: DeviceStateMachine
    /// Nil in the device's first life (its store was created by this process); otherwise this
    /// life's suffix of new transaction ids (``transactionID(for:)``).
    private var lifeSuffix: String?

    private var node: DeviceNode?
    private var link: FleetClientConnection?
    private var engine: SyncEngine?
    private var token: String?
    /// Counted in the `online` figure of the stats line.
    private var countedOnline = false

    private var stopped = false
    /// The action being performed and when it began (the clock's time): ``describe()``.
    private var current: (action: DeviceStateMachine.Action, since: Double)?
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []
    /// The event consumer could not write the history: the loop stops with this error.
    private var consumerError: (any Error)?

    private var passesStarted = 0
    private var passesSeen = 0
    private var consumerEnded = false
    private var passWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
    private var pushStartedAt: [UInt64: Double] = [:]
    /// A captive ceremony is abandoned after this long (the headless browser's own requests
    /// time out after 30 s).
    private let captiveDeadline = 30.0

    /// Creates a device; it reads the time and waits on `clock` (a test can move one by hand).
    public init(
        configuration: SimulatedDeviceConfiguration, loop: ZMQIOLoop, logger: Logger, history: HistoryWriter? = nil,
        process: String = "node", counters: NodeCounters = NodeCounters(), clock: any DeviceClock = WallDeviceClock()
    ) {
        self.configuration = configuration
        self.loop = loop
        var logger = logger
        logger[metadataKey: "device"] = "\(configuration.deviceID)"
        self.logger = logger
        self.history = DeviceHistory(writer: history, process: process, device: configuration.deviceID, clock: clock)
        self.counters = counters
        self.clock = clock
        self.machine = DeviceStateMachine(configuration: configuration)
        self.services = LinkedServices(client: session)
    }

    // MARK: Running

    /// Runs the device until the task is cancelled; with ``SimulatedDeviceConfiguration/finishWhenDone``
    /// it returns once it composed its envelopes and its outbox is empty.
    public func run() async throws {
        var storeConfiguration = DeviceConfiguration(storePath: configuration.storePath)
        storeConfiguration.deviceId = configuration.deviceID
        storeConfiguration.clock = clock.wall.now
        // The fleet simulates killed processes, not power loss; many devices share one disk,
        // so an fsync per commit per device would measure the disk, not the fleet.
        storeConfiguration.durability = .processCrash
        // A coordinator restored from an older copy of its store gets the fleet's items back from
        // the devices (docs/sync.md, "When a store goes back in time").
        storeConfiguration.retainSynced = SimulatedDeviceConfiguration.retainSynced
        // Thousands of devices share a node process: one connection each, a small page cache.
        storeConfiguration.storeFootprint = .compact
        // A store that was there before this process is a later life of the device: its new
        // envelopes' transaction ids carry a suffix of this life (``transactionID(for:)``).
        if FileManager.default.fileExists(atPath: configuration.storePath) { lifeSuffix = Self.drawLifeSuffix() }
        let node = try await DeviceNode.open(
            configuration: storeConfiguration, accountService: services, templateService: services, logger: logger)
        self.node = node
        let events = node.events()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                // The only other task of the device: events become history when they happen.
                group.addTask { await self.consume(events) }
                defer { group.cancelAll() }
                try await self.work(node)
            }
        } catch {
            await shutDown(node)
            throw error
        }
        await shutDown(node)
    }

    /// Stops composing, treats the device as online and syncs until the outbox is empty;
    /// returns then (at once when already drained, or when the device has stopped).
    public func drain() async {
        let done = machine.drain(now: clock.now)
        wakeup.ring()
        guard !done, !stopped else { return }
        await withCheckedContinuation { drainWaiters.append($0) }
    }

    /// What the device is doing now, for the node's log when its drain takes long.
    public func describe() -> String {
        let doing = current.map { "\($0.action) for \(String(format: "%.1f", clock.now - $0.since)) s" } ?? "not started"
        return "\(doing); stopped \(stopped), \(machine.drainStatus)"
    }

    private func shutDown(_ node: DeviceNode) async {
        stopped = true
        await closeLink()
        if countedOnline { counters.addOnline(-1) }
        countedOnline = false
        try? await node.close()
        for waiter in drainWaiters { waiter.resume() }
        drainWaiters = []
    }

    /// Performs the machine's actions until it says the work is over (or the task is cancelled).
    private func work(_ node: DeviceNode) async throws {
        let restored = try await restore(node)
        machine.restore(restored)
        machine.start(now: clock.now)
        while true {
            try Task.checkCancellation()
            if let consumerError { throw consumerError }
            let action = machine.next(now: clock.now)
            current = (action, clock.now)
            switch action {
            case .wait(let until):
                let now = clock.now
                let deadline = min(until, now + 86_400)
                if deadline > now { await wakeup.wait(until: deadline, on: clock) }
            case .goOnline(let reason):
                try goOnline(reason)
            case .goOffline(let reason):
                try await goOffline(reason)
            case .logIn:
                try await logIn(node)
            case .cacheTemplates:
                let cached = await cacheTemplates(node)
                machine.templatesCached(cached)
            case .compose(let decision):
                try await compose(node, decision)
            case .sign(let envelope, let decision):
                try await sign(node, envelope: envelope, decision: decision)
            case .sync:
                try await syncPass()
            case .presentCaptive(let work):
                try await presentCaptive(node, work)
            case .inspectOutbox:
                let empty = try await node.pendingOutboxItems(limit: 1).isEmpty
                let reconcile = await engine?.needsReconcile ?? false
                machine.outboxInspected(empty: empty, needsReconcile: reconcile)
            case .finishDrain:
                try await finishDrain(node)
            case .finish:
                return
            }
        }
    }

    private func finishDrain(_ node: DeviceNode) async throws {
        let last = try await node.lastSequence()
        logger.info("drained", metadata: ["signed": "\(last)"])
        try history.record(.ok, .drain, sequence: last)
        try await node.releaseMemory()
        for waiter in drainWaiters { waiter.resume() }
        drainWaiters = []
    }

    // MARK: Restart

    /// Finds what an earlier run left in the store (see the type's documentation).
    private func restore(_ node: DeviceNode) async throws -> DeviceStateMachine.Restored {
        let deviceID = configuration.deviceID
        func number(_ transaction: String) -> Int? { Self.envelopeNumber(inTransaction: transaction, device: deviceID) }
        let cached = try await node.cachedEnvelopes()
        let outbox = try await node.outboxItems()
        let numbers = cached.compactMap { number($0.envelope.transactionId) } + outbox.compactMap { number($0.envelope.transactionId) }
        var restored = DeviceStateMachine.Restored(composed: numbers.max() ?? 0)
        if let last = cached.first(where: { number($0.envelope.transactionId) == restored.composed }), last.sequence == nil {
            restored.unqueuedLast = .init(envelope: last.envelope.localId, number: restored.composed)
        }
        let pendingItems = outbox.filter { $0.status == .pending }
        for item in pendingItems {
            guard let number = number(item.envelope.transactionId), let envelope = try await node.cachedEnvelope(id: item.envelope.localId),
                let work = CaptiveWork(envelope: envelope, localId: item.envelope.localId, number: number)
            else { continue }
            restored.awaitingSync.append(work)
        }
        // Envelopes synced before the restart whose embedded signers may not all have signed:
        // the queue of ceremonies was in memory, so it is rebuilt, and checked against the
        // coordinator before each envelope's first ceremony (`CaptiveWork.restored`).
        for item in outbox where item.status == .synced {
            guard let server = item.receipt?.serverEnvelopeId, let number = number(item.envelope.transactionId) else { continue }
            // The store keeps only the receipt of a synced envelope, so its embedded signers come
            // from its decision. One whose decision drew a template is skipped: a template has no
            // embedded signers, and a fallback to builders (no cached template then) is not told
            // apart after a restart.
            let decision = machine.behaviour.decision(for: number)
            guard !decision.fromTemplate, decision.embeddedCount > 0,
                var work = CaptiveWork(
                    envelope: try Self.builderEnvelope(decision, transaction: item.envelope.transactionId, hostEmail: configuration.email),
                    localId: item.envelope.localId, number: number)
            else { continue }
            work.serverEnvelope = server
            work.restored = true
            restored.owedCaptive.append(work)
        }
        let pending = pendingItems.count
        counters.addPending(pending)
        if restored.composed > 0 {
            logger.info("restored", metadata: ["composed": "\(restored.composed)", "pending": "\(pending)"])
        }
        return restored
    }

    // MARK: Transaction ids

    /// The transaction id of envelope `number`: `<device>-<n>` in the device's first life, and
    /// `<device>-<n>.<life>` after a restart, `<life>` being 8 hex digits drawn when the process
    /// opened the store. A store that lost its last commits (its `-wal` gone while the node was
    /// down) counts envelopes from an older `n`, and would otherwise give a new envelope the id of
    /// one the coordinator already holds; the suffix makes every life's ids its own, whatever the
    /// store lost (docs/fleet-devices.md).
    static func transactionID(device: String, number: Int, lifeSuffix: String?) -> String {
        lifeSuffix.map { "\(device)-\(number).\($0)" } ?? "\(device)-\(number)"
    }

    /// The envelope number `n` of one of this device's transaction ids (either form), or nil.
    static func envelopeNumber(inTransaction transaction: String, device: String) -> Int? {
        let prefix = device + "-"
        guard transaction.hasPrefix(prefix) else { return nil }
        let rest = transaction.dropFirst(prefix.count)
        let digits = rest.prefix { $0 != "." }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let number = Int(digits), number > 0 else { return nil }
        if digits.count < rest.count {
            let suffix = rest.dropFirst(digits.count + 1)
            guard suffix.count == 8, suffix.allSatisfy(\.isHexDigit) else { return nil }
        }
        return number
    }

    /// A life's suffix: from the system's generator, not the run's seed. It changes no decision
    /// (those come from the seed and `n`), and it must differ between two lives of a device that
    /// start from the same store contents, which a draw from the seed would repeat.
    static func drawLifeSuffix() -> String {
        var generator = SystemRandomNumberGenerator()
        let value = UInt32.random(in: .min ... .max, using: &generator)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    // MARK: Connectivity

    private func goOnline(_ reason: DeviceStateMachine.TransitionReason) throws {
        if !countedOnline { counters.addOnline(1) }
        countedOnline = true
        try history.record(.info, .online, details: ["reason": reason.rawValue])
        openLink()
    }

    private func goOffline(_ reason: DeviceStateMachine.TransitionReason) async throws {
        if countedOnline { counters.addOnline(-1) }
        countedOnline = false
        try history.record(.info, .offline, details: ["reason": reason.rawValue])
        await closeLink()
        // Idle devices hold no store caches (as an app going to the background): most of a fleet
        // is offline at any time, and its memory is what bounds a fleet per process.
        try await node?.releaseMemory()
    }

    private func openLink() {
        var security = ClientSecurity.plaintext
        if let serverKey = configuration.serverKey {
            // The node is open before any link (run()); a pinned key never falls back to plain TCP.
            guard let keys = node?.transportKeys else { return }
            security = .curve(serverKey: serverKey, keys: keys)
        }
        var clientConfiguration = FleetClientConfiguration(
            endpoint: configuration.endpoint, failoverEndpoints: configuration.failoverEndpoints, deviceID: configuration.deviceID,
            security: security, requestTimeout: configuration.requestTimeout, maxAttempts: 2)
        // The launcher handed over the coordinator's key it read itself: no monitor per device.
        clientConfiguration.reportsHandshakeFailures = false
        clientConfiguration.roundTrips = configuration.roundTrips
        let link = FleetClientConnection.open(configuration: clientConfiguration, loop: loop, logger: logger)
        self.link = link
        session.attach(link.client)
    }

    private func closeLink() async {
        session.attach(nil)
        if let link {
            self.link = nil
            await link.close()
        }
    }

    /// One engine per login, kept across links: it enrolls once per coordinator instance, not once
    /// per time the device comes online (``LinkedClient``).
    private func makeEngine() {
        guard let token, let node else { return }
        engine = SyncEngine(
            node: node, client: session, accessToken: token, configuration: SyncEngineConfiguration(maxAttempts: 1),
            logger: logger)
    }

    // MARK: Login

    /// Logs in online when there is a link; otherwise (or when the coordinator does not
    /// answer) with the persisted account, as an app on a plane.
    private func logIn(_ node: DeviceNode) async throws {
        if let link {
            try history.record(.invoke, .login)
            do {
                let reply = try await link.client.request(
                    AccessTokenRequest(email: configuration.email, secret: configuration.secret))
                _ = try await node.login(accessToken: reply.accessToken)
                try history.record(.ok, .login)
                token = reply.accessToken
                makeEngine()
                machine.loginFinished(.online, now: clock.now)
                return
            } catch let error as FleetError where !error.retryable {
                try history.record(.fail, .login, error: error.description)
                throw error
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                try history.record(.info, .login, error: "\(error)")
                logger.notice("coordinator unreachable; logging in offline", metadata: ["error": "\(error)"])
            }
        }
        let failedAt = clock.now
        var offlineAccount = false
        if token == nil, let account = try? await node.loginOffline() {
            try history.record(.ok, .login, details: ["offline": "true"])
            token = account.accessToken
            makeEngine()
            offlineAccount = true
        }
        machine.loginFinished(.unavailable(offlineAccount: offlineAccount), now: failedAt)
    }

    /// Caches the coordinator's templates when none is cached; whether that worked.
    private func cacheTemplates(_ node: DeviceNode) async -> Bool {
        guard link != nil else { return false }
        do {
            if try await node.cachedTemplates().isEmpty {
                for summary in try await node.listTemplates().prefix(20) {
                    try await node.cacheTemplate(id: summary.templateId)
                }
            }
            return true
        } catch {
            logger.notice("templates not cached; will try again", metadata: ["error": "\(error)"])
            return false
        }
    }

    // MARK: Envelopes

    /// The envelope a decision composes from builders: its in-person and remote signers, the
    /// embedded ones (with a client user id) first among the remote ones, since a signer by email
    /// (who never signs in the simulation) would otherwise block their turn. The same decision
    /// gives the same recipients, which is how a restarted device finds its embedded signers.
    static func builderEnvelope(_ decision: EnvelopeDecision, transaction: String, hostEmail: String) throws -> Envelope {
        let embedded = (0..<decision.remoteSigners).map { index in
            index < decision.embeddedCount ? CaptiveWork.clientUserId(transaction: transaction, remote: index + 1) : nil
        }
        return try SampleEnvelope.inPerson(
            signers: decision.inPersonSigners, remoteSigners: decision.remoteSigners, transactionId: transaction,
            hostEmail: hostEmail, remoteClientUserIds: embedded)
    }

    /// Composes the envelope of an arrival (the machine then asks for its signing).
    private func compose(_ node: DeviceNode, _ decision: EnvelopeDecision) async throws {
        let transaction = Self.transactionID(device: configuration.deviceID, number: decision.number, lifeSuffix: lifeSuffix)
        var details: [String: String] = [:]
        var template: CachedTemplate?
        if decision.fromTemplate {
            let cached = try await node.cachedTemplates().sorted { $0.template.templateId < $1.template.templateId }
            if cached.isEmpty {
                details["fallback"] = "no cached template; composed from builders"
            } else {
                template = cached[Int(decision.templateDraw % UInt64(cached.count))]
                details["template"] = template?.template.templateId
            }
        }
        try history.record(.invoke, .compose, transaction: transaction, details: details.isEmpty ? nil : details)
        let envelopeId: String
        do {
            let user = await node.currentAccount?.user
            if let template {
                var roles: [String: RoleAssignment] = [:]
                for role in template.template.roles where role.type == .inPersonSigner {
                    roles[role.roleName] = RoleAssignment(hostName: user?.userName, hostEmail: user?.email)
                }
                envelopeId = try await node.compose(
                    fromTemplate: template.template.templateId, TemplateComposition(roles: roles), mode: .offline,
                    transactionId: transaction)
            } else {
                let envelope = try Self.builderEnvelope(decision, transaction: transaction, hostEmail: user?.email ?? configuration.email)
                envelopeId = try await node.compose(envelope, mode: .offline)
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            try history.record(.fail, .compose, transaction: transaction, error: "\(error)")
            logger.warning("compose failed", metadata: ["transaction": "\(transaction)", "error": "\(error)"])
            return
        }
        counters.add(.composed)
        try history.record(.ok, .compose, envelope: envelopeId, transaction: transaction)
        machine.composed(envelope: envelopeId, decision: decision)
    }

    /// One signing session: every in-person signer in routing order, each taking their time;
    /// the decision may make the first cancel (finish later) or one decline (``SigningPlan``).
    private func sign(_ node: DeviceNode, envelope envelopeId: String, decision: EnvelopeDecision) async throws {
        guard let envelope = try await node.cachedEnvelope(id: envelopeId) else { return }
        let transaction = envelope.transactionId
        let local = envelope.recipients.filter { $0.type == .inPersonSigner }.sorted { $0.routingOrder < $1.routingOrder }
        let plan = SigningPlan(decision: decision, localSigners: local.map(\.recipientId))
        let op = plan.operation
        let driver = PacedSigner(
            signer: SyntheticSigner(seed: decision.signerSeed, pen: PenKind(name: decision.pen) ?? .applePencil, behaviour: plan.scripted),
            durations: plan.durations, clock: clock)
        try history.record(.invoke, op, envelope: envelopeId, transaction: transaction, details: ["pen": decision.pen])
        let outcome: SigningOutcome
        do {
            outcome = try await node.resumeSigning(envelopeId: envelopeId, driver: driver)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            try history.record(.fail, op, envelope: envelopeId, transaction: transaction, error: "\(error)")
            logger.warning("signing failed", metadata: ["transaction": "\(transaction)", "error": "\(error)"])
            return
        }
        var sequence: UInt64?
        switch outcome {
        case .completed(_, let queued):
            sequence = queued
            counters.add(.signed)
            logger.info("signed", metadata: ["sequence": "\(queued.map(String.init) ?? "-")", "transaction": "\(transaction)"])
        case .readyForSync(let queued, _):
            sequence = queued
            counters.add(.signed)
            logger.info("signed", metadata: ["sequence": "\(queued)", "transaction": "\(transaction)"])
        case .declined(_, let queued, _):
            sequence = queued
            counters.add(.declined)
        case .cancelled:
            counters.add(.cancelled)
        }
        try history.record(
            .ok, op, envelope: envelopeId, transaction: transaction, sequence: sequence,
            details: ["outcome": Self.describe(outcome)])
        machine.signed(
            .init(
                queued: sequence != nil, declined: op == .decline,
                captive: CaptiveWork(envelope: envelope, localId: envelopeId, number: decision.number)))
    }

    private static func describe(_ outcome: SigningOutcome) -> String {
        switch outcome {
        case .completed: return "completed"
        case .readyForSync: return "readyForSync"
        case .declined: return "declined"
        case .cancelled: return "cancelled"
        }
    }

    // MARK: Captive signing

    /// Presents captive signing for the work's next embedded remote signer (the lookup variant:
    /// server envelope id + client user id) with a synthetic signer. `signing_complete` is
    /// `ok captive`; another ending is `fail captive` with the exit reason; an error or the
    /// deadline is `info captive` (the server may have recorded the signature) and is tried again
    /// later, up to ``CaptiveWork/maxErrors`` times. After another ending, or too many errors, the
    /// envelope's later embedded signers are not presented (it would never be their turn).
    private func presentCaptive(_ node: DeviceNode, _ work: CaptiveWork) async throws {
        guard let link, let token, let server = work.serverEnvelope, !work.signers.isEmpty else {
            // No link to present it with (cannot happen online): tried again later, as after an error.
            machine.captiveFinished(.checkFailed(work), now: clock.now)
            return
        }
        var work = work
        if work.restored {
            do {
                let reply = try await link.client.request(EnvelopeQuery(accessToken: token, envelopeID: server))
                guard let remaining = work.remaining(on: reply) else {
                    machine.captiveFinished(.nothingLeft, now: clock.now)  // nothing left to sign
                    return
                }
                work = remaining
                logger.info(
                    "captive signing resumed after a restart",
                    metadata: ["transaction": "\(work.transaction)", "signers": "\(work.signers.count)"])
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // Asked again later, like a ceremony's error (and given up after as many).
                machine.captiveFinished(.checkFailed(work), now: clock.now)
                logger.notice("cannot check a restored envelope's signers", metadata: ["transaction": "\(work.transaction)", "error": "\(error)"])
                return
            }
        }
        let signer = work.signers.removeFirst()
        let decision = machine.behaviour.decision(for: work.number)
        let person = CaptiveSigner(
            seed: decision.signerSeed &+ UInt64(work.presented + 1), pen: PenKind(name: decision.pen) ?? .applePencil)
        work.presented += 1
        let details = ["recipient": signer.recipientId, "clientUserId": signer.clientUserId]
        let localId = work.localId
        let transaction = work.transaction
        func note(_ type: HistoryEvent.Kind, error: String? = nil) throws {
            try history.record(
                type, .captive, envelope: localId, transaction: transaction, serverEnvelope: server, error: error, details: details)
        }
        try note(.invoke)
        let service = RemoteRecipientViewService(client: link.client)
        do {
            let result = try await CaptiveWork.withDeadline(captiveDeadline, on: clock) {
                try await node.presentCaptiveSigning(
                    envelopeId: server, recipientClientUserId: signer.clientUserId, service: service, signer: person)
            }
            if result.event == .signingComplete {
                counters.add(.captive)
                try note(.ok)
                logger.info("captive signed", metadata: ["transaction": "\(transaction)", "recipient": "\(signer.recipientId)"])
                machine.captiveFinished(.signed(work), now: clock.now)
                return
            }
            try note(.fail, error: "exit reason: \(result.event?.rawValue ?? "left open")")
            machine.captiveFinished(.ended, now: clock.now)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            try note(.info, error: "\(error)")
            var again = work
            again.signers.insert(signer, at: 0)
            if machine.captiveFinished(.failed(again), now: clock.now) { return }
        }
        logger.notice(
            "captive signing did not complete", metadata: ["transaction": "\(transaction)", "recipient": "\(signer.recipientId)"])
    }

    // MARK: Sync

    /// One sync pass; its per-item history comes from the node's events (``consume(_:)``),
    /// which this waits for so the history is complete when the pass returns.
    private func syncPass() async throws {
        guard let engine else { return }
        passesStarted += 1
        let pass = passesStarted
        var remaining = 1
        var tokenRejected = false
        do {
            let summary = try await engine.syncAll()
            remaining = summary.remaining
            if summary.attempted > 0 {
                logger.info("synced", metadata: ["items": "\(summary.succeeded)", "rejected": "\(summary.failed)"])
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as FleetError where error.code == .unauthenticated || error.code == .tokenExpired {
            // The coordinator no longer knows this token (it expired, or the coordinator's store was
            // restored from a copy older than the login): log in again, which makes a new engine.
            logger.notice("sync deferred: logging in again", metadata: ["error": "\(error)"])
            tokenRejected = true
        } catch {
            logger.notice("sync deferred", metadata: ["error": "\(error)"])
        }
        await waitForEvents(ofPass: pass)
        machine.syncFinished(remaining: remaining, tokenRejected: tokenRejected, now: clock.now)
    }

    private func waitForEvents(ofPass pass: Int) async {
        guard passesSeen < pass, !consumerEnded else { return }
        await withCheckedContinuation { passWaiters.append((pass, $0)) }
    }

    /// Turns the node's events into history and counters; a history that cannot be written
    /// stops the device (its loop throws the error).
    private func consume(_ events: AsyncStream<DeviceEvent>) async {
        defer {
            consumerEnded = true
            for (_, waiter) in passWaiters { waiter.resume() }
            passWaiters = []
        }
        for await event in events {
            do {
                try record(event)
            } catch {
                consumerError = error
                wakeup.ring()
                return
            }
        }
    }

    private func record(_ event: DeviceEvent) throws {
        switch event {
        case .envelopeQueuedForSync:
            counters.addPending(1)
        case .syncStarted(let progress):
            pushStartedAt[progress.sequence] = clock.now
            try history.record(
                .invoke, .sync, envelope: progress.envelope.localId, transaction: progress.envelope.transactionId,
                sequence: progress.sequence)
        case .syncSucceeded(let progress):
            if let started = pushStartedAt.removeValue(forKey: progress.sequence) { counters.recordSyncAck(clock.now - started) }
            counters.add(.synced)
            counters.addPending(-1)
            try history.record(
                .ok, .sync, envelope: progress.envelope.localId, transaction: progress.envelope.transactionId,
                sequence: progress.sequence, serverEnvelope: progress.envelope.serverId)
            if let server = progress.envelope.serverId {
                machine.syncAcknowledged(transaction: progress.envelope.transactionId, serverEnvelope: server)
            }
        case .syncFailed(let progress):
            counters.add(.syncFailures)
            if progress.willRetry {
                // Timed out or cut off: the server may or may not have it.
                try history.record(
                    .info, .sync, envelope: progress.envelope.localId, transaction: progress.envelope.transactionId,
                    sequence: progress.sequence, error: progress.error)
            } else {
                pushStartedAt[progress.sequence] = nil
                counters.addPending(-1)
                try history.record(
                    .fail, .sync, envelope: progress.envelope.localId, transaction: progress.envelope.transactionId,
                    sequence: progress.sequence, error: progress.error)
            }
        case .serverBehind(let regression):
            logger.error(
                "the coordinator lost items this device holds receipts for",
                metadata: [
                    "serverLastApplied": "\(regression.serverLastApplied)", "deviceLastSettled": "\(regression.deviceLastSettled)",
                    "resent": "\(regression.resent.count)", "lost": "\(regression.lost)",
                ])
        case .storeBehindServer(let behind):
            logger.warning(
                "this device's store is behind the coordinator",
                metadata: ["serverLastApplied": "\(behind.serverLastApplied)", "deviceLastSequence": "\(behind.deviceLastSequence)"])
        case .outboxRenumbered(let renumbering):
            logger.warning("pending items renumbered after the coordinator's", metadata: ["moves": "\(renumbering.moves.count)"])
        case .syncEnded:
            passesSeen += 1
            let ready = passWaiters.filter { $0.0 <= passesSeen }
            passWaiters.removeAll { $0.0 <= passesSeen }
            for (_, waiter) in ready { waiter.resume() }
        default:
            break
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        duration.seconds
    }
}
