import DeviceNode
import Envelopes
import FleetProtocol
import FleetZeroMQTransport
import Foundation
import Logging
import SignatureCapture
import ZeroMQ

/// A simulated signing device: a `DeviceNode` with its own SQLite store and Ed25519 key, a
/// `FleetClient` (its own DEALER socket) while it believes it is online, and a `SyncEngine`.
///
/// One task per device runs everything in turn, as one person at one device would: envelopes
/// arrive (Poisson, ``BehaviourModel``), are composed from a cached template or from builders,
/// signed by paced synthetic signers (or cancelled, or declined), and synced by the sync policy
/// while the ``ConnectivityModel`` says the device is online. Connectivity changes take effect
/// between operations (a sync pass or a signing in progress finishes first). Offline, the device
/// has no socket at all.
///
/// Embedded remote signers (``Behaviour/embeddedFraction``) sign by captive signing on this
/// device once their envelope has synced: one ceremony at a time, in routing order, while
/// online (deferred while offline), each with a deadline (`CaptiveWork`).
///
/// After a restart it finds its store and carries on. What is replayed: the number of envelopes
/// it composed (`n`, the highest `<device>-<n>` transaction id among its cached envelopes and
/// outbox items), so envelope `n + 1` gets the same decisions as without the restart; the last
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
    private let behaviour: BehaviourModel
    private var connectivity: ConnectivityModel
    private let services = LinkedServices()

    private var node: DeviceNode?
    private var link: DeviceLink?
    private var engine: SyncEngine?
    private var token: String?
    private var loggedInOnline = false
    private var nextLoginAttempt = 0.0
    private var templatesChecked = false

    private var online: Bool?
    private var connectivityUntil = Double.infinity
    private var composed = 0
    private var nextArrivalAt: Double?
    /// With ``SimulatedDeviceConfiguration/gapsFromIdle``: the next arrival is scheduled once idle.
    private var scheduleWhenIdle = false
    private var resumeEnvelope: (id: String, number: Int)?
    private var needsSync = false
    private var lastSyncAt = 0.0
    private var retrySyncAt: Double?
    /// Envelopes with embedded remote signers, by transaction, until their sync is acknowledged.
    private var awaitingSync: [String: CaptiveWork] = [:]
    /// Synced envelopes whose embedded remote signers are still to be presented, oldest first.
    private var captiveQueue: [CaptiveWork] = []
    /// A captive ceremony is abandoned after this long (the headless browser's own requests
    /// time out after 30 s).
    private let captiveDeadline = 30.0
    /// After a ceremony's error, the next one waits (the back-off of sync passes).
    private var captiveRetryAt: Double?

    private var draining = false
    private var drained = false
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []
    private var sleeper: Task<Void, Never>?

    private var passesStarted = 0
    private var passesSeen = 0
    private var consumerEnded = false
    private var passWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
    private var pushStartedAt: [UInt64: Double] = [:]
    /// Consecutive failed logins and sync passes: the next try waits longer (with jitter), so
    /// a thousand devices facing a slow coordinator back off instead of storming it.
    private var loginFailures = 0
    private var syncFailures = 0
    private var jitter: SeededRandom

    public init(
        configuration: SimulatedDeviceConfiguration, loop: ZMQIOLoop, logger: Logger, history: HistoryWriter? = nil,
        process: String = "node", counters: NodeCounters = NodeCounters()
    ) {
        self.configuration = configuration
        self.loop = loop
        var logger = logger
        logger[metadataKey: "device"] = "\(configuration.deviceID)"
        self.logger = logger
        self.history = DeviceHistory(writer: history, process: process, device: configuration.deviceID)
        self.counters = counters
        self.behaviour = BehaviourModel(behaviour: configuration.behaviour, pens: configuration.pens, seed: configuration.seed)
        self.connectivity = ConnectivityModel(
            connectivity: configuration.connectivity, outages: configuration.outages, seed: configuration.seed)
        self.jitter = SeededRandom(mixing: configuration.seed, 0xBAC0_FF)
    }

    private var now: Double { Date().timeIntervalSince1970 }
    private var retryDelay: Double { max(0.05, Self.seconds(configuration.requestTimeout)) }

    /// The wait before the next try after `failures` failures in a row: `requestTimeout`
    /// doubling up to 30 s (5 s while draining), times a jitter in [0.5, 1.5).
    private func backoff(after failures: Int) -> Double {
        let delay = min(retryDelay * Double(1 << min(max(0, failures - 1), 10)), draining ? 5 : 30)
        return delay * (0.5 + jitter.nextDouble())
    }

    // MARK: Running

    /// Runs the device until the task is cancelled; with ``SimulatedDeviceConfiguration/finishWhenDone``
    /// it returns once it composed its envelopes and its outbox is empty.
    public func run() async throws {
        var storeConfiguration = DeviceConfiguration(storePath: configuration.storePath)
        storeConfiguration.deviceId = configuration.deviceID
        // The fleet simulates killed processes, not power loss; many devices share one disk,
        // so an fsync per commit per device would measure the disk, not the fleet.
        storeConfiguration.durability = .processCrash
        // A coordinator restored from an older copy of its store gets the fleet's items back from
        // the devices (docs/sync.md, "When a store goes back in time").
        storeConfiguration.retainSynced = SimulatedDeviceConfiguration.retainSynced
        // Thousands of devices share a node process: one connection each, a small page cache.
        storeConfiguration.storeFootprint = .compact
        let node = try await DeviceNode.open(
            configuration: storeConfiguration, accountService: services, templateService: services, logger: logger)
        self.node = node
        let events = node.events()
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await self.consume(events) }
                group.addTask { try await self.work(node) }
                defer { group.cancelAll() }
                try await group.next()
            }
        } catch {
            await shutDown(node)
            throw error
        }
        await shutDown(node)
    }

    /// Stops composing, treats the device as online and syncs until the outbox is empty;
    /// returns then (at once when already drained).
    public func drain() async {
        draining = true
        nextArrivalAt = nil
        wake()
        guard !drained else { return }
        await withCheckedContinuation { drainWaiters.append($0) }
    }

    private func shutDown(_ node: DeviceNode) async {
        await closeLink()
        if online == true { counters.addOnline(-1) }
        online = nil
        try? await node.close()
        for waiter in drainWaiters { waiter.resume() }
        drainWaiters = []
    }

    private func work(_ node: DeviceNode) async throws {
        try await restore(node)
        if configuration.startDelay > 0 { try await sleep(until: now + configuration.startDelay) }
        scheduleNextArrival(from: max(now, configuration.runStart))
        while true {
            try Task.checkCancellation()
            try await applyConnectivity()
            if token == nil || (online == true && !loggedInOnline), now >= nextLoginAttempt {
                try await logIn(node)
            }
            if token != nil, let resume = resumeEnvelope {
                resumeEnvelope = nil
                try await sign(node, envelope: resume.id, decision: behaviour.decision(for: resume.number))
                continue
            }
            if draining {
                if online == true, let engine, await engine.needsReconcile {
                    // Nothing may be pending here, yet a coordinator restored from an older copy of
                    // its store needs this device's retained items: a drained device has reconciled.
                    if (retrySyncAt ?? 0) <= now {
                        try await syncPass()
                        continue
                    }
                    try await sleep(until: nextWake())
                    continue
                }
                if try await node.pendingOutboxItems(limit: 1).isEmpty {
                    if canPresentCaptive, !captiveQueue.isEmpty {
                        // Drained only once the ceremonies ran (or were given up).
                        if captiveDue {
                            try await presentNextCaptive(node)
                            continue
                        }
                    } else {
                        if !drained { try await finishDrain(node) }
                        if configuration.finishWhenDone { return }
                    }
                } else if online == true, engine != nil, (retrySyncAt ?? 0) <= now {
                    try await syncPass()
                    continue
                }
            } else {
                // A due sync goes first: "after each signing" means before the next envelope.
                if online == true, engine != nil, syncDue() {
                    try await syncPass()
                    continue
                }
                if canPresentCaptive, !captiveQueue.isEmpty, captiveDue {
                    try await presentNextCaptive(node)
                    continue
                }
                if token != nil, let at = nextArrivalAt, at <= now {
                    try await arrive(node)
                    continue
                }
                if scheduleWhenIdle {
                    scheduleWhenIdle = false
                    scheduleNextArrival(from: now)
                    continue
                }
                if configuration.finishWhenDone, nextArrivalAt == nil, resumeEnvelope == nil {
                    draining = true
                    continue
                }
            }
            try await sleep(until: nextWake())
        }
    }

    /// The earliest moment something is due.
    private func nextWake() -> Double {
        var next = Double.infinity
        if !draining {
            next = min(next, connectivityUntil)
            if token != nil, let at = nextArrivalAt { next = min(next, at) }
            if online == true, case .every(let seconds) = configuration.behaviour.sync { next = min(next, lastSyncAt + seconds) }
        }
        if let retry = retrySyncAt, online == true { next = min(next, retry) }
        if let retry = captiveRetryAt, online == true, !captiveQueue.isEmpty { next = min(next, retry) }
        if token == nil || (online == true && !loggedInOnline) { next = min(next, nextLoginAttempt) }
        return next
    }

    private func syncDue() -> Bool {
        switch configuration.behaviour.sync {
        case .whenOnline: return needsSync || (retrySyncAt.map { $0 <= now } ?? false)
        case .every(let seconds): return now >= lastSyncAt + seconds
        case .manual: return false
        }
    }

    /// Waits until `moment` (epoch seconds) or until woken by ``drain()``; cancellable.
    private func sleep(until moment: Double) async throws {
        let delay = min(moment - now, 86_400)
        guard delay > 0 else { return }
        let task = Task<Void, Never> { _ = try? await Task.sleep(for: .milliseconds(Int64((delay * 1000).rounded(.up)))) }
        sleeper = task
        await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
        sleeper = nil
        try Task.checkCancellation()
    }

    private func wake() {
        sleeper?.cancel()
    }

    private func finishDrain(_ node: DeviceNode) async throws {
        drained = true
        let last = try await node.lastSequence()
        logger.info("drained", metadata: ["signed": "\(last)"])
        try history.record(.ok, .drain, sequence: last)
        for waiter in drainWaiters { waiter.resume() }
        drainWaiters = []
    }

    // MARK: Restart

    /// Finds what an earlier run left in the store (see the type's documentation).
    private func restore(_ node: DeviceNode) async throws {
        let prefix = configuration.deviceID + "-"
        func number(_ transaction: String) -> Int? {
            transaction.hasPrefix(prefix) ? Int(transaction.dropFirst(prefix.count)) : nil
        }
        let cached = try await node.cachedEnvelopes()
        let outbox = try await node.outboxItems()
        let numbers = cached.compactMap { number($0.envelope.transactionId) } + outbox.compactMap { number($0.envelope.transactionId) }
        composed = numbers.max() ?? 0
        if let last = cached.first(where: { number($0.envelope.transactionId) == composed }), last.sequence == nil,
            behaviour.decision(for: composed).outcome != .cancel
        {
            resumeEnvelope = (last.envelope.localId, composed)
        }
        let pendingItems = outbox.filter { $0.status == .pending }
        for item in pendingItems {
            guard let number = number(item.envelope.transactionId), let envelope = try await node.cachedEnvelope(id: item.envelope.localId),
                let work = CaptiveWork(envelope: envelope, localId: item.envelope.localId, number: number)
            else { continue }
            awaitingSync[work.transaction] = work
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
            let decision = behaviour.decision(for: number)
            guard !decision.fromTemplate, decision.embeddedCount > 0,
                var work = CaptiveWork(
                    envelope: try Self.builderEnvelope(decision, transaction: item.envelope.transactionId, hostEmail: configuration.email),
                    localId: item.envelope.localId, number: number)
            else { continue }
            work.serverEnvelope = server
            work.restored = true
            captiveQueue.append(work)
        }
        let pending = pendingItems.count
        counters.addPending(pending)
        if composed > 0 {
            logger.info("restored", metadata: ["composed": "\(composed)", "pending": "\(pending)"])
        }
    }

    // MARK: Connectivity

    private func applyConnectivity() async throws {
        let moment = now
        let state = connectivity.state(at: moment - configuration.runStart)
        connectivityUntil = configuration.runStart + state.until
        let want = draining || state.online
        guard want != online else { return }
        let reason = draining ? "drain" : (connectivity.inOutage(moment - configuration.runStart) ? "outage" : "chain")
        if want {
            online = true
            counters.addOnline(1)
            try history.record(.info, .online, details: ["reason": reason])
            openLink()
            needsSync = configuration.behaviour.sync == .whenOnline
            lastSyncAt = moment
            retrySyncAt = nil
            if token != nil, !templatesChecked { await cacheTemplatesIfNeeded() }
        } else {
            if online == true { counters.addOnline(-1) }
            online = false
            try history.record(.info, .offline, details: ["reason": reason])
            await closeLink()
        }
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
        let link = DeviceLink(configuration: clientConfiguration, loop: loop, logger: logger)
        self.link = link
        services.attach(link.client)
        makeEngine()
    }

    private func closeLink() async {
        services.attach(nil)
        engine = nil
        if let link {
            self.link = nil
            await link.close()
        }
    }

    private func makeEngine() {
        guard let link, let token, let node else { return }
        engine = SyncEngine(
            node: node, client: link.client, accessToken: token, configuration: SyncEngineConfiguration(maxAttempts: 1),
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
                loggedInOnline = true
                loginFailures = 0
                makeEngine()
                await cacheTemplatesIfNeeded()
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
        loginFailures += 1
        nextLoginAttempt = now + backoff(after: loginFailures)
        guard token == nil else { return }
        if let account = try? await node.loginOffline() {
            try history.record(.ok, .login, details: ["offline": "true"])
            token = account.accessToken
            makeEngine()
        }
    }

    /// Caches the coordinator's templates once, when the behaviour uses templates.
    private func cacheTemplatesIfNeeded() async {
        guard configuration.behaviour.templateFraction > 0, !templatesChecked, let node, link != nil else { return }
        do {
            if try await node.cachedTemplates().isEmpty {
                for summary in try await node.listTemplates().prefix(20) {
                    try await node.cacheTemplate(id: summary.templateId)
                }
            }
            templatesChecked = true
        } catch {
            logger.notice("templates not cached; will try again", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Envelopes

    private func scheduleNextArrival(from base: Double) {
        nextArrivalAt = nil
        if let limit = configuration.behaviour.maxEnvelopes, composed >= limit { return }
        let at = base + behaviour.decision(for: composed + 1).gap
        guard at.isFinite else { return }
        if let duration = configuration.duration, at > configuration.runStart + duration { return }
        nextArrivalAt = at
    }

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

    private func arrive(_ node: DeviceNode) async throws {
        let base = nextArrivalAt ?? now
        let number = composed + 1
        let decision = behaviour.decision(for: number)
        let transaction = "\(configuration.deviceID)-\(number)"
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
        composed = number
        if configuration.gapsFromIdle {
            nextArrivalAt = nil
            scheduleWhenIdle = true
        } else {
            scheduleNextArrival(from: base)
        }
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
        try await sign(node, envelope: envelopeId, decision: decision)
    }

    /// One signing session: every in-person signer in routing order, each taking their time;
    /// the decision may make the first cancel (finish later) or one decline.
    private func sign(_ node: DeviceNode, envelope envelopeId: String, decision: EnvelopeDecision) async throws {
        guard let envelope = try await node.cachedEnvelope(id: envelopeId) else { return }
        let transaction = envelope.transactionId
        let local = envelope.recipients.filter { $0.type == .inPersonSigner }.sorted { $0.routingOrder < $1.routingOrder }
        var durations: [String: Double] = [:]
        for (index, recipient) in local.enumerated() {
            durations[recipient.recipientId] = decision.signingDurations[index % decision.signingDurations.count]
        }
        var scripted: [String: SyntheticSigner.Behaviour] = [:]
        var op = HistoryEvent.Operation.sign
        switch decision.outcome {
        case .cancel where !local.isEmpty:
            op = .cancel
            scripted[local[0].recipientId] = .finishLater
        case .decline(let draw) where !local.isEmpty:
            op = .decline
            let index = min(local.count - 1, Int(draw * Double(local.count)))
            scripted[local[index].recipientId] = .decline(reason: "the signer declined (simulated)")
        default:
            break
        }
        let driver = PacedSigner(
            signer: SyntheticSigner(seed: decision.signerSeed, pen: PenKind(name: decision.pen) ?? .applePencil, behaviour: scripted),
            durations: durations)
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
        if sequence != nil, configuration.behaviour.sync == .whenOnline { needsSync = true }
        // Signed by everyone here and queued: the embedded remote signers come once it has synced.
        if sequence != nil, op != .decline, let work = CaptiveWork(envelope: envelope, localId: envelopeId, number: decision.number) {
            awaitingSync[transaction] = work
        }
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

    /// Online with a login the coordinator accepted: captive signing needs both.
    private var canPresentCaptive: Bool {
        online == true && link != nil && loggedInOnline && token != nil
    }

    private var captiveDue: Bool { (captiveRetryAt ?? 0) <= now }

    /// Presents captive signing for the next embedded remote signer (the lookup variant: server
    /// envelope id + client user id) with a synthetic signer. `signing_complete` is `ok captive`;
    /// another ending is `fail captive` with the exit reason; an error or the deadline is
    /// `info captive` (the server may have recorded the signature) and is tried again later, up to
    /// ``CaptiveWork/maxErrors`` times. After another ending, or too many errors, the envelope's
    /// later embedded signers are not presented (it would never be their turn).
    private func presentNextCaptive(_ node: DeviceNode) async throws {
        guard let link, !captiveQueue.isEmpty else { return }
        var work = captiveQueue.removeFirst()
        guard let server = work.serverEnvelope, !work.signers.isEmpty else { return }
        if work.restored {
            guard let token else {
                captiveQueue.append(work)
                return
            }
            do {
                let reply = try await link.client.request(EnvelopeQuery(accessToken: token, envelopeID: server))
                guard let remaining = work.remaining(on: reply) else { return }  // nothing left to sign
                work = remaining
                logger.info(
                    "captive signing resumed after a restart",
                    metadata: ["transaction": "\(work.transaction)", "signers": "\(work.signers.count)"])
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // Asked again later, like a ceremony's error (and given up after as many).
                work.errors += 1
                captiveRetryAt = now + backoff(after: work.errors)
                if work.errors < CaptiveWork.maxErrors { captiveQueue.append(work) }
                logger.notice("cannot check a restored envelope's signers", metadata: ["transaction": "\(work.transaction)", "error": "\(error)"])
                return
            }
        }
        let signer = work.signers.removeFirst()
        let decision = behaviour.decision(for: work.number)
        let person = CaptiveSigner(
            seed: decision.signerSeed &+ UInt64(work.presented + 1), pen: PenKind(name: decision.pen) ?? .applePencil)
        work.presented += 1
        let details = ["recipient": signer.recipientId, "clientUserId": signer.clientUserId]
        func note(_ type: HistoryEvent.Kind, error: String? = nil) throws {
            try history.record(
                type, .captive, envelope: work.localId, transaction: work.transaction, serverEnvelope: server, error: error, details: details)
        }
        try note(.invoke)
        let service = RemoteRecipientViewService(client: link.client)
        do {
            let result = try await CaptiveWork.withDeadline(captiveDeadline) {
                try await node.presentCaptiveSigning(
                    envelopeId: server, recipientClientUserId: signer.clientUserId, service: service, signer: person)
            }
            if result.event == .signingComplete {
                counters.add(.captive)
                work.errors = 0
                captiveRetryAt = nil
                try note(.ok)
                logger.info("captive signed", metadata: ["transaction": "\(work.transaction)", "recipient": "\(signer.recipientId)"])
                if !work.signers.isEmpty { captiveQueue.insert(work, at: 0) }
                return
            }
            try note(.fail, error: "exit reason: \(result.event?.rawValue ?? "left open")")
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            try note(.info, error: "\(error)")
            // Asking again is safe: a new URL, or a refusal when the first attempt did sign.
            work.errors += 1
            captiveRetryAt = now + backoff(after: work.errors)
            if work.errors < CaptiveWork.maxErrors {
                work.signers.insert(signer, at: 0)
                captiveQueue.append(work)
                return
            }
        }
        logger.notice(
            "captive signing did not complete", metadata: ["transaction": "\(work.transaction)", "recipient": "\(signer.recipientId)"])
    }

    // MARK: Sync

    /// One sync pass; its per-item history comes from the node's events (``consume(_:)``),
    /// which this waits for so the history is complete when the pass returns.
    private func syncPass() async throws {
        guard let engine else { return }
        passesStarted += 1
        let pass = passesStarted
        var remaining = 1
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
            loggedInOnline = false
            nextLoginAttempt = now
        } catch {
            logger.notice("sync deferred", metadata: ["error": "\(error)"])
        }
        await waitForEvents(ofPass: pass)
        lastSyncAt = now
        needsSync = false
        let retries = draining || configuration.behaviour.sync == .whenOnline
        syncFailures = remaining > 0 ? syncFailures + 1 : 0
        retrySyncAt = remaining > 0 && retries ? now + backoff(after: syncFailures) : nil
    }

    private func waitForEvents(ofPass pass: Int) async {
        guard passesSeen < pass, !consumerEnded else { return }
        await withCheckedContinuation { passWaiters.append((pass, $0)) }
    }

    /// Turns the node's events into history and counters.
    private func consume(_ events: AsyncStream<DeviceEvent>) async throws {
        defer {
            consumerEnded = true
            for (_, waiter) in passWaiters { waiter.resume() }
            passWaiters = []
        }
        for await event in events {
            try record(event)
        }
    }

    private func record(_ event: DeviceEvent) throws {
        switch event {
        case .envelopeQueuedForSync:
            counters.addPending(1)
        case .syncStarted(let progress):
            pushStartedAt[progress.sequence] = now
            try history.record(
                .invoke, .sync, envelope: progress.envelope.localId, transaction: progress.envelope.transactionId,
                sequence: progress.sequence)
        case .syncSucceeded(let progress):
            if let started = pushStartedAt.removeValue(forKey: progress.sequence) { counters.recordSyncAck(now - started) }
            counters.add(.synced)
            counters.addPending(-1)
            try history.record(
                .ok, .sync, envelope: progress.envelope.localId, transaction: progress.envelope.transactionId,
                sequence: progress.sequence, serverEnvelope: progress.envelope.serverId)
            if let server = progress.envelope.serverId, var work = awaitingSync.removeValue(forKey: progress.envelope.transactionId) {
                work.serverEnvelope = server
                captiveQueue.append(work)
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
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
