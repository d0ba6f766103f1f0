import AsyncHTTPClient
import FleetProtocol
import Foundation
import Logging
import Metrics
import NIOCore
import ServiceLifecycle
import Synchronization

/// Where a Connect message goes: an HTTP POST that answers a status (docs/webhooks.md). The real
/// one is ``HTTPConnectTransport``; a unit test may give its own.
public protocol ConnectTransport: Sendable {
    /// POSTs `body` to `url` with `headers`; the listener's HTTP status once its whole answer is read.
    func post(_ url: String, body: Data, headers: [(name: String, value: String)]) async throws -> Int
    /// Releases what it holds; the publisher calls it once it stops.
    func shutdown() async
}

/// Connect over AsyncHTTPClient: no redirects followed (a listener cannot send a delivery
/// elsewhere), at most 64 KiB of an answer read.
public final class HTTPConnectTransport: ConnectTransport {
    private let client: HTTPClient
    /// A guard against a hang on the machine's clock; the publisher's own timeout is on its clock.
    private let deadline: TimeAmount

    /// - Parameter deadline: a guard against a hang, on the machine's clock; the publisher's
    ///   `requestTimeout` (on its own clock) ends an attempt first.
    public init(deadline: TimeAmount = .seconds(120)) {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        // As many connections to one listener as the publisher has deliveries in flight to it.
        configuration.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.deadline = deadline
    }

    public func post(_ url: String, body: Data, headers: [(name: String, value: String)]) async throws -> Int {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await client.execute(request, timeout: deadline)
        // The status decides; at most 64 KiB of the answer is read, the rest left unread.
        var read = 0
        for try await chunk in response.body {
            read += chunk.readableBytes
            if read >= 64 << 10 { break }
        }
        return Int(response.status.code)
    }

    public func shutdown() async {
        try? await client.shutdown()
    }
}

/// How the publisher delivers (docs/webhooks.md, "Delivery").
public struct ConnectPublisherConfiguration: Sendable {
    /// Attempts per event before it becomes a failure record.
    public var maxAttempts = 8
    /// The back-off's first ceiling and its cap (full jitter, doubling per attempt).
    public var backoff = Backoff(initial: .seconds(2), maximum: .seconds(300))
    /// How long a listener has to answer.
    public var requestTimeout: Duration = .seconds(10)
    /// How often the outbox is read when nothing woke the publisher.
    public var pollInterval: Duration = .milliseconds(500)
    /// Deliveries in flight at once, in all.
    public var maxInFlight = 32
    /// Deliveries in flight at once to one configuration: a hanging listener holds only these.
    public var maxInFlightPerListener = 16
    /// Claimed deliveries held beyond those in flight, as a multiple of each bound: the next ones
    /// start as soon as a slot frees, without waiting for the store (claim ahead).
    public var claimAhead = 1
    /// Seeds the back-off's jitter (printed at start; the same seed gives the same delays).
    public var jitterSeed: UInt64 = 0
    /// The largest message posted: a larger one (an envelope whose custom fields or tab values
    /// run to megabytes, shown to a configuration that includes them) becomes a failure record
    /// at once instead of being posted with every event and retry.
    public var maxMessageBytes = 1 << 20
    /// How long ended rows (delivered, or failure records) are kept, from when their event was
    /// recorded; `nil` keeps them for ever. The log and `connect/failures` show what is kept.
    public var retention: Duration? = .seconds(7 * 86_400)
    /// How often the outbox is pruned of rows past the retention.
    public var pruneInterval: Duration = .seconds(60)

    public init() {}

    /// How long a claim lasts: past it, another coordinator (or this one restarted) takes the row
    /// over. An attempt ends within the request timeout; the rest covers its store reads and writes.
    var claimLifetime: Duration { requestTimeout * 2 + Self.claimMargin }
    /// What a claim holds beyond its attempts: for the outcome's write and the clocks of
    /// coordinators sharing a database.
    static let claimMargin: Duration = .seconds(5)
    /// Deliveries held at once (in flight and claimed ahead), in all and per configuration.
    var maxHeld: Int { maxInFlight * (1 + max(claimAhead, 0)) }
    var maxHeldPerListener: Int { maxInFlightPerListener * (1 + max(claimAhead, 0)) }
}

