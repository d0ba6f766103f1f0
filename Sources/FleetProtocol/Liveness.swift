/// Paranoid-Pirate liveness of one peer, as a pure state machine: the peer is
/// alive while it has been heard from within `interval * liveness`.
public struct PeerLiveness: Sendable, Hashable {
    public enum State: String, Sendable, Hashable {
        /// Not yet heard from.
        case unknown
        case alive
        /// Silent for longer than the timeout.
        case lost
    }

    public var interval: Duration
    public var liveness: Int
    public private(set) var state: State = .unknown
    public private(set) var lastHeard: ContinuousClock.Instant?
    /// Probes (heartbeats or requests, counted at most one per ``interval``) sent since the peer
    /// was last heard: the evidence, beyond silence, that it does not answer.
    public private(set) var unansweredProbes = 0
    private var lastProbe: ContinuousClock.Instant?

    public init(interval: Duration, liveness: Int) {
        self.interval = interval
        self.liveness = max(1, liveness)
    }

    /// How long the peer may stay silent before it is lost.
    public var timeout: Duration { interval * liveness }

    /// Records a message from the peer; returns the new state when it changed.
    public mutating func heard(at now: ContinuousClock.Instant) -> State? {
        lastHeard = now
        unansweredProbes = 0
        lastProbe = nil
        return transition(to: .alive)
    }

    /// Does not count `absence` against the peer: its silence so far is shortened by it (the
    /// listener itself was not running then, so it cannot tell the peer's silence from its own).
    /// Never past `now`: a peer heard since the listener woke keeps that time.
    public mutating func excuse(_ absence: Duration, now: ContinuousClock.Instant) {
        guard absence > .zero, let heard = lastHeard else { return }
        lastHeard = min(heard.advanced(by: absence), max(heard, now))
    }

    /// Records something sent to the peer that it would answer (a heartbeat, a request). Sends
    /// closer together than ``interval`` count once: a burst of requests is one probe.
    public mutating func probed(at now: ContinuousClock.Instant) {
        if let lastProbe, lastProbe.duration(to: now) < interval { return }
        lastProbe = now
        unansweredProbes += 1
    }

    /// Whether the peer has been silent for longer than ``timeout`` (and than `minimum` when that
    /// is longer) while at least `probes` probes went unanswered (``probed(at:)``).
    public func isSilent(at now: ContinuousClock.Instant, atLeast minimum: Duration = .zero, probes: Int = 0) -> Bool {
        guard let lastHeard else { return false }
        return lastHeard.duration(to: now) > max(timeout, minimum) && unansweredProbes >= probes
    }

    /// Checks for silence (``isSilent(at:atLeast:probes:)``); returns `.lost` when the peer has
    /// just been lost. A listener that also sends (a client's heartbeats) asks for `probes`: a
    /// process starved of CPU wakes to find its peer's replies unread, and long silence alone
    /// would blame the peer for its own absence; unanswered probes, each an interval apart, are
    /// evidence the peer got the chance to answer.
    public mutating func check(at now: ContinuousClock.Instant, atLeast minimum: Duration = .zero, probes: Int = 0) -> State? {
        guard state == .alive, isSilent(at: now, atLeast: minimum, probes: probes) else { return nil }
        return transition(to: .lost)
    }

    private mutating func transition(to next: State) -> State? {
        guard next != state else { return nil }
        state = next
        return next
    }
}

/// Liveness of many peers (the server's view of its devices).
public struct LivenessTable<Peer: Hashable & Sendable>: Sendable {
    public var interval: Duration
    public var liveness: Int
    private var peers: [Peer: PeerLiveness] = [:]

    public init(interval: Duration, liveness: Int) {
        self.interval = interval
        self.liveness = liveness
    }

    public var alivePeers: [Peer] { peers.filter { $0.value.state == .alive }.map(\.key) }

    /// How many peers are alive, in constant time: a peer enters the table alive (``heard(_:at:)``)
    /// and leaves it when lost (``sweep(at:)``).
    public var aliveCount: Int { peers.count }

    public func state(of peer: Peer) -> PeerLiveness.State { peers[peer]?.state ?? .unknown }

    /// Records a message from `peer`; returns `.alive` when it just became alive.
    public mutating func heard(_ peer: Peer, at now: ContinuousClock.Instant) -> PeerLiveness.State? {
        var entry = peers[peer] ?? PeerLiveness(interval: interval, liveness: liveness)
        // The table's interval may have grown since (the server announces longer intervals to a
        // larger fleet): every peer is judged by the longest one announced.
        entry.interval = interval
        entry.liveness = liveness
        let changed = entry.heard(at: now)
        peers[peer] = entry
        return changed
    }

    /// `PeerLiveness.excuse(_:)` for every peer: the server was stopped or starved of CPU for
    /// `absence`, and the messages its devices sent then are still unread in its socket.
    public mutating func excuse(_ absence: Duration, now: ContinuousClock.Instant) {
        guard absence > .zero else { return }
        for peer in Array(peers.keys) { peers[peer]?.excuse(absence, now: now) }
    }

    /// Returns the peers lost since the last sweep. Lost peers are forgotten,
    /// so a table serving a churning fleet does not grow without bound.
    public mutating func sweep(at now: ContinuousClock.Instant) -> [Peer] {
        var lost: [Peer] = []
        for peer in Array(peers.keys) where peers[peer]?.check(at: now) == .lost {
            lost.append(peer)
            peers[peer] = nil
        }
        return lost
    }
}
