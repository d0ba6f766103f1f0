import Foundation
import FleetProtocol
import Metrics

/// The coordinator's request handlers, registered on a ``RequestRouter``.
public struct CoordinatorServices: Sendable {
    public var accounts: AccountDirectory
    public var auth: AuthService
    public var devices: DeviceRegistry
    public var ingest: SyncIngest

    /// - Parameter metricsFactory: where the services report metrics (``SyncIngestMetrics``);
    ///   the process-wide `MetricsSystem.factory` unless given.
    public init(store: CoordinatorStore, host: String = "http://127.0.0.1:8080", tokenLifetime: Duration = .seconds(3600),
                metricsFactory: any MetricsFactory = MetricsSystem.factory,
                now: @escaping @Sendable () -> Date = Date.init) {
        accounts = AccountDirectory(store: store, now: now)
        auth = AuthService(store: store, tokenLifetime: tokenLifetime, host: host, now: now)
        devices = DeviceRegistry(store: store, auth: auth, now: now)
        ingest = SyncIngest(store: store, devices: devices, metricsFactory: metricsFactory, now: now)
    }

    /// Adds the handlers this build serves: `auth.token`, `auth.userinfo`, `device.enroll`, `sync.push`.
    public func register(in router: inout RequestRouter) {
        router.on(AccessTokenRequest.self) { request, _ throws(FleetError) in
            try await Self.typed { try await auth.issueToken(email: request.email, secret: request.secret) }
        }
        router.on(UserInfoRequest.self) { request, _ throws(FleetError) in
            try await Self.typed { try await auth.userInfo(token: request.accessToken) }
        }
        router.on(EnrollDevice.self) { [devices] request, context throws(FleetError) in
            try await Self.typed { try await devices.enroll(request, routingID: context.peerName) }
        }
        router.on(SyncPush.self) { [ingest] request, context throws(FleetError) in
            try await Self.typed { try await ingest.apply(request, routingID: context.peerName) }
        }
    }

    /// Passes typed errors through and turns anything else (a database failure)
    /// into a retryable `internal` error, so the sender always gets a typed reply.
    static func typed<T>(_ body: () async throws -> T) async throws(FleetError) -> T {
        do {
            return try await body()
        } catch let error as FleetError {
            throw error
        } catch {
            throw FleetError(.internal, "store failure: \(error)", retryable: true)
        }
    }
}