/// What the publisher holds between the store and the listeners: deliveries claimed and waiting
/// for a slot, the POSTs in flight, and the outcomes not yet recorded.
struct ConnectHold {
    struct Claimed: Sendable {
        var delivery: ConnectDeliveryRecord
        var context: PassContext
    }

    private(set) var posting: [String: Int] = [:]
    private(set) var postingTotal = 0
    private var queued: [String: [Claimed]] = [:]
    private(set) var queuedTotal = 0
    /// Recorded at the next settling, in one transaction.
    var outcomes: [ConnectOutcomeRecord] = []

    /// Deliveries held per configuration (in flight or claimed ahead): what the next claim counts.
    var held: [String: Int] {
        var held = posting
        for (configuration, waiting) in queued { held[configuration, default: 0] += waiting.count }
        return held
    }

    mutating func enqueue(_ claimed: [Claimed]) {
        for item in claimed { queued[item.delivery.configurationID, default: []].append(item) }
        queuedTotal += claimed.count
    }

    /// The oldest claimed delivery that may start now — of a configuration under its share, with
    /// a slot free in all — counted in flight; nil when none may.
    mutating func start(maxInFlight: Int, perListener: Int) -> Claimed? {
        guard postingTotal < maxInFlight else { return nil }
        var best: (configuration: String, id: Int64)?
        for (configuration, waiting) in queued where posting[configuration, default: 0] < perListener {
            if let first = waiting.first, best == nil || first.delivery.id < best!.id { best = (configuration, first.delivery.id) }
        }
        guard let configuration = best?.configuration, var waiting = queued[configuration] else { return nil }
        let next = waiting.removeFirst()
        queued[configuration] = waiting.isEmpty ? nil : waiting
        queuedTotal -= 1
        posting[configuration, default: 0] += 1
        postingTotal += 1
        return next
    }

    /// A POST ended: its slot is free and its outcome waits for the next settling.
    mutating func finish(_ delivery: ConnectDeliveryRecord, _ outcome: ConnectAttemptOutcome) {
        let left = posting[delivery.configurationID, default: 1] - 1
        posting[delivery.configurationID] = left > 0 ? left : nil
        postingTotal -= 1
        outcomes.append(ConnectOutcomeRecord(id: delivery.id, token: delivery.claimToken ?? "", outcome, heldUntil: delivery.claimedUntil))
    }

    /// Gives back every claimed delivery not started (shutting down).
    mutating func releaseQueued() {
        for item in queued.values.joined() {
            outcomes.append(
                ConnectOutcomeRecord(id: item.delivery.id, token: item.delivery.claimToken ?? "", .released, heldUntil: item.delivery.claimedUntil))
        }
        queued = [:]
        queuedTotal = 0
    }
}

/// Delivers the Connect outbox (docs/webhooks.md): claims due events — each the oldest undelivered
/// one of its envelope for its configuration —, POSTs each signed with the account's HMAC keys,
/// and records the outcome: delivered on a 2xx, otherwise retried with back-off until the
/// attempts run out (a failure record). At-least-once: a coordinator killed mid-delivery leaves a
/// claim that expires, and the event is delivered again.
public final class ConnectPublisher: Service {
    let store: any CoordinatorStorage
    let connect: ConnectService
    let configuration: ConnectPublisherConfiguration
    let clock: any FleetClock
    let wall: WallClock
    let transport: any ConnectTransport
    let logger: Logger
    private let hold = Mutex(ConnectHold())
    /// Settlings that failed in a row: after one, outcomes are recorded alone, without claims.
    private let failedSettlings = Mutex(0)
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>
    private let delivered: Counter
    private let retried: Counter
    private let failed: Counter
    private let pruned: Counter
    /// Who is told of each outcome recorded (``outcomesRecorded()``).
    private let watchers = Mutex<[UUID: AsyncStream<Int64>.Continuation]>([:])

