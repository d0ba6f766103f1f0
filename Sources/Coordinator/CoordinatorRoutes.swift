import Foundation
import FleetProtocol
import Metrics

/// The coordinator's request handlers, registered on a `RequestRouter`.
public struct CoordinatorServices: Sendable {
    public var accounts: AccountDirectory
    public var auth: AuthService
    public var devices: DeviceRegistry
    public var ingest: SyncIngest
    /// Per-account limits on account-bound requests (docs/protocol.md, "Rate limits").
    public var rateLimiter: RateLimiter
    /// Per-account templates: `templates.list`, `templates.fetch` and the admin edits.
    public var templates: TemplateCatalog
    /// The envelope lifecycle after sync: `envelope.get`, `envelope.void`, `envelope.recipient.action`.
    public var envelopes: EnvelopeService
    /// Captive signing: `recipient.view`, `signing.url.create` and the signing pages' sessions.
    public var captive: CaptiveSigningService
    /// The REST API's OAuth: integration keys, consent, the JWT grant (docs/rest-api.md).
    public var oauth: OAuthService
    /// Connect configurations and HMAC keys (docs/webhooks.md); delivery is ``ConnectPublisher``'s.
    public var connect: ConnectService

    /// - Parameters:
    ///   - store: the coordinator's database.
    ///   - host: the `auth.userinfo` host while no HTTP listener has published its address.
    ///   - tokenLifetime: how long an issued access token stays valid.
    ///   - metricsFactory: where the services report metrics (``SyncIngestMetrics``);
    ///     the process-wide `MetricsSystem.factory` unless given.
    ///   - captive: the captive signing time limits.
    ///   - now: the clock the services read (tests pass a fixed one).
    public init(store: CoordinatorStore, host: String? = nil, tokenLifetime: Duration = .seconds(3600),
                metricsFactory: any MetricsFactory = MetricsSystem.factory,
                captive: CaptiveSigningConfiguration = CaptiveSigningConfiguration(),
                now: @escaping @Sendable () -> Date = WallClock.system.now) {
        self.init(
            storage: store, host: host, tokenLifetime: tokenLifetime, metricsFactory: metricsFactory, captive: captive, now: now)
    }

    /// The same services on any ``CoordinatorStorage`` (SQLite or PostgreSQL; docs/storage.md).
    package init(storage store: any CoordinatorStorage, host: String? = nil, tokenLifetime: Duration = .seconds(3600),
                 metricsFactory: any MetricsFactory = MetricsSystem.factory,
                 captive: CaptiveSigningConfiguration = CaptiveSigningConfiguration(),
                 now: @escaping @Sendable () -> Date = WallClock.system.now) {
        accounts = AccountDirectory(storage: store, now: now)
        let links = CaptiveSigningLinks()
        auth = AuthService(storage: store, tokenLifetime: tokenLifetime, host: host, links: links, now: now)
        devices = DeviceRegistry(storage: store, auth: auth, now: now)
        ingest = SyncIngest(storage: store, devices: devices, metricsFactory: metricsFactory, now: now)
        rateLimiter = RateLimiter(now: now)
        templates = TemplateCatalog(storage: store, auth: auth, now: now)
        envelopes = EnvelopeService(storage: store, auth: auth, now: now)
        oauth = OAuthService(store: store, auth: auth, now: now)
        connect = ConnectService(store: store, links: links, now: now)
        self.captive = CaptiveSigningService(
            storage: store, auth: auth, configuration: captive, links: links, metricsFactory: metricsFactory, now: now)
    }

    /// Adds the handlers this build serves: `auth.token`, `auth.userinfo`, `device.enroll`, `sync.push`, `sync.results`,
    /// `templates.list` and `templates.fetch` (``TemplateCatalog``).
    /// Also `envelope.get`, `envelope.void` and `envelope.recipient.action` (``EnvelopeService``),
    /// `recipient.view` and `signing.url.create` (``CaptiveSigningService``).
    /// Every request that authenticates to an account is metered (``meter(_:)``); `auth.token` is not.
    public func register(in router: inout RequestRouter) {
        router.on(AccessTokenRequest.self) { request, _ throws(FleetError) in
            try await Self.typed { try await auth.issueToken(email: request.email, secret: request.secret) }
        }
        router.on(UserInfoRequest.self) { request, context throws(FleetError) in
            try await Self.typed { try await auth.userInfo(token: request.accessToken, meter: meter(context)) }
        }
        router.on(EnrollDevice.self) { [devices] request, context throws(FleetError) in
            try await Self.typed { try await devices.enroll(request, credential: context.credential, meter: meter(context)) }
        }
        router.on(SyncPush.self) { [ingest] request, context throws(FleetError) in
            try await Self.typed { try await ingest.apply(request, credential: context.credential, meter: meter(context)) }
        }
        router.on(SyncResultsQuery.self) { [ingest] request, context throws(FleetError) in
            try await Self.typed { try await ingest.results(request, credential: context.credential, meter: meter(context)) }
        }
        router.on(TemplateListRequest.self) { [templates] request, context throws(FleetError) in
            try await Self.typed { try await templates.list(request, meter: meter(context)) }
        }
        router.on(TemplateFetchRequest.self) { [templates] request, context throws(FleetError) in
            try await Self.typed { try await templates.fetch(request, meter: meter(context)) }
        }
        router.on(EnvelopeQuery.self) { [envelopes] request, context throws(FleetError) in
            try await Self.typed { try await envelopes.query(request, meter: meter(context)) }
        }
        router.on(EnvelopeVoid.self) { [envelopes] request, context throws(FleetError) in
            try await Self.typed { try await envelopes.void(request, meter: meter(context)) }
        }
        router.on(RecipientAction.self) { [envelopes] request, context throws(FleetError) in
            try await Self.typed { try await envelopes.act(request, meter: meter(context)) }
        }
        router.on(RecipientViewRequest.self) { [captive] request, context throws(FleetError) in
            try await Self.typed { try await captive.recipientView(request, meter: meter(context)) }
        }
        router.on(SigningURLRequest.self) { [captive] request, context throws(FleetError) in
            try await Self.typed { try await captive.signingURL(request, meter: meter(context)) }
        }
    }

    /// Counts a request against its account's limits once the handler knows the account:
    /// puts the status in the reply's header (`rl`, success or error) and throws
    /// `rate_limited` when a window is full, before anything is applied.
    public func meter(_ context: RequestContext) -> @Sendable (Account) throws -> Void {
        { [rateLimiter] account in
            let decision = rateLimiter.admit(accountID: account.id, limits: account.rateLimits)
            context.replyMetadata.rateLimit = decision.status
            if let error = decision.error { throw error }
        }
    }

    /// Passes typed errors through, turns a disk fault of the store (full, I/O errors) into a
    /// retryable `unavailable` (``StoreFaultKind/refusal``) and anything else (a database failure)
    /// into a retryable `internal` error, so the sender always gets a typed reply.
    static func typed<T>(_ body: () async throws -> T) async throws(FleetError) -> T {
        do {
            return try await body()
        } catch let error as FleetError {
            throw error
        } catch {
            if let kind = StoreFaultKind.of(error) { throw kind.refusal }
            throw FleetError(.internal, "store failure: \(error)", retryable: true)
        }
    }
}
