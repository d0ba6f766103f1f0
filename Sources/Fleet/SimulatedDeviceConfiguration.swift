import FleetProtocol
import Foundation
import SignatureCapture
import ZeroMQ

/// What one simulated device does: its identity and store, its behaviour and connectivity
/// models, and the run's time frame.
public struct SimulatedDeviceConfiguration: Sendable {
    public var deviceID: String
    /// The coordinator's (or the fault proxy's) endpoint.
    public var endpoint: String
    /// Other coordinators' endpoints, tried in turn when the current one fails (`FleetClientConfiguration.failoverEndpoints`).
    public var failoverEndpoints: [String] = []
    /// Where the device keeps its SQLite store (`<deviceID>.sqlite`).
    public var storeDirectory: String
    /// The user the device logs in as.
    public var email: String
    public var secret: String
    /// Every random choice of the device comes from this seed.
    public var seed: UInt64
    public var behaviour: Behaviour
    public var connectivity: Connectivity
    /// Pen kinds with relative weights.
    public var pens: [String: Double]
    /// Scheduled outages, relative to `runStart`.
    public var outages: [Outage]
    /// The run's start, seconds since the Unix epoch (connectivity and outages count from it).
    public var runStart: Double
    /// Seconds from `runStart` during which envelopes arrive (nil: until `maxEnvelopes`).
    public var duration: Double?
    public var requestTimeout: Duration
    /// The `--envelopes` mode: once `maxEnvelopes` are composed the device drains by itself
    /// and ``SimulatedDevice/run()`` returns.
    public var finishWhenDone: Bool
    /// Seconds the device waits before it first goes online, spreading a large node's logins.
    public var startDelay: Double = 0
    /// The window in which the device starts its drain (``NodePlan/drainRamp``); 0: at once.
    public var drainRamp: Double = 0
    /// The scenario's start ramp (``NodePlan/startRamp``); 0: none. With one, ``startDelay`` counts
    /// from ``runStart``, so a node restarted mid-run does not ramp its devices again.
    public var startRamp: Double = 0
    /// Measure each gap between envelopes from when the device is idle again (signed and
    /// synced), not from the previous arrival: the `--envelopes` mode's pacing, which stretches
    /// with a slow machine as the process tests expect.
    public var gapsFromIdle = false
    /// The coordinator's CURVE public key (32 bytes) the device pins; nil: plain TCP.
    public var serverKey: [UInt8]?
    /// Round-trip times shared by the devices of one process (`RoundTripMemory`, RFC 9040): a
    /// device that comes online starts from the delays the others see, not from ``requestTimeout``.
    /// A node process gives all its devices one; nil: each link learns alone.
    public var roundTrips: RoundTripMemory?

    public init(
        deviceID: String, endpoint: String, storeDirectory: String, email: String, secret: String, seed: UInt64,
        behaviour: Behaviour, connectivity: Connectivity = Connectivity(), pens: [String: Double] = ["applePencil": 1],
        outages: [Outage] = [], runStart: Double = WallClock.system.secondsSince1970, duration: Double? = nil,
        requestTimeout: Duration = .seconds(1), finishWhenDone: Bool = false
    ) {
        self.deviceID = deviceID
        self.endpoint = endpoint
        self.storeDirectory = storeDirectory
        self.email = email
        self.secret = secret
        self.seed = seed
        self.behaviour = behaviour
        self.connectivity = connectivity
        self.pens = pens
        self.outages = outages
        self.runStart = runStart
        self.duration = duration
        self.requestTimeout = requestTimeout
        self.finishWhenDone = finishWhenDone
    }

    /// The `signfleet node --envelopes N` device: always online, `envelopes` envelopes with one
    /// in-person signer each at exponentially distributed intervals, synced after each signing;
    /// then it drains and stops.
    public init(
        deviceID: String, endpoint: String, storeDirectory: String, email: String, secret: String, seed: UInt64,
        envelopes: Int, meanInterval: Duration = .milliseconds(500), requestTimeout: Duration = .seconds(1), serverKey: [UInt8]? = nil
    ) {
        let seconds = meanInterval.seconds
        let behaviour = Behaviour(
            envelopesPerMinute: seconds > 0 ? 60 / seconds : 60_000_000, inPersonSigners: IntRange(1, 1),
            signingDuration: ClosedSpan(0, 0), sync: .whenOnline, maxEnvelopes: envelopes)
        self.init(
            deviceID: deviceID, endpoint: endpoint, storeDirectory: storeDirectory, email: email, secret: secret, seed: seed,
            behaviour: behaviour, requestTimeout: requestTimeout, finishWhenDone: true)
        gapsFromIdle = true
        self.serverKey = serverKey
    }

    /// Device `device` of a node plan.
    public init(plan: NodePlan, device: DevicePlan) {
        self.init(
            deviceID: device.id, endpoint: plan.endpoint, storeDirectory: plan.dataDirectory, email: plan.email,
            secret: plan.secret, seed: device.seed, behaviour: plan.behaviour, connectivity: plan.connectivity,
            pens: plan.pens, outages: plan.outages, runStart: plan.runStart, duration: plan.duration,
            requestTimeout: .milliseconds(Int64((plan.requestTimeout * 1000).rounded())), finishWhenDone: false)
        serverKey = plan.serverKey.flatMap(Z85.decode)
        if let failover = plan.failoverEndpoints, !failover.isEmpty {
            // Device `<group>-<n>` starts at endpoint (n - 1) mod count, so every coordinator serves
            // devices from the start; a device keeps its order across restarts.
            let all = [plan.endpoint] + failover
            let number = device.id.split(separator: "-").last.flatMap { Int($0) } ?? ((plan.devices.firstIndex(of: device) ?? 0) + 1)
            let first = max(0, number - 1) % all.count
            let rotated = Array(all[first...] + all[..<first])
            endpoint = rotated[0]
            failoverEndpoints = Array(rotated.dropFirst())
        }
        // Within the scenario's start ramp, else 2 ms per device of the node (1,000 devices start
        // within 2 s), drawn from the device's seed.
        var random = SeededRandom(mixing: device.seed, 0x57A7)
        startDelay = random.nextDouble() * (plan.startRamp ?? Double(plan.devices.count) * 0.002)
        drainRamp = plan.drainRamp ?? 0
        startRamp = plan.startRamp ?? 0
    }

    /// How long fleet devices keep synced payloads (`retainSynced`): longer
    /// than any run, so a coordinator restored from a copy taken earlier in the run heals.
    public static let retainSynced: Duration = .seconds(24 * 3600)

    public var storePath: String {
        URL(fileURLWithPath: storeDirectory).appendingPathComponent("\(deviceID).sqlite").path
    }
}
