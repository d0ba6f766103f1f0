/// The render slots of ``PageImageCache``, shared fairly between accounts.
///
/// At most `capacity` renders run at once. When one ends and renders are waiting, the slot goes
/// to the waiting account with the fewest renders running (the first to have waited among
/// equals), and within an account to its oldest waiter: one account's heavy document cannot keep
/// another account's signer waiting behind all of its pages, only behind one render. With a
/// single account it is first come, first served. Not thread-safe: its owner (an actor) serializes it.
struct FairRenderSlots {
    let capacity: Int
    private(set) var running = 0
    private var runningByAccount: [String: Int] = [:]
    private var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// Accounts with waiters, in the order they will be considered among equals.
    private var turns: [String] = []

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Renders waiting for a slot, in all accounts.
    var waitingCount: Int { waiting.values.reduce(0) { $0 + $1.count } }

    /// Takes a slot now (true), or queues `account`'s waiter to be resumed by ``release(account:)``
    /// with the slot already taken for it (false).
    mutating func tryAcquire(account: String) -> Bool {
        guard running < capacity else { return false }
        running += 1
        runningByAccount[account, default: 0] += 1
        return true
    }

    mutating func enqueue(_ waiter: CheckedContinuation<Void, Never>, account: String) {
        waiting[account, default: []].append(waiter)
        if !turns.contains(account) { turns.append(account) }
    }

    /// Ends one of `account`'s renders; the continuation returned (resume it outside any lock)
    /// is the waiter the slot passed to.
    mutating func release(account: String) -> CheckedContinuation<Void, Never>? {
        runningByAccount[account, default: 1] -= 1
        if runningByAccount[account] == 0 { runningByAccount[account] = nil }
        let next = turns.enumerated().min { lhs, rhs in
            let (l, r) = (runningByAccount[lhs.element] ?? 0, runningByAccount[rhs.element] ?? 0)
            return l != r ? l < r : lhs.offset < rhs.offset
        }
        guard let (index, chosen) = next else {
            running -= 1
            return nil
        }
        let waiter = waiting[chosen]!.removeFirst()
        turns.remove(at: index)
        if waiting[chosen]!.isEmpty {
            waiting[chosen] = nil
        } else {
            turns.append(chosen)
        }
        runningByAccount[chosen, default: 0] += 1
        return waiter
    }
}
