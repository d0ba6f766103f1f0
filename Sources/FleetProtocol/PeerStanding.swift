/// Which CURVE keys have shown they belong to someone the server serves (docs/coordinator.md,
/// "Many peers at once"): a key is *proven* once one of its requests other than `hello` and
/// `heartbeat` was answered with success (a login with real credentials, an enrollment, a push
/// of an enrolled device). Every other key is a *stranger*: its requests, whatever their type,
/// share a bounded part of the server's request capacity, one at a time per stranger, so a crowd
/// of new keys cannot take the capacity the fleet's devices need.
///
/// Bounded: past `capacity` keys the one whose latest success is oldest is forgotten (it is a
/// stranger again until its next successful request). Under plain TCP there are no keys, and
/// every peer counts as proven.
struct ProvenKeys: Sendable {
    let capacity: Int
    /// Each key with the stamp of its latest success.
    private var stamps: [[UInt8]: UInt64] = [:]
    /// Successes in order, oldest first from `head`; an entry whose stamp is no longer its key's is
    /// stale (the key succeeded again since) and is skipped when forgetting.
    private var order: [(key: [UInt8], stamp: UInt64)] = []
    private var head = 0
    private var clock: UInt64 = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { stamps.count }

    func contains(_ key: [UInt8]) -> Bool { stamps[key] != nil }

    /// Marks `key` proven now: past `capacity`, the key whose latest success is oldest is forgotten
    /// (least recently proven first, so devices that keep succeeding stay).
    mutating func insert(_ key: [UInt8]) {
        clock &+= 1
        stamps[key] = clock
        order.append((key, clock))
        while stamps.count > capacity, head < order.count {
            let oldest = order[head]
            head += 1
            if stamps[oldest.key] == oldest.stamp { stamps[oldest.key] = nil }
        }
        // Compacts the order once half of it is skipped or stale entries.
        if head > 0, head * 2 >= order.count {
            order.removeFirst(head)
            head = 0
        }
        if order.count > 4 * capacity + 64 {
            order = order.filter { stamps[$0.key] == $0.stamp }
            head = 0
        }
    }
}

/// When the server gives freed memory back to the system (docs/coordinator.md, "Many peers at
/// once"). Each connection costs libzmq buffers and the server's tables some memory; when peers
/// leave, that memory is freed but the C allocator keeps it, so a crowd that came and went would
/// leave the process as large as at its peak. Once at least `minPeersGone` connections closed
/// since the last return (the socket's monitor says so), none closed for `quiet` (a crowd that
/// leaves has left), and at least `minInterval` passed since the last return, the server asks the
/// allocator to return what it can (glibc's `malloc_trim`). Checked at every liveness sweep.
public struct MemoryReturnPolicy: Sendable, Hashable {
    /// Connections closed since the last return before the next one.
    public var minPeersGone: Int
    /// How long no connection may have closed before memory is returned.
    public var quiet: Duration
    /// The shortest time between two returns (each walks the allocator's free lists).
    public var minInterval: Duration

    public init(minPeersGone: Int = 256, quiet: Duration = .seconds(2), minInterval: Duration = .seconds(10)) {
        self.minPeersGone = max(1, minPeersGone)
        self.quiet = max(.zero, quiet)
        self.minInterval = max(.zero, minInterval)
    }
}

/// The bookkeeping of a ``MemoryReturnPolicy``: connections closed since the last return, the
/// last close, and the last return.
struct MemoryReturnGate: Sendable {
    let policy: MemoryReturnPolicy
    private(set) var peersGone = 0
    private var lastClose: ContinuousClock.Instant?
    private var lastReturn: ContinuousClock.Instant?

    init(policy: MemoryReturnPolicy) {
        self.policy = policy
    }

    /// Notes a connection that closed at `now`.
    mutating func connectionClosed(at now: ContinuousClock.Instant) {
        peersGone += 1
        lastClose = now
    }

    /// True when memory should be returned now (and the count starts again).
    mutating func isDue(at now: ContinuousClock.Instant) -> Bool {
        guard peersGone >= policy.minPeersGone, let lastClose, lastClose.duration(to: now) >= policy.quiet else { return false }
        if let lastReturn, lastReturn.duration(to: now) < policy.minInterval { return false }
        peersGone = 0
        lastReturn = now
        return true
    }
}
