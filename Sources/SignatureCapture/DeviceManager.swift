/// Which pens are connected at one moment, and when each will drop if nothing changes.
///
/// The capturer uses this to pick a strategy and to model a pen dropping mid-session.
public struct PenAvailability: Hashable, Sendable {
    /// Pens connected now.
    public var connected: Set<PenKind>
    /// For connected pens that will drop, seconds from now until they drop.
    public var dropsAfter: [PenKind: Double]

    /// Creates an availability snapshot.
    public init(connected: Set<PenKind> = [], dropsAfter: [PenKind: Double] = [:]) {
        self.connected = connected
        self.dropsAfter = dropsAfter
    }

    /// No pen connected: only the hand strategy is usable.
    public static let none = PenAvailability()
}

/// A seeded model of pens dropping mid-session (Bluetooth link loss, Apple Pencil battery).
public struct PenDropModel: Hashable, Sendable {
    /// Mean connected time before a drop, in seconds; `nil` means pens never drop.
    public var meanTimeToDrop: Double?
    /// Mean time for a dropped pen to reconnect, in seconds; `nil` means it stays away.
    public var meanTimeToReconnect: Double?

    /// Creates a drop model.
    public init(meanTimeToDrop: Double?, meanTimeToReconnect: Double? = 30) {
        self.meanTimeToDrop = meanTimeToDrop
        self.meanTimeToReconnect = meanTimeToReconnect
    }

    /// Pens never drop.
    public static let never = PenDropModel(meanTimeToDrop: nil, meanTimeToReconnect: nil)
}

/// A device-manager notification (the SDK's `deviceConnected:` / `deviceDisconnected:`).
#if hasAttribute(nonexhaustive)
@nonexhaustive
#endif
public enum PenDeviceEvent: Hashable, Sendable {
    /// Discovery started at this virtual time (seconds).
    case discoveryStarted(at: Double)
    /// A pen connected.
    case connected(PenKind, at: Double)
    /// A Wacom pen disconnected. Apple Pencil drops are silent, as in the SDK: poll ``PenDeviceManager/isAnyPenConnected``.
    case disconnected(PenKind, at: Double)
}

