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
    /// Seeds the back-off's jitter (printed at start; the same seed gives the same delays).
    public var jitterSeed: UInt64 = 0

    public init() {}

    /// How long a claim lasts: past it, another coordinator (or this one restarted) takes the row
    /// over. An attempt ends within the request timeout; the rest covers its store reads and writes.
    var claimLifetime: Duration { requestTimeout * 2 + .seconds(5) }
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
    private let inFlight = Mutex<[String: Int]>([:])
    private let wake: AsyncStream<Void>.Continuation
    private let wakes: AsyncStream<Void>
    private let delivered: Counter
    private let retried: Counter
    private let failed: Counter
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
    }

    /// The publisher of the coordinator serving `services`: what an embedder runs beside its
    /// ``CoordinatorService`` (in the same `ServiceGroup`) to deliver Connect events.
    /// - Parameters:
    ///   - clock: what its waits (poll, request timeout) run on.
    ///   - wall: what it stamps outcomes and back-off times with (the services' own clock).
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
                wake.yield()
                for await _ in wakes {
                    await claimAndDeliver(into: &group)
                }
                group.cancelAll()
            }
        } onCancelOrGracefulShutdown: {
            wake.finish()
        }
        await transport.shutdown()
        for watcher in watchers.withLock({ Array($0.values) }) { watcher.finish() }
    }

    /// One pass: claims what there is room for — at most each listener's share, none of a
    /// listener that has its share in flight — and starts each delivery.
    private func claimAndDeliver(into group: inout DiscardingTaskGroup) async {
        let counts = inFlight.withLock { $0 }
        let room = configuration.maxInFlight - counts.values.reduce(0, +)
        guard room > 0 else { return }
        let saturated = Set(counts.filter { $0.value >= configuration.maxInFlightPerListener }.keys)
        let now = wall.now()
        let token = UUID().uuidString
        let claimed: [ConnectDeliveryRecord]
        do {
            claimed = try await store.claimConnectDeliveries(
                now: now, claimUntil: now.addingTimeInterval(configuration.claimLifetime.seconds), limit: room,
                perConfiguration: configuration.maxInFlightPerListener, excluding: saturated, token: token)
        } catch {
            logger.warning("connect: cannot read the outbox", metadata: ["error": "\(error)"])
            return
        }
        let context = await PassContext.load(for: claimed, store: store, connect: connect)
        var released = 0
        for delivery in claimed {
            let admitted = inFlight.withLock { counts in
                guard counts[delivery.configurationID, default: 0] < configuration.maxInFlightPerListener else { return false }
                counts[delivery.configurationID, default: 0] += 1
                return true
            }
            guard admitted else {
                // This listener had part of its share in flight already: the row waits, unclaimed.
                _ = try? await store.finishConnectDelivery(id: delivery.id, token: token, .released)
                released += 1
                continue
            }
            group.addTask { [self] in
                // The slot is free once the listener has answered; the outcome's write follows (the
                // claim holds the row until it is recorded, so nothing is posted twice meanwhile).
                await deliver(delivery, context: context) {
                    // A pass claims in batches: it runs once a listener has half its share free (or
                    // all deliveries half theirs), not after every delivery — a pass costs a read and a write.
                    let batch = inFlight.withLock { counts in
                        counts[delivery.configurationID, default: 1] -= 1
                        let left = counts[delivery.configurationID] ?? 0
                        if left == 0 { counts[delivery.configurationID] = nil }
                        return left <= configuration.maxInFlightPerListener / 2 || counts.values.reduce(0, +) <= configuration.maxInFlight / 2
                    }
                    if batch { wake.yield() }
                }
                // Its envelope's next event may be ready now.
                wake.yield()
            }
        }
        // A full page may mean more are due; a page with rows given back waits for a delivery to end.
        if claimed.count == room, released == 0 { wake.yield() }
    }

    /// One attempt at one delivery, and its outcome recorded under the delivery's claim;
    /// `attempted` runs between the two.
    func deliver(_ delivery: ConnectDeliveryRecord, context: PassContext, attempted: @Sendable () -> Void = {}) async {
        let token = delivery.claimToken ?? ""
        let outcome: ConnectAttemptOutcome
        do {
            try await attempt(delivery, context: context)
            outcome = .delivered(at: wall.now())
            delivered.increment()
        } catch let error as ConnectAttemptError where error.released {
            outcome = .released
        } catch where Task.isCancelled {
            // Shutting down: the attempt was cut short by us, not the listener, and is not counted.
            outcome = .released
        } catch {
            let reason = (error as? ConnectAttemptError)?.message ?? ConnectAttemptError.describe(error)
            let now = wall.now()
            if delivery.attempts + 1 >= configuration.maxAttempts || (error as? ConnectAttemptError)?.final == true {
                outcome = .failed(at: now, error: reason)
                failed.increment()
                logger.warning(
                    "connect: delivery failed for good",
                    metadata: ["delivery": "\(delivery.id)", "event": "\(delivery.event)", "envelope": "\(delivery.envelopeID)", "error": "\(reason)"])
            } else {
                outcome = .retry(next: now.addingTimeInterval(backoff(after: delivery).seconds), at: now, error: reason)
                retried.increment()
            }
        }
        attempted()
        do {
            // Recorded even while shutting down (an unstructured task: this one may be cancelled,
            // and the store's accesses honour cancellation).
            let store = self.store
            let recorded = try await Task { try await store.finishConnectDelivery(id: delivery.id, token: token, outcome) }.value
            if !recorded {
                logger.notice("connect: a claim lapsed before its outcome was recorded", metadata: ["delivery": "\(delivery.id)"])
            }
            for watcher in watchers.withLock({ Array($0.values) }) { watcher.yield(delivery.id) }
        } catch {
            // The claim expires and the event is tried again: at-least-once.
            logger.warning("connect: cannot record a delivery's outcome", metadata: ["delivery": "\(delivery.id)", "error": "\(error)"])
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

    private func attempt(_ delivery: ConnectDeliveryRecord, context: PassContext) async throws {
        guard let configuration = context.configurations[delivery.configurationID] else {
            if context.unreadable.contains(delivery.configurationID) { throw ConnectAttemptError("the store could not be read") }
            throw ConnectAttemptError("the configuration is gone", final: true)
        }
        if let refusal = context.refusals[delivery.configurationID] { throw ConnectAttemptError(refusal, final: true) }
        guard let aggregate = try await store.envelope(id: delivery.envelopeID, accountID: delivery.accountID) else {
            throw ConnectAttemptError("envelope \(delivery.envelopeID) is gone", final: true)
        }
        let userKey = delivery.accountID + "\n" + aggregate.envelope.deviceID
        var user = users.withLock { $0[userKey] }
        if user == nil {
            user = try await store.device(accountID: delivery.accountID, id: aggregate.envelope.deviceID)?.userID ?? ""
            users.withLock { $0[userKey] = user }
        }
        let keys = configuration.includeHMAC ? context.keys[delivery.accountID] ?? [] : []
        if configuration.includeHMAC, keys.isEmpty {
            logger.warning(
                "connect: includeHMAC is on but the account has no active key; the message goes unsigned",
                metadata: ["account": "\(delivery.accountID)", "configuration": "\(configuration.id)"])
        }
        // A claim that lapsed meanwhile (a starved process) is another coordinator's now.
        if let until = delivery.claimedUntil, wall.now() >= until { throw ConnectAttemptError("the claim lapsed", released: true) }
        let body = ConnectMessage.body(delivery, configuration: configuration, aggregate: aggregate, userID: user ?? "", at: wall.now())
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
