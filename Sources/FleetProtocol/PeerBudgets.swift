/// A message budget per connection (a token bucket each): the server's bound on what any one peer
/// can make it do. A device sends a few messages a second; a peer that floods (and, not reading,
/// would only fill its own reply queue) spends its budget, and its further messages are dropped
/// unread: no decoding, no reply, no work on anyone else's time (docs/protocol.md, section 4).
struct PeerBudgets {
    /// Messages a connection may send in a burst.
    let burst: Double
    /// Messages per second a connection's budget grows back by.
    let rate: Double
    private var buckets: [[UInt8]: Bucket] = [:]

    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    init(burst: Double, rate: Double) {
        self.burst = max(1, burst)
        self.rate = max(0, rate)
    }

    /// Takes one message from `peer`'s budget; false when it has none left.
    mutating func take(_ peer: [UInt8], at now: ContinuousClock.Instant) -> Bool {
        var bucket = buckets[peer] ?? Bucket(tokens: burst, updated: now)
        let elapsed = bucket.updated.duration(to: now)
        let seconds = elapsed.seconds
        bucket.tokens = min(burst, bucket.tokens + max(0, seconds) * rate)
        bucket.updated = now
        guard bucket.tokens >= 1 else {
            buckets[peer] = bucket
            return false
        }
        bucket.tokens -= 1
        buckets[peer] = bucket
        return true
    }

    /// Forgets every connection idle long enough for its budget to be full again: forgetting it
    /// changes nothing, and connections that come and go (each with a new routing id) cannot
    /// grow the table without bound.
    mutating func pruneIdle(at now: ContinuousClock.Instant) {
        let refill = rate > 0 ? Duration.seconds(burst / rate) : .seconds(3600)
        buckets = buckets.filter { $0.value.updated.duration(to: now) < refill }
    }

    /// Forgets a connection (it was lost): its next message starts with a full budget.
    mutating func forget(_ peer: [UInt8]) {
        buckets[peer] = nil
    }

    var count: Int { buckets.count }
}
