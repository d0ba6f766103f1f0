import Synchronization

/// A wait that ran out of time.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var what: String
    public var limit: Duration?
    public init(what: String, limit: Duration? = nil) {
        self.what = what
        self.limit = limit
    }
    public var description: String {
        "deadline exceeded waiting for \(what)" + (limit.map { " (\($0))" } ?? "")
    }
}

/// What hang guards measure on: the machine's own time, on purpose. A guard is the one wait in a
/// test that is not on an injected clock — it must fire even when the test's `ManualClock` never
/// moves — and it is never what a test waits for, only what ends a test that hangs.
public let hangGuardClock = ContinuousClock()

/// `body`'s result, or ``DeadlineExceeded`` after `limit`: the one deadline the tests race their
/// events against. The deadline only guards against a hang (be generous: it is never the thing a
/// test waits for), and it returns at the deadline even when `body` ignores its cancellation, so a
/// hang fails the test instead of hanging the suite.
public func withDeadline<T: Sendable>(
    _ limit: Duration = .seconds(120), _ what: String = "the operation", _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let race = DeadlineRace<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            race.start(continuation, limit: limit, what: what, body)
        }
    } onCancel: {
        race.cancel()
    }
}

/// Whichever of the work and the timer ends first resumes the caller; the other is cancelled.
private final class DeadlineRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var work: Task<Void, Never>?
        var timer: Task<Void, Never>?
        var cancelled = false
    }
    private let state = Mutex(State())

    func start(
        _ continuation: CheckedContinuation<T, any Error>, limit: Duration, what: String, _ body: @escaping @Sendable () async throws -> T
    ) {
        let cancelled = state.withLock { state -> Bool in
            state.continuation = continuation
            return state.cancelled
        }
        if cancelled {
            finish(.failure(CancellationError()))
            return
        }
        let timer = Task {
            do { try await hangGuardClock.sleep(for: limit) } catch { return }
            self.finish(.failure(DeadlineExceeded(what: what, limit: limit)))
        }
        let work = Task {
            do { self.finish(.success(try await body())) } catch { self.finish(.failure(error)) }
        }
        state.withLock { state in
            state.timer = timer
            state.work = work
        }
    }

    /// The caller was cancelled: the body is cancelled and the caller resumed at once.
    func cancel() {
        state.withLock { $0.cancelled = true }
        finish(.failure(CancellationError()))
    }

    private func finish(_ result: Result<T, any Error>) {
        let (continuation, work, timer) = state.withLock { state in
            defer { state.continuation = nil }
            return (state.continuation, state.work, state.timer)
        }
        guard let continuation else { return }
        work?.cancel()
        timer?.cancel()
        continuation.resume(with: result)
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
