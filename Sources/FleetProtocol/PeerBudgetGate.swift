import Logging
import Synchronization

/// The server's per-connection message budgets (``PeerBudgets``), applied on the ZeroMQ I/O thread
/// (``SocketOptions/inboundFilter``): a message over its connection's budget is dropped before it
/// is queued for the server, so a flood costs a read and a lookup, not a decode, a reply or any of
/// the server actor's time.
final class PeerBudgetGate: Sendable {
    private struct State {
        var budgets: PeerBudgets
        var log = RefusalLog()
    }

    private let state: Mutex<State>
    private let security: WireSecurity
    private let metrics: FleetServerMetrics
    private let logger: Logger

    init(burst: Double, rate: Double, security: WireSecurity, metrics: FleetServerMetrics, logger: Logger) {
        state = Mutex(State(budgets: PeerBudgets(burst: burst, rate: rate)))
        self.security = security
        self.metrics = metrics
        self.logger = logger
    }

    /// Whether to let `message` (as the ROUTER received it) through; runs on the I/O thread.
    func admit(_ message: [[UInt8]]) -> Bool {
        guard let peer = FleetServer.routingID(of: message, security: security) else { return true }
        let now = ContinuousClock.now
        let admitted = state.withLock { state in
            if state.budgets.take(peer, at: now) { return true }
            state.log.note("messages dropped: a connection sends more than its budget", logger: logger)
            return false
        }
        if !admitted { metrics.countDroppedRequest(reason: "peer_over_budget") }
        return admitted
    }

    /// Forgets the budgets of connections idle long enough to be full again (called periodically).
    func pruneIdle() {
        let now = ContinuousClock.now
        state.withLock { $0.budgets.pruneIdle(at: now) }
    }

    /// Forgets a lost connection's budget.
    func forget(_ peer: [UInt8]) {
        state.withLock { $0.budgets.forget(peer) }
    }
}
