import FleetProtocol
import Foundation
import Logging
import Metrics
import Synchronization

/// A device whose receipts reach further than this store: the store lost items it had applied and
/// acknowledged (restored from an older backup, its write-ahead log deleted).
public struct DeviceStoreRegression: Sendable, Hashable, Codable {
    public var accountID: String
    public var deviceID: String
    /// What this store had applied for the device when the loss was found (it stays as found).
    public var lastApplied: UInt64
    /// The device holds receipts up to here: items `lastApplied + 1 … acknowledgedThrough` are
    /// missing from this store until the device sends them again.
    public var acknowledgedThrough: UInt64
    /// ISO 8601 on the HTTP API, as every time there.
    public var since: Date

    public init(accountID: String, deviceID: String, lastApplied: UInt64, acknowledgedThrough: UInt64, since: Date) {
        self.accountID = accountID
        self.deviceID = deviceID
        self.lastApplied = lastApplied
        self.acknowledgedThrough = acknowledgedThrough
        self.since = since
    }
}

/// Watches for devices that are ahead of the store (docs/sync.md, "When a store goes back in time").
/// A device says how far its receipts reach when it enrolls (`acknowledgedThrough`),
/// and a push that leaves a gap shows it too. Each such device is logged once at error level,
/// counted, listed on `GET /status` and makes `GET /health` degraded until its `lastApplied`
/// catches up (the device sent its retained items again), which is logged as well.
public final class StoreRegressionMonitor: Sendable {
    public static let regressionsLabel = "signfleet_store_regressions_total"
    public static let behindLabel = "signfleet_store_devices_behind"
    /// `GET /health`'s reason while any device is ahead of the store.
    public static let healthReason = "store_behind_devices"

    private struct Key: Hashable {
        var account: String
        var device: String
    }

    private let path: String
    private let logger: Logger
    private let now: @Sendable () -> Date
    private let found: Counter
    private let behind: Gauge
    private let state = Mutex<[Key: DeviceStoreRegression]>([:])
    /// Mirrors `!state.isEmpty`, so the ingest's hot path costs one atomic load when all is well.
    private let any = Atomic<Bool>(false)
    private let foundCount = Atomic<Int>(0)

    /// Devices found ahead of the store since it opened (the counter `signfleet_store_regressions_total`).
    public var regressionsFound: Int { foundCount.load(ordering: .relaxed) }

    public init(
        path: String, logger: Logger = Logger(label: "signfleet.coordinator.store"),
        metricsFactory: any MetricsFactory = MetricsSystem.factory, now: @escaping @Sendable () -> Date = WallClock.system.now
    ) {
        self.path = path
        self.logger = logger
        self.now = now
        found = Counter(label: Self.regressionsLabel, factory: metricsFactory)
        behind = Gauge(label: Self.behindLabel, factory: metricsFactory)
    }

    /// The devices ahead of the store now, by account and device.
    public var current: [DeviceStoreRegression] {
        state.withLock { Array($0.values) }.sorted { ($0.accountID, $0.deviceID) < ($1.accountID, $1.deviceID) }
    }

    public var healthReasons: [String] { any.load(ordering: .acquiring) ? [Self.healthReason] : [] }

    /// What one device says or shows: its receipts reach `acknowledgedThrough` while this store has
    /// applied `lastApplied` for it.
    public func observe(accountID: String, deviceID: String, lastApplied: UInt64, acknowledgedThrough: UInt64?) {
        if let acknowledgedThrough, acknowledgedThrough > lastApplied {
            recordBehind(accountID: accountID, deviceID: deviceID, lastApplied: lastApplied, acknowledgedThrough: acknowledgedThrough)
        } else {
            recordProgress(accountID: accountID, deviceID: deviceID, lastApplied: lastApplied)
        }
    }

    private func recordBehind(accountID: String, deviceID: String, lastApplied: UInt64, acknowledgedThrough: UInt64) {
        let key = Key(account: accountID, device: deviceID)
        let isNew: Bool = state.withLock { regressions in
            if var known = regressions[key] {
                known.acknowledgedThrough = max(known.acknowledgedThrough, acknowledgedThrough)
                regressions[key] = known
                return false
            }
            regressions[key] = DeviceStoreRegression(
                accountID: accountID, deviceID: deviceID, lastApplied: lastApplied, acknowledgedThrough: acknowledgedThrough, since: now())
            behind.record(regressions.count)
            any.store(true, ordering: .releasing)
            return true
        }
        guard isNew else { return }
        found.increment()
        foundCount.add(1, ordering: .relaxed)
        logger.error(
            "this store lost items it had acknowledged (restored from an older backup, or its write-ahead log lost): device \(deviceID) of account \(accountID) holds receipts up to item \(acknowledgedThrough) but the store has applied up to \(lastApplied); a device that kept its payloads (retainSynced) sends them again, any other loss is listed on GET /status (storeRegressions)",
            metadata: ["store": "\(path)"])
    }

    private func recordProgress(accountID: String, deviceID: String, lastApplied: UInt64) {
        guard any.load(ordering: .acquiring) else { return }
        let key = Key(account: accountID, device: deviceID)
        let healed: DeviceStoreRegression? = state.withLock { regressions in
            guard let known = regressions[key], lastApplied >= known.acknowledgedThrough else { return nil }
            regressions[key] = nil
            behind.record(regressions.count)
            any.store(!regressions.isEmpty, ordering: .releasing)
            return known
        }
        guard let healed else { return }
        logger.notice(
            "device \(deviceID) of account \(accountID) sent its lost items again: the store has applied up to \(lastApplied) (it had lost \(healed.lastApplied + 1)…\(healed.acknowledgedThrough))")
    }
}
