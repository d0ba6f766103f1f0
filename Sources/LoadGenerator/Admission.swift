import Synchronization

/// Which arrivals are outstanding, per device, with the per-device bound that decides drops.
final class Admission: Sendable {
    private struct State {
        var counts: [Int]
        var pending: [Int: Arrival] = [:]
    }

    let limit: Int
    private let state: Mutex<State>

    init(devices: Int, limit: Int) {
        self.limit = limit
        state = Mutex(State(counts: Array(repeating: 0, count: devices)))
    }

    /// Takes the arrival unless its device already has `limit` outstanding.
    func admit(_ arrival: Arrival) -> Bool {
        state.withLock {
            guard $0.counts[arrival.device] < limit else { return false }
            $0.counts[arrival.device] += 1
            $0.pending[arrival.index] = arrival
            return true
        }
    }

    func finished(_ arrival: Arrival) {
        state.withLock {
            $0.counts[arrival.device] -= 1
            $0.pending[arrival.index] = nil
        }
    }

    var outstanding: Int { state.withLock { $0.pending.count } }

    /// The arrivals still outstanding (admitted, never finished), in order.
    var unfinished: [Arrival] { state.withLock { $0.pending.values.sorted { $0.index < $1.index } } }
}
