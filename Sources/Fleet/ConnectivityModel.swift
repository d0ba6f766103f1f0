import Foundation
import SignatureCapture

/// Whether a device believes it is online, as a pure function of time since the run's start.
///
/// Two parts combine: a Gilbert–Elliott two-state Markov chain (online and offline, each stay
/// exponentially distributed with the plan's mean; the first state is offline with
/// probability `startOffline`), and scheduled outages (windows `[start, end)` relative to the
/// run's start) during which the device is offline whatever the chain says. An outage with a
/// `returnRamp` R ends for this device at `end + φ × R`, φ in [0, 1) drawn from its seed, one draw
/// per outage: the fleet comes back over the ramp, not in the same instant.
///
/// The chain is drawn from the device's seed, one stay after another from time 0, so the same
/// seed gives the same timeline — also after a restart, which simply asks for a later time.
/// Queries must not go backwards in time (``state(at:)`` keeps a cursor); a fresh model
/// replays from 0.
public struct ConnectivityModel: Sendable {
    public let connectivity: Connectivity
    public let outages: [Outage]
    private var random: SeededRandom
    /// The chain's current stay: state and its end, in seconds since the run's start.
    private var stayOnline: Bool
    private var stayStart: Double
    private var stayEnd: Double

    /// The answer to "where do we stand at time t".
    public struct State: Hashable, Sendable {
        public var online: Bool
        /// When it next changes (seconds since the run's start; `.infinity`: never).
        public var until: Double
    }

    public init(connectivity: Connectivity, outages: [Outage] = [], seed: UInt64) {
        self.connectivity = connectivity
        self.outages = Self.devicesOwn(outages, seed: seed)
        random = SeededRandom(mixing: seed, 0xC044_EC71)
        stayStart = 0
        switch connectivity.model {
        case .alwaysOnline:
            stayOnline = true
            stayEnd = .infinity
        case .gilbertElliott:
            stayOnline = !(random.nextDouble() < connectivity.startOffline)
            stayEnd = 0
            stayEnd = drawStay(online: stayOnline)
        }
    }

    /// The outages as this device lives them, in start order: each one's ramp resolved into the
    /// device's own end (its own random stream, so the chain's timeline does not change with it).
    static func devicesOwn(_ outages: [Outage], seed: UInt64) -> [Outage] {
        var phases = SeededRandom(mixing: seed, 0x2E7A_2D0F)
        return outages.filter { $0.end > $0.start }.sorted { ($0.start, $0.end) < ($1.start, $1.end) }.map { outage in
            let phase = phases.nextDouble()
            guard let ramp = outage.returnRamp, ramp > 0, ramp.isFinite else { return Outage(start: outage.start, end: outage.end) }
            return Outage(start: outage.start, end: outage.end + phase * ramp)
        }
    }

    /// The mean stay of a chain state.
    private func mean(online: Bool) -> Double {
        switch connectivity.model {
        case .alwaysOnline: return .infinity
        case .gilbertElliott(let onlineMean, let offlineMean): return online ? onlineMean : offlineMean
        }
    }

    private mutating func drawStay(online: Bool) -> Double {
        // A stay is at least a millisecond, so time always moves forward.
        stayStart + max(0.001, random.exponential(mean: mean(online: online)))
    }

    /// Advances the chain until its current stay covers `t`.
    private mutating func advanceChain(to t: Double) {
        while stayEnd <= t {
            stayStart = stayEnd
            stayOnline.toggle()
            stayEnd = drawStay(online: stayOnline)
        }
    }

    /// The chain's own state at `t` (ignoring outages), and when its stay ends.
    public mutating func chainState(at t: Double) -> State {
        advanceChain(to: t)
        return State(online: stayOnline, until: stayEnd)
    }

    /// Whether `t` falls in a scheduled outage.
    public func inOutage(_ t: Double) -> Bool {
        outages.contains { $0.start <= t && t < $0.end }
    }

    /// The device's state at `t` (seconds since the run's start) and when it next changes.
    public mutating func state(at t: Double) -> State {
        let online = effective(at: t)
        // Walk the boundaries after t (chain stay ends and outage edges) until the state flips.
        var probe = t
        var chain = self
        for _ in 0..<100_000 {
            let chainEnd = chain.chainState(at: probe).until
            let edge = outages.flatMap { [$0.start, $0.end] }.filter { $0 > probe }.min() ?? .infinity
            let next = min(chainEnd, edge)
            guard next.isFinite else { return State(online: online, until: .infinity) }
            if chain.effective(at: next) != online { return State(online: online, until: next) }
            probe = next
        }
        return State(online: online, until: probe)
    }

    private mutating func effective(at t: Double) -> Bool {
        chainState(at: t).online && !inOutage(t)
    }
}
