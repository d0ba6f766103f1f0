import FleetProtocol
import Foundation

/// How a device node is set up: where its store lives and the SDK's setup keys.
///
/// Start from the defaults and change what you need, as with `DSMManager.defaultConfigurations()`:
///
/// ```swift
/// var configuration = DeviceConfiguration(storePath: "/var/lib/device-7/store.sqlite")
/// configuration.saveProgressAfterEachLocalSigner = true
/// configuration.apiTimeout = 90            // seconds; clamped to 30...1200
/// ```
///
/// Or from the SDK's string keys (`DeviceConfiguration.Key`):
///
/// ```swift
/// var keys = DeviceConfiguration.defaultConfigurations()
/// keys[DeviceConfiguration.Key.apiTimeout] = "5"      // becomes 30, as the SDK clamps it
/// let configuration = try DeviceConfiguration(storePath: path, configurations: keys)
/// ```
public struct DeviceConfiguration: Sendable {
    /// The SDK's setup keys, as strings.
    public enum Key {
        /// Save the envelope (and send a cached event) after each local signer finishes. `"true"`/`"false"`.
        public static let saveEnvelopeProgress = "DSM_SETUP_ENABLE_OFFLINE_SIGNING_SAVE_ENVELOPE_PROGRESS_KEY"
        /// Timeout of calls to the server, in seconds; clamped to 30...1200.
        public static let apiTimeout = "DSM_SETUP_API_TIMEOUT_KEY"
        /// The device id (default: generated once and persisted).
        public static let deviceId = "SIGNFLEET_DEVICE_ID_KEY"
    }

    /// The SDK's bounds for ``apiTimeout``.
    public static let apiTimeoutRange: ClosedRange<TimeInterval> = 30...1200
    /// The default API timeout.
    public static let defaultAPITimeout: TimeInterval = 60

    /// Path of the SQLite file (created if missing; the directory must exist).
    public var storePath: String
    /// The device id; `nil` generates one on first open and keeps it in the store.
    public var deviceId: String?
    /// Whether each local signer's work is committed (and an ``DeviceEvent/envelopeCached(_:)`` sent)
    /// as soon as that signer finishes. When `false`, a signing session commits once at its end
    /// (completion, finish-later or decline); a crash mid-session loses that session's signatures,
    /// never earlier ones, and never anything queued for sync.
    public var saveProgressAfterEachLocalSigner: Bool
    /// Subscribers' event buffer: a subscriber that falls this many events behind loses the oldest.
    public var eventBufferLimit: Int
    /// How hard each commit pushes to disk.
    public enum Durability: String, Hashable, Sendable {
        /// `synchronous = FULL`: a commit survives power loss as well as a killed process (default).
        case powerLoss
        /// `synchronous = NORMAL` (WAL): a commit survives a killed process; the last commits may be
        /// lost on power loss. For simulating many devices on one machine.
        case processCrash
    }

    /// How hard each commit pushes to disk.
    public var durability: Durability = .powerLoss
    /// How much memory the store's SQLite connections may hold.
    public enum StoreFootprint: String, Hashable, Sendable {
        /// A connection pool (one writer, readers opened as reads overlap) with SQLite's default
        /// page cache (2 MiB per connection): reads never wait for a write (default).
        case standard
        /// One connection (WAL, reads wait for a write in progress and run without a transaction,
        /// as nothing can write between their statements) with a page cache of at most 32 KiB:
        /// for simulating thousands of devices in one process (docs/performance.md, "Memory per
        /// device"). Same durability and crash safety as `standard`.
        case compact
    }

    /// How much memory the store's SQLite connections may hold.
    public var storeFootprint: StoreFootprint = .standard
    /// How long a synced item keeps its signed payload (nil: dropped at the acknowledgement, as the
    /// SDK does). While kept, a server that lost the item (restored from a backup) gets it again,
    /// with its original signature, at the next session (docs/sync.md, "When a store goes back in time").
    public var retainSynced: Duration?
    /// The wall clock (a `WallClock`'s `now`, FleetProtocol; injectable for tests): what the store stamps —
    /// template cached times, journal times, signing times, receipts.
    public var clock: @Sendable () -> Date
    /// What ``apiTimeout`` is measured on.
    public var timeoutClock: any FleetClock = ContinuousClock()

    private var _apiTimeout: TimeInterval

    /// Timeout of calls to the server (account and template services) in seconds, clamped to 30...1200 as the SDK does.
    public var apiTimeout: TimeInterval {
        get { _apiTimeout }
        set { _apiTimeout = Self.clampTimeout(newValue) }
    }

    /// Creates a configuration with the defaults: progress saved after each local signer, 60 s API timeout.
    public init(
        storePath: String,
        deviceId: String? = nil,
        saveProgressAfterEachLocalSigner: Bool = true,
        apiTimeout: TimeInterval = DeviceConfiguration.defaultAPITimeout,
        eventBufferLimit: Int = 10_000,
        clock: @escaping @Sendable () -> Date = WallClock.system.now
    ) {
        self.storePath = storePath
        self.deviceId = deviceId
        self.saveProgressAfterEachLocalSigner = saveProgressAfterEachLocalSigner
        self._apiTimeout = Self.clampTimeout(apiTimeout)
        self.eventBufferLimit = max(1, eventBufferLimit)
        self.clock = clock
    }

    /// The default values of the string keys (``Key``).
    public static func defaultConfigurations() -> [String: String] {
        [
            Key.saveEnvelopeProgress: "true",
            Key.apiTimeout: String(Int(defaultAPITimeout)),
        ]
    }

    /// Creates a configuration from SDK-style string keys; unknown keys are ignored.
    ///
    /// - Throws: ``DeviceNodeError`` ``DeviceNodeError/Code/invalidConfiguration`` when a value
    ///   cannot be read (a timeout that is not a number, a flag that is not true/false).
    public init(storePath: String, configurations: [String: String]) throws {
        self.init(storePath: storePath)
        if let raw = configurations[Key.saveEnvelopeProgress] {
            switch raw.lowercased() {
            case "true", "yes", "1": saveProgressAfterEachLocalSigner = true
            case "false", "no", "0": saveProgressAfterEachLocalSigner = false
            default:
                throw DeviceNodeError(.invalidConfiguration, "\(Key.saveEnvelopeProgress) is '\(raw)'; use true or false")
            }
        }
        if let raw = configurations[Key.apiTimeout] {
            guard let seconds = TimeInterval(raw.trimmingCharacters(in: .whitespaces)), seconds.isFinite else {
                throw DeviceNodeError(.invalidConfiguration, "\(Key.apiTimeout) is '\(raw)'; use a number of seconds (30-1200)")
            }
            apiTimeout = seconds
        }
        if let raw = configurations[Key.deviceId] {
            let id = raw.trimmingCharacters(in: .whitespaces)
            guard !id.isEmpty, id.count <= 100 else {
                throw DeviceNodeError(.invalidConfiguration, "\(Key.deviceId) must be 1-100 characters")
            }
            deviceId = id
        }
    }

    /// Clamps a timeout to ``apiTimeoutRange``; NaN becomes the default.
    static func clampTimeout(_ seconds: TimeInterval) -> TimeInterval {
        guard !seconds.isNaN else { return defaultAPITimeout }
        return min(max(seconds, apiTimeoutRange.lowerBound), apiTimeoutRange.upperBound)
    }
}