    package init(
        store: any CoordinatorStorage, connect: ConnectService, configuration: ConnectPublisherConfiguration = .init(),
        clock: any FleetClock = ContinuousClock(), wall: WallClock = .system, transport: any ConnectTransport, logger: Logger
    ) {
        self.store = store
        self.connect = connect
        self.configuration = configuration
        self.clock = clock
        self.wall = wall
        self.transport = transport
        self.logger = logger
        (wakes, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        delivered = Counter(label: "signfleet_connect_deliveries_total", dimensions: [("outcome", "delivered")])
        retried = Counter(label: "signfleet_connect_deliveries_total", dimensions: [("outcome", "retry")])
        failed = Counter(label: "signfleet_connect_deliveries_total", dimensions: [("outcome", "failed")])
        pruned = Counter(label: "signfleet_connect_pruned_total")
    }

    /// The publisher of the coordinator serving `services`: what an embedder runs beside its
    /// ``CoordinatorService`` (in the same `ServiceGroup`) to deliver Connect events.
    /// - Parameters:
    ///   - services: the coordinator's services, whose store holds the outbox.
    ///   - configuration: poll interval, attempts, back-off, concurrency, retention.
    ///   - clock: what its waits (poll, request timeout) run on.
    ///   - wall: what it stamps outcomes and back-off times with (the services' own clock).
    ///   - transport: how a message is POSTed (HTTP by default; tests give their own).
    ///   - logger: where deliveries and failures are logged.
    public convenience init(
        services: CoordinatorServices, configuration: ConnectPublisherConfiguration = .init(), clock: any FleetClock = ContinuousClock(),
        wall: WallClock = .system, transport: any ConnectTransport = HTTPConnectTransport(), logger: Logger
    ) {
        self.init(
            store: services.envelopes.store, connect: services.connect, configuration: configuration, clock: clock, wall: wall,
            transport: transport, logger: logger)
    }

    /// Reads the outbox now rather than at the next poll (a change was just committed).
    public func nudge() { wake.yield() }

    /// The id of each delivery whose outcome (delivered, retry, failure record, claim given back)
    /// is recorded from now on, as it is recorded: what a caller waits on instead of polling the store.
    public func outcomesRecorded() -> AsyncStream<Int64> {
        let (stream, continuation) = AsyncStream<Int64>.makeStream()
        let id = UUID()
        watchers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in _ = self?.watchers.withLock { $0.removeValue(forKey: id) } }
        return stream
    }

