import Logging
import Synchronization
import ZeroMQ

/// The server's per-connection message budgets (``PeerBudgets``), applied on the ZeroMQ I/O thread
/// (``SocketOptions/inboundFilter``): a message over its connection's budget is dropped before it
/// is queued for the server, so a flood costs a read and a lookup, not a decode, a reply or any of
/// the server actor's time.
final class PeerBudgetGate: Sendable {
    private struct State {
        var budgets: PeerBudgets
        var log = RefusalLog()
        /// Messages dropped since the last prune, per connection over its budget.
        var drops: [[UInt8]: Int] = [:]
        var cuts = 0
        /// Senders cut recently, until when.
        var coolingUntil: [[UInt8]: ContinuousClock.Instant] = [:]
        /// Connections (routing ids) already cut. The messages of one still queued in the ROUTER
        /// carry its old descriptor number, which libzmq may have closed and the process reused
        /// for another socket (an HTTP connection, a listener): a connection is cut once, never
        /// again through a later message of its own.
        var cut: Set<[UInt8]> = []
    }

    private let state: Mutex<State>
    private let security: WireSecurity
    private let metrics: FleetServerMetrics
    private let logger: Logger
    private let clock: any FleetClock

    init(
        burst: Double, rate: Double, security: WireSecurity, metrics: FleetServerMetrics, logger: Logger,
        clock: any FleetClock = ContinuousClock()
    ) {
        self.clock = clock
        state = Mutex(State(budgets: PeerBudgets(burst: burst, rate: rate), log: RefusalLog(now: clock.now)))
        self.security = security
        self.metrics = metrics
        self.logger = logger
    }

    /// Messages dropped between two prunes (one heartbeat interval) after which a connection is
    /// cut: reading and dropping a flood still costs the shared I/O thread and the CPU
    /// (loadtests/NOTES.md, "The slow reader in a process of its own"), so a connection this far
    /// over its budget is not read any more. (Its refill of 200/s lets one message through now and
    /// then, so the count is per interval, not in a row.)
    static let dropsBeforeCut = 1_000
    /// After a cut, the same sender (key or routing id) gets no budget for this long, and its new
    /// connections are cut after ``dropsBeforeCutWhileCooling`` drops: reconnecting is no way back
    /// to a full burst, and each reconnection of a flooder costs a handshake and a few reads only.
    static let cooldown: Duration = .seconds(10)
    static let dropsBeforeCutWhileCooling = 20

    /// Whether to let `message` (as the ROUTER received it) through; runs on the I/O thread.
    /// `descriptor` is its connection's (``Socket/lastSourceDescriptor``): a connection that keeps
    /// sending far over its budget is cut (``Socket/cutConnection(descriptor:)``).
    func admit(_ message: [[UInt8]], descriptor: Int32 = -1) -> Bool {
        guard let peer = FleetServer.routingID(of: message, security: security) else { return true }
        let now = clock.now
        // Who sends it: the CURVE key (the User-Id frame) or the plain routing id; it outlives a
        // connection, so a cut peer that reconnects is still known.
        let identity = message.first ?? peer
        let (admitted, cut) = state.withLock { state -> (Bool, Bool) in
            let cooling = state.coolingUntil[identity].map { now < $0 } ?? false
            if !cooling, state.budgets.take(peer, at: now) { return (true, false) }
            let drops = (state.drops[peer] ?? 0) + 1
            state.drops[peer] = drops
            if drops >= (cooling ? Self.dropsBeforeCutWhileCooling : Self.dropsBeforeCut), !state.cut.contains(peer) {
                state.drops[peer] = nil
                // Bounded: the queued messages of connections cut thousands of cuts ago are long read.
                if state.cut.count >= 10_000 { state.cut.removeAll() }
                state.cut.insert(peer)
                state.coolingUntil[identity] = now + Self.cooldown
                state.cuts += 1
                state.log.note("connection cut: it kept sending far over its budget", logger: logger, now: now)
                return (false, true)
            }
            state.log.note("messages dropped: a connection sends more than its budget", logger: logger, now: now)
            return (false, false)
        }
        if !admitted { metrics.countDroppedRequest(reason: "peer_over_budget") }
        if cut {
            metrics.countDroppedRequest(reason: "peer_cut")
            Socket.cutConnection(descriptor: descriptor)
        }
        return admitted
    }

    /// Connections cut so far (``dropsBeforeCut``).
    var connectionsCut: Int { state.withLock { $0.cuts } }

    /// Forgets the budgets of connections idle long enough to be full again (called periodically).
    func pruneIdle() {
        let now = clock.now
        state.withLock {
            $0.budgets.pruneIdle(at: now)
            $0.drops = [:]  // counts restart: only a flood that goes on is cut
            $0.coolingUntil = $0.coolingUntil.filter { now < $0.value }
        }
    }

    /// Forgets a lost connection's budget.
    func forget(_ peer: [UInt8]) {
        state.withLock {
            $0.budgets.forget(peer)
            $0.drops[peer] = nil
            $0.cut.remove(peer)
        }
    }
}