/// A simulated device manager: discovery that takes time, connect and disconnect events,
/// "is any pen connected", and seeded drops.
///
/// Time is virtual: the manager only moves when told to (``advance(to:)``) or when
/// ``discover(using:)`` sleeps on the clock you inject. No wall-clock time is read.
///
/// ```swift
/// let manager = PenDeviceManager(nearbyPens: [.applePencil, .wacomBluetooth], seed: 7)
/// let connected = try await manager.discover(using: ContinuousClock())
/// let availability = await manager.availability()
/// ```
public actor PenDeviceManager {
    private struct Scheduled: Comparable {
        var time: Double
        var order: Int
        var pen: PenKind
        var connect: Bool
        static func < (a: Scheduled, b: Scheduled) -> Bool { (a.time, a.order) < (b.time, b.order) }
    }

    /// Pens physically present and paired (what discovery can find).
    public let nearbyPens: [PenKind]
    /// The drop model.
    public let dropModel: PenDropModel
    /// The current virtual time in seconds.
    public private(set) var now: Double = 0
    /// Notifications as they happen.
    public nonisolated let events: AsyncStream<PenDeviceEvent>

    private let continuation: AsyncStream<PenDeviceEvent>.Continuation
    private var random: SeededRandom
    private var connected: Set<PenKind> = []
    private var schedule: [Scheduled] = []
    private var order = 0
    private var discovering = false

    /// Creates a device manager.
    /// - Parameters:
    ///   - nearbyPens: pens that discovery will find. The finger is never "connected"; hand is always usable.
    ///   - dropModel: how pens drop mid-session.
    ///   - seed: seeds discovery delays and drop times.
    public init(nearbyPens: [PenKind], dropModel: PenDropModel = .never, seed: UInt64) {
        self.nearbyPens = nearbyPens.filter { $0 != .finger }
        self.dropModel = dropModel
        self.random = SeededRandom(mixing: seed, 0xD15C)
        (events, continuation) = AsyncStream.makeStream(of: PenDeviceEvent.self)
    }

    /// How long discovery takes for a pen: Apple Pencil is confirmed quickly, a wired pad
    /// enumerates in half a second, Bluetooth LE takes one to three seconds.
    private func discoveryDelay(for pen: PenKind) -> Double {
        switch pen {
        case .applePencil: return 0.25
        case .signaturePad: return 0.5
        default: return random.uniform(1.0...3.0)
        }
    }

    /// Starts discovery at the current virtual time (`startDeviceDiscovery`).
    ///
    /// - Returns: the virtual time at which the last nearby pen will have connected.
    @discardableResult
    public func startDiscovery() -> Double {
        var latest = now
        if !discovering {
            discovering = true
            continuation.yield(.discoveryStarted(at: now))
            for pen in nearbyPens where !connected.contains(pen) {
                let at = now + discoveryDelay(for: pen)
                enqueue(Scheduled(time: at, order: 0, pen: pen, connect: true))
                latest = max(latest, at)
            }
        }
        return latest
    }

    /// Moves virtual time forward, applying connections and drops that fall due, and returns the
    /// events that happened (they are also yielded on ``events``).
    @discardableResult
    public func advance(to time: Double) -> [PenDeviceEvent] {
        var happened: [PenDeviceEvent] = []
        while let first = schedule.first, first.time <= time {
            schedule.removeFirst()
            now = first.time
            if first.connect {
                guard !connected.contains(first.pen) else { continue }
                connected.insert(first.pen)
                happened.append(.connected(first.pen, at: now))
                if let mean = dropModel.meanTimeToDrop {
                    enqueue(Scheduled(time: now + random.exponential(mean: mean), order: 0, pen: first.pen, connect: false))
                }
            } else {
                guard connected.remove(first.pen) != nil else { continue }
                if first.pen != .applePencil { happened.append(.disconnected(first.pen, at: now)) }
                if discovering, let mean = dropModel.meanTimeToReconnect {
                    enqueue(Scheduled(time: now + random.exponential(mean: mean), order: 0, pen: first.pen, connect: true))
                }
            }
        }
        now = max(now, time)
        for event in happened { continuation.yield(event) }
        return happened
    }

    /// Moves virtual time forward by `seconds`.
    @discardableResult
    public func advance(by seconds: Double) -> [PenDeviceEvent] {
        advance(to: now + seconds)
    }

    /// Starts discovery and waits on `clock` until every nearby pen had the time to connect.
    ///
    /// - Parameter clock: the clock to sleep on; inject a test clock to keep tests instant.
    /// - Returns: the pens connected when discovery settles.
    /// - Throws: `CancellationError` if the task is cancelled while waiting.
    public func discover<C: Clock>(using clock: C) async throws -> Set<PenKind> where C.Duration == Duration {
        let settle = startDiscovery()
        let wait = settle - now
        if wait > 0 {
            try await clock.sleep(for: .nanoseconds(Int64((wait * 1e9).rounded(.up))))
        }
        advance(to: settle)
        return connected
    }

    /// Whether any supported pen is connected (`deviceIsConnected`).
    public var isAnyPenConnected: Bool { !connected.isEmpty }

    /// Pens connected now.
    public var connectedPens: Set<PenKind> { connected }

    /// A snapshot for a capture starting now: connected pens and when each will drop.
    public func availability() -> PenAvailability {
        var drops: [PenKind: Double] = [:]
        for item in schedule where !item.connect && connected.contains(item.pen) && drops[item.pen] == nil {
            drops[item.pen] = item.time - now
        }
        return PenAvailability(connected: connected, dropsAfter: drops)
    }

    /// Forces a pen to disconnect now (for scripted scenarios).
    public func disconnect(_ pen: PenKind) {
        schedule.removeAll { $0.pen == pen && !$0.connect }
        enqueue(Scheduled(time: now, order: -1, pen: pen, connect: false))
        advance(to: now)
    }

    private func enqueue(_ item: Scheduled) {
        var item = item
        order += 1
        item.order = order
        let index = schedule.firstIndex { item < $0 } ?? schedule.endIndex
        schedule.insert(item, at: index)
    }

    deinit { continuation.finish() }
}