    public func run() async throws {
        logger.info("connect publisher started", metadata: ["jitterSeed": "\(configuration.jitterSeed)"])
        let wake = self.wake
        await withTaskCancellationOrGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                group.addTask { [clock, configuration] in
                    // The poll: the outbox is read at least this often.
                    while !Task.isCancelled {
                        try? await clock.sleep(for: configuration.pollInterval)
                        wake.yield()
                    }
                }
                if configuration.retention != nil {
                    group.addTask { [self] in
                        while !Task.isCancelled {
                            guard (try? await clock.sleep(for: configuration.pruneInterval)) != nil else { return }
                            await prune()
                        }
                    }
                }
                wake.yield()
                for await _ in wakes {
                    await settle(into: &group)
                }
                group.cancelAll()
            }
        } onCancelOrGracefulShutdown: {
            wake.finish()
        }
        // Every delivery has ended (cancelled ones give their claims back): what is held is
        // recorded once more, in a task of its own, since this one may be cancelled.
        let outcomes = hold.withLock { hold in
            hold.releaseQueued()
            defer { hold.outcomes = [] }
            return hold.outcomes
        }
        if !outcomes.isEmpty {
            let store = self.store
            do {
                _ = try await Task { try await store.settleConnectDeliveries(outcomes, claim: nil) }.value
                tell(outcomes)
            } catch {
                // The claims expire and the events are tried again: at-least-once.
                logger.warning("connect: cannot record outcomes at shutdown", metadata: ["count": "\(outcomes.count)", "error": "\(error)"])
            }
        }
        await transport.shutdown()
        for watcher in watchers.withLock({ Array($0.values) }) { watcher.finish() }
    }

    /// One settling: records the outcomes of the attempts that ended since the last one, and
    /// claims what there is room for — up to each listener's share held ahead of its slots —, in
    /// one store transaction; then starts what may start. While it waits for the store, more
    /// attempts end: the next settling takes them all (a busy publisher writes in batches).
    private func settle(into group: inout DiscardingTaskGroup) async {
        let (outcomes, held, heldTotal) = hold.withLock { hold in
            defer { hold.outcomes = [] }
            return (hold.outcomes, hold.held, hold.postingTotal + hold.queuedTotal)
        }
        // After a failed settling, the next records its outcomes alone: a claim cannot keep them from the store.
        let recovering = failedSettlings.withLock { $0 } > 0 && !outcomes.isEmpty
        let room = recovering ? 0 : configuration.maxHeld - heldTotal
        let now = wall.now()
        let claim = ConnectClaimRequest(
            now: now, claimUntil: now.addingTimeInterval(configuration.claimLifetime.seconds), limit: room,
            perConfiguration: configuration.maxHeldPerListener, held: held, token: UUID().uuidString)
        guard !outcomes.isEmpty || room > 0 else { return }
        let settlement: ConnectSettlement
        do {
            settlement = try await store.settleConnectDeliveries(outcomes, claim: claim)
        } catch {
            // Kept for the next settling (the poll's, at the latest), but for those whose claim has
            // lapsed: their rows are claimable again, so they go (delivered again: at-least-once),
            // and a batch that keeps failing does not grow for ever.
            failedSettlings.withLock { $0 += 1 }
            let kept = outcomes.filter { ($0.heldUntil ?? .distantFuture) > now }
            hold.withLock { $0.outcomes.insert(contentsOf: kept, at: 0) }
            logger.warning(
                "connect: cannot settle the outbox",
                metadata: ["outcomes": "\(outcomes.count)", "dropped": "\(outcomes.count - kept.count)", "error": "\(error)"])
            return
        }
        failedSettlings.withLock { $0 = 0 }
        if settlement.recorded.count < outcomes.count {
            logger.notice("connect: claims lapsed before their outcomes were recorded", metadata: ["count": "\(outcomes.count - settlement.recorded.count)"])
        }
        tell(outcomes)
        if !settlement.claimed.isEmpty {
            let context = await PassContext.load(for: settlement.claimed, store: store, connect: connect)
            hold.withLock { $0.enqueue(settlement.claimed.map { ConnectHold.Claimed(delivery: $0, context: context) }) }
        }
        startDeliveries(into: &group)
        // A full page may mean more are due.
        if room > 0, settlement.claimed.count == room { wake.yield() }
    }

    /// Starts a task for each claimed delivery a free slot allows; each task goes on with the next
    /// one its slot allows when its attempt ends, so a slot does not wait for a settling to refill.
    private func startDeliveries(into group: inout DiscardingTaskGroup) {
        let (limit, perListener) = (configuration.maxInFlight, configuration.maxInFlightPerListener)
        while let first = hold.withLock({ $0.start(maxInFlight: limit, perListener: perListener) }) {
            group.addTask { [self] in
                var next: ConnectHold.Claimed? = first
                while let claimed = next {
                    let outcome = await deliver(claimed.delivery, context: claimed.context)
                    next = hold.withLock { hold in
                        hold.finish(claimed.delivery, outcome)
                        return hold.start(maxInFlight: limit, perListener: perListener)
                    }
                    // The outcome waits for a settling, which may also claim the envelope's next event.
                    wake.yield()
                }
            }
        }
    }

    /// Deletes the ended rows recorded longer ago than the retention, in batches (each its own
    /// transaction, so ingest's commits interleave), until a batch comes back short.
    /// - Returns: how many rows were deleted.
    @discardableResult
    package func prune() async -> Int {
        guard let retention = configuration.retention else { return 0 }
        let cutoff = wall.now().addingTimeInterval(-retention.seconds)
        var total = 0
        for _ in 0..<100 {
            let deleted: Int
            do {
                deleted = try await store.pruneConnectDeliveries(recordedBefore: cutoff, limit: Self.pruneBatch)
            } catch {
                logger.warning("connect: cannot prune the outbox", metadata: ["error": "\(error)"])
                break
            }
            total += deleted
            if deleted < Self.pruneBatch || Task.isCancelled { break }
        }
        if total > 0 {
            pruned.increment(by: total)
            logger.debug("connect: pruned ended deliveries", metadata: ["rows": "\(total)"])
        }
        return total
    }

    /// Rows deleted per pruning transaction.
    static let pruneBatch = 5_000

    /// Tells the watchers of ``outcomesRecorded()`` that these outcomes were written.
    private func tell(_ outcomes: [ConnectOutcomeRecord]) {
        let watchers = self.watchers.withLock { Array($0.values) }
        guard !watchers.isEmpty else { return }
        for outcome in outcomes {
            for watcher in watchers { watcher.yield(outcome.id) }
        }
    }

    /// One attempt at one delivery: how it ended (recorded by a later settling).
    func deliver(_ delivery: ConnectDeliveryRecord, context: PassContext) async -> ConnectAttemptOutcome {
        // Shutting down: a delivery not yet posted gives its claim back.
        if Task.isCancelled { return .released }
        do {
            try await attempt(delivery, context: context)
            delivered.increment()
            return .delivered(at: wall.now())
        } catch let error as ConnectAttemptError where error.released {
            return .released
        } catch where Task.isCancelled {
            // Shutting down: the attempt was cut short by us, not the listener, and is not counted.
            return .released
        } catch {
            let reason = (error as? ConnectAttemptError)?.message ?? ConnectAttemptError.describe(error)
            let now = wall.now()
            if delivery.attempts + 1 >= configuration.maxAttempts || (error as? ConnectAttemptError)?.final == true {
                failed.increment()
                logger.warning(
                    "connect: delivery failed for good",
                    metadata: ["delivery": "\(delivery.id)", "event": "\(delivery.event)", "envelope": "\(delivery.envelopeID)", "error": "\(reason)"])
                return .failed(at: now, error: reason)
            }
            retried.increment()
            return .retry(next: now.addingTimeInterval(backoff(after: delivery).seconds), at: now, error: reason)
        }
    }

    /// The wait before the next attempt: full jitter under a ceiling doubling with each attempt,
    /// drawn from the delivery's id and the publisher's seed (replayable).
    func backoff(after delivery: ConnectDeliveryRecord) -> Duration {
        var backoff = configuration.backoff.jittered(seed: Backoff.jitterSeed(for: String(delivery.id), salt: configuration.jitterSeed))
        var delay = Duration.zero
        for _ in 0...min(delivery.attempts, 40) { delay = backoff.next() }
        return delay
    }

    /// Who created each envelope's device: never changes, so kept.
    private let users = Mutex<[String: String]>([:])
    /// Envelopes read for the events of recent changes (``RecentEnvelopes``).
    private let recentEnvelopes = Mutex(RecentEnvelopes(capacity: 1024))

    /// An envelope event's body: the envelope read once per change's first messages (``RecentEnvelopes``), shown
    /// as the configuration asks, and who created it.
    private func envelopeBody(_ delivery: ConnectDeliveryRecord, configuration: ConnectConfigurationRecord) async throws -> Data {
        let include = ConnectMessage.includeKey(configuration)
        let kept = recentEnvelopes.withLock { $0.entry(for: delivery) }
        let summary: REST.Envelope
        let deviceID: String
        if let kept, let keptSummary = kept.summaries[include] {
            (summary, deviceID) = (keptSummary, kept.deviceID)
        } else {
            guard let aggregate = try await store.envelope(id: delivery.envelopeID, accountID: delivery.accountID) else {
                throw ConnectAttemptError("envelope \(delivery.envelopeID) is gone", final: true)
            }
            // What captive signers filled in, for a configuration that shows the tabs' values.
            let captive = configuration.includeDataList.contains("tabs") ? try await store.captiveTabs(envelopeID: aggregate.envelope.id) : []
            summary = ConnectMessage.summary(of: aggregate, for: configuration, captive: captive)
            deviceID = aggregate.envelope.deviceID
            recentEnvelopes.withLock { $0.keep(aggregate, summary: summary, include: include, for: delivery) }
        }
        let userKey = delivery.accountID + "\n" + deviceID
        var user = users.withLock { $0[userKey] }
        if user == nil {
            user = try await store.device(accountID: delivery.accountID, id: deviceID)?.userID ?? ""
            users.withLock { $0[userKey] = user }
        }
        return ConnectMessage.body(delivery, configuration: configuration, summary: summary, userID: user ?? "", at: wall.now())
    }

    private func attempt(_ delivery: ConnectDeliveryRecord, context: PassContext) async throws {
        guard let configuration = context.configurations[delivery.configurationID] else {
            if context.unreadable.contains(delivery.configurationID) { throw ConnectAttemptError("the store could not be read") }
            throw ConnectAttemptError("the configuration is gone", final: true)
        }
        if let refusal = context.refusals[delivery.configurationID] { throw ConnectAttemptError(refusal, final: true) }
        let body: Data
        if EnvelopeEvent.Kind(rawValue: delivery.event)?.isTemplateEvent == true {
            body = ConnectMessage.templateBody(delivery, configuration: configuration, at: wall.now())
        } else {
            body = try await envelopeBody(delivery, configuration: configuration)
        }
        guard body.count <= self.configuration.maxMessageBytes else {
            throw ConnectAttemptError(
                "the message would be \(body.count) bytes, more than the \(self.configuration.maxMessageBytes) a message may have", final: true)
        }
        let keys = configuration.includeHMAC ? context.keys[delivery.accountID] ?? [] : []
        if configuration.includeHMAC, keys.isEmpty {
            logger.warning(
                "connect: includeHMAC is on but the account has no active key; the message goes unsigned",
                metadata: ["account": "\(delivery.accountID)", "configuration": "\(configuration.id)"])
        }
        // A claim that lapsed meanwhile (a starved process) is another coordinator's now.
        // One claimed ahead that waited for a slot gives its claim back unless the attempt can end
        // (answer or timeout) and its outcome be recorded while the claim holds, with the margin
        // a claim was made with (5 s beyond a second timeout) for the settling's wait and clocks.
        if let until = delivery.claimedUntil,
           wall.now().addingTimeInterval(self.configuration.requestTimeout.seconds + ConnectPublisherConfiguration.claimMargin.seconds) >= until
        {
            throw ConnectAttemptError("the claim lapsed", released: true)
        }
        let headers = [(name: "Content-Type", value: "application/json"), (name: "User-Agent", value: "SignFleet-Connect/2.1")]
            + ConnectMessage.signatures(of: body, keys: keys)
        let status = try await withThrowingTaskGroup(of: Int?.self) { group in
            group.addTask { [transport] in try await transport.post(configuration.url, body: body, headers: headers) }
            group.addTask { [clock, timeout = self.configuration.requestTimeout] in
                try await clock.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let status = first else {
                try Task.checkCancellation()
                throw ConnectAttemptError("no answer within \(self.configuration.requestTimeout)")
            }
            return status
        }
        guard (200..<300).contains(status) else { throw ConnectAttemptError("the listener answered HTTP \(status)") }
    }
}

