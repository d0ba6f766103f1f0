/// A wait that ran out of time.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var what: String
    public var description: String { "deadline exceeded waiting for \(what)" }
}

/// `body`'s result, or ``DeadlineExceeded`` after `timeout`: the one deadline the tests race
/// their events against (the timer is the deadline, never a synchronisation sleep).
public func withDeadline<T: Sendable>(
    _ timeout: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next(), let value = result else { throw DeadlineExceeded(what: what) }
        return value
    }
}

/// Returns the first element of `sequence` that satisfies `predicate`, or throws
/// ``DeadlineExceeded`` after `timeout` (or when the sequence ends first). The way tests wait on
/// events: never a sleep.
public func firstElement<S: AsyncSequence & Sendable>(
    of sequence: S, within timeout: Duration = .seconds(120), _ what: String,
    where predicate: @escaping @Sendable (S.Element) -> Bool = { _ in true }
) async throws -> S.Element where S.Element: Sendable {
    try await withDeadline(timeout, what) {
        for try await element in sequence where predicate(element) { return element }
        throw DeadlineExceeded(what: "\(what) (the sequence ended first)")
    }
}
