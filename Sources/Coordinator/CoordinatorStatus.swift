import FleetProtocol
import Foundation
import ZeroMQ

/// A snapshot of the coordinator for `GET /status`: what the store holds and who is
/// connected now.
public struct CoordinatorStatus: Sendable, Hashable, Codable {
    /// The coordinator software version.
    public var version: String
    /// Identifies this run of the coordinator (fresh on every start).
    public var instance: String
    /// Path of the SQLite store.
    public var storePath: String
    /// Devices enrolled in the store.
    public var devicesEnrolled: Int
    /// Devices heard from within the liveness timeout.
    public var devicesAlive: Int
    /// Envelopes created by sync ingest.
    public var envelopes: Int
    /// Sync items recorded, by the outcome stored the first time (`applied`, `rejected`).
    public var syncOutcomes: [String: Int]
    /// `curve` or `plaintext` (docs/protocol.md, "Security model").
    public var transport: String
    /// The coordinator's CURVE public key in Z85, which devices pin; absent under plain TCP.
    public var curvePublicKey: String?
    /// The store's disk-fault episode going on now (disk full, I/O errors); absent while writes succeed.
    public var storeFault: StoreFaultEpisode?
    /// Devices whose receipts reach further than the store (it lost items it acknowledged), until
    /// they send them again; absent when there are none.
    public var storeRegressions: [DeviceStoreRegression]?
    /// Connect's outbox (docs/webhooks.md): absent while it has never held an event.
    public var connect: ConnectDeliveryCounts?

    public init(
        version: String, instance: String, storePath: String, devicesEnrolled: Int, devicesAlive: Int, envelopes: Int,
        syncOutcomes: [String: Int], transport: String = "plaintext", curvePublicKey: String? = nil,
        storeFault: StoreFaultEpisode? = nil, storeRegressions: [DeviceStoreRegression]? = nil
    ) {
        self.storeFault = storeFault
        self.storeRegressions = storeRegressions
        self.transport = transport
        self.curvePublicKey = curvePublicKey
        self.version = version
        self.instance = instance
        self.storePath = storePath
        self.devicesEnrolled = devicesEnrolled
        self.devicesAlive = devicesAlive
        self.envelopes = envelopes
        self.syncOutcomes = syncOutcomes
    }
}

/// Counts kept by the store, for ``CoordinatorStatus``.
public struct StoreCounts: Sendable, Hashable {
    public var devicesEnrolled: Int
    public var envelopes: Int
    public var syncOutcomes: [String: Int]

    package init(devicesEnrolled: Int, envelopes: Int, syncOutcomes: [String: Int]) {
        self.devicesEnrolled = devicesEnrolled
        self.envelopes = envelopes
        self.syncOutcomes = syncOutcomes
    }
}

extension CoordinatorStatus {
    /// The status of a coordinator serving `server` from `store`.
    /// - Throws: GRDB's `DatabaseError` when the store cannot be read.
    public static func current(store: CoordinatorStore, server: FleetServer) async throws -> CoordinatorStatus {
        try await current(storage: store, server: server)
    }

    /// The same, on any ``CoordinatorStorage``.
    package static func current(storage store: any CoordinatorStorage, server: FleetServer) async throws -> CoordinatorStatus {
        let counts = try await store.counts()
        let (transport, curvePublicKey): (String, String?) =
            switch server.configuration.security {
            case .plaintext: ("plaintext", nil)
            case .curve(let keys): ("curve", Z85.encode(keys.publicKey))
            }
        var status = CoordinatorStatus(
            version: FleetProtocolInfo.softwareVersion, instance: server.instance, storePath: store.location,
            devicesEnrolled: counts.devicesEnrolled, devicesAlive: await server.aliveDeviceCount,
            envelopes: counts.envelopes, syncOutcomes: counts.syncOutcomes, transport: transport, curvePublicKey: curvePublicKey,
            storeFault: store.faults.episode, storeRegressions: store.regressions.current.isEmpty ? nil : store.regressions.current)
        let connect = try await store.connectDeliveryCounts()
        if connect.pending > 0 || connect.failed > 0 { status.connect = connect }
        return status
    }
}