/// What was read for recent changes' first messages, so a change's other events are not read
/// and rendered again: per envelope, the change it was read for (its `recordedAt`: a change's
/// events share it), who created the envelope, its rendered summaries (no documents: a PDF is
/// never kept), and its statuses. An entry serves only a first attempt of an event of the same
/// change whose outcome the statuses already show (an `envelope-completed` needs `completed`), so
/// a retry, another change, or a change stamped in the same millisecond as the one read reads the
/// envelope again.
struct RecentEnvelopes {
    struct Entry: Sendable {
        var recordedAt: Date
        var deviceID: String
        /// As messages show it, by what the configuration includes (``ConnectMessage/includeKey(_:)``).
        var summaries: [String: REST.Envelope] = [:]
        var status: String
        var recipientStatuses: [String: String]

        init(recordedAt: Date, aggregate: EnvelopeAggregate) {
            self.recordedAt = recordedAt
            deviceID = aggregate.envelope.deviceID
            status = aggregate.envelope.status
            recipientStatuses = Dictionary(aggregate.recipients.map { ($0.recipientID, $0.status) }, uniquingKeysWith: { first, _ in first })
        }

        /// Whether the envelope as read already shows what `delivery` reports.
        func shows(_ delivery: ConnectDeliveryRecord) -> Bool {
            guard let kind = EnvelopeEvent.Kind(rawValue: delivery.event) else { return false }
            let recipient = delivery.recipientID.flatMap { recipientStatuses[$0] }
            switch kind {
            case .envelopeSent, .recipientSent: return kind == .envelopeSent || recipient != nil
            case .envelopeDelivered: return ["delivered", "completed", "declined", "voided"].contains(status)
            case .envelopeCompleted: return status == "completed"
            case .envelopeDeclined: return status == "declined"
            case .envelopeVoided: return status == "voided"
            case .recipientDelivered: return ["delivered", "signed", "completed", "declined"].contains(recipient ?? "")
            case .recipientCompleted: return ["signed", "completed"].contains(recipient ?? "")
            case .recipientDeclined: return recipient == "declined"
            case .templateModified: return false
            }
        }
    }

