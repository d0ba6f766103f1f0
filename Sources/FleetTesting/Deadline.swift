/// A wait that ran out of time.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var what: String
    public var description: String { "deadline exceeded waiting for \(what)" }
}

/// Returns the first element of `sequence` that satisfies `predicate`, or throws
/// ``DeadlineExceeded`` after `timeout`. The way tests wait on events: never a sleep.
public func firstElement<S: AsyncSequence & Sendable>(
    of sequence: S, within timeout: Duration = .seconds(20), _ what: String,
    where predicate: @escaping @Sendable (S.Element) -> Bool = { _ in true }
) async throws -> S.Element where S.Element: Sendable {
    try await withThrowingTaskGroup(of: S.Element?.self) { group in
        group.addTask {
            for try await element in sequence where predicate(element) { return element }
            return nil
        }
        group.addTask {
            // The deadline timer, raced against the event; not a synchronisation sleep.
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next(), let element = result else { throw DeadlineExceeded(what: what) }
        return element
    }
}
