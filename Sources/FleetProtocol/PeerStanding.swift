/// Which CURVE keys have shown they belong to someone the server serves (docs/coordinator.md,
/// "Many peers at once"): a key is *proven* once one of its requests other than `hello` and
/// `heartbeat` was answered with success (a login with real credentials, an enrollment, a push
/// of an enrolled device). Every other key is a *stranger*: what it may ask before it is proven
/// (`auth.*`, `device.enroll`) shares a bounded part of the server's request capacity, so a crowd
/// of new keys cannot take the capacity the fleet's devices need.
///
/// Bounded: past `capacity` keys the longest-proven is forgotten (it is a stranger again until
/// its next successful request, which it makes at its next login). Under plain TCP there are no
/// keys, and every peer counts as proven.
struct ProvenKeys: Sendable {
    let capacity: Int
    private var keys: Set<[UInt8]> = []
    /// Insertion order, for forgetting the oldest; `head` is the next to forget.
    private var order: [[UInt8]] = []
    private var head = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { keys.count }

    func contains(_ key: [UInt8]) -> Bool { keys.contains(key) }

    /// Marks `key` proven (a key already proven keeps its place).
    mutating func insert(_ key: [UInt8]) {
        guard keys.insert(key).inserted else { return }
        order.append(key)
        if keys.count > capacity {
            keys.remove(order[head])
            head += 1
        }
        // Compacts the order once half of it is forgotten keys.
        if head > 0, head * 2 >= order.count {
            order.removeFirst(head)
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