    private var entries: [String: Entry] = [:]
    private var order: [String] = []
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count }

    /// The read made for another event of `delivery`'s change, if it may serve this one.
    func entry(for delivery: ConnectDeliveryRecord) -> Entry? {
        guard delivery.attempts == 0, let entry = entries[Self.key(delivery)], entry.recordedAt == delivery.recordedAt, entry.shows(delivery)
        else { return nil }
        return entry
    }

    mutating func keep(_ aggregate: EnvelopeAggregate, summary: REST.Envelope, include: String, for delivery: ConnectDeliveryRecord) {
        let key = Self.key(delivery)
        var entry = entries[key].flatMap { $0.recordedAt == delivery.recordedAt && $0.status == aggregate.envelope.status ? $0 : nil }
            ?? Entry(recordedAt: delivery.recordedAt, aggregate: aggregate)
        entry.summaries[include] = summary
        if entries.updateValue(entry, forKey: key) == nil { order.append(key) }
        if order.count > capacity {
            // The older half goes: each entry is used within moments of its read, or not at all.
            for old in order.prefix(order.count / 2) { entries[old] = nil }
            order.removeFirst(order.count / 2)
        }
    }

    private static func key(_ delivery: ConnectDeliveryRecord) -> String { delivery.accountID + "\n" + delivery.envelopeID }
}

/// What one pass's deliveries read once, not once each: their configurations, why a
/// configuration may not be posted to now (its URL left the account's allow-list, or reaches one
/// of this coordinator's listeners), and each account's active HMAC keys.
struct PassContext: Sendable {
    var configurations: [String: ConnectConfigurationRecord] = [:]
    var refusals: [String: String] = [:]
    var keys: [String: [ConnectKeyRecord]] = [:]
    /// Configurations the store could not read now (tried again after the back-off).
    var unreadable: Set<String> = []

    static func load(for deliveries: [ConnectDeliveryRecord], store: any CoordinatorStorage, connect: ConnectService) async -> PassContext {
        var context = PassContext()
        var origins: [String: [String]] = [:]
        for delivery in deliveries {
            let account = delivery.accountID
            if context.keys[account] == nil {
                context.keys[account] = ((try? await store.connectKeys(accountID: account)) ?? []).filter { $0.revokedAt == nil }
                origins[account] = (try? await store.returnOrigins(accountID: account)) ?? []
            }
            guard context.configurations[delivery.configurationID] == nil, context.refusals[delivery.configurationID] == nil else { continue }
            let read: ConnectConfigurationRecord?
            do {
                read = try await store.connectConfiguration(id: delivery.configurationID, accountID: account)
            } catch {
                context.unreadable.insert(delivery.configurationID)
                continue
            }
            guard let configuration = read else { continue }
            context.configurations[configuration.id] = configuration
            // The account's allow-list as it is now (it may have changed since the configuration was made).
            let allowed = origins[account] ?? []
            if !allowed.isEmpty, !allowed.contains((try? ReturnURLPolicy.origin(of: configuration.url, field: "urlToPublishTo")) ?? "") {
                context.refusals[configuration.id] = "urlToPublishTo is no longer in the account's allowed origins"
            } else if let own = connect.ownListener(configuration.url) {
                context.refusals[configuration.id] = "urlToPublishTo is this coordinator's own listener (\(own))"
            }
        }
        return context
    }
}

/// Why one attempt did not deliver; `final` when trying again cannot help.
struct ConnectAttemptError: Error, CustomStringConvertible {
    var message: String
    var final: Bool
    /// Not an attempt at all: the claim is given back, nothing counted.
    var released: Bool

    init(_ message: String, final: Bool = false, released: Bool = false) {
        self.message = message
        self.final = final
        self.released = released
    }

    var description: String { message }

    /// A transport error as the failure record shows it: its class, not the socket layer's text
    /// (which would tell an account more about the network than whether its listener answered).
    static func describe(_ error: any Error) -> String {
        let text = String(describing: error).lowercased()
        if text.contains("refused") { return "the connection was refused" }
        if text.contains("timeout") || text.contains("timed out") || text.contains("deadline") { return "no answer in time" }
        if text.contains("ssl") || text.contains("tls") || text.contains("certificate") || text.contains("handshake") { return "TLS failed" }
        if text.contains("resolve") || text.contains("dns") || text.contains("lookup") || text.contains("name or service") {
            return "the host name did not resolve"
        }
        if text.contains("closed") || text.contains("reset") || text.contains("eof") { return "the connection closed before an answer" }
        return "the request failed"
    }
}
