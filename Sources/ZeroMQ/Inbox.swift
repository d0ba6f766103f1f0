#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Received messages of one ``AsyncSocket`` on their way from the I/O thread to the consumer.
///
/// Bounded: when `limit` messages are waiting, ``deliver(_:)`` reports "full" and the I/O thread
/// stops polling the socket for input, so libzmq's `RCVHWM` (and then the sender's `SNDHWM`)
/// pushes back on the peer instead of this buffer growing. Once the consumer has taken the
/// buffer down to `resumeThreshold`, `onResume` asks the I/O thread to read again.
final class Inbox: Sendable {
    private struct State {
        var buffer: [[[UInt8]]] = []
        var head = 0
        var waiter: CheckedContinuation<[[UInt8]]?, Error>?
        var finished = false
        var failure: ZMQError?
        var paused = false
        var peak = 0
        var pauses = 0
        var pauseWatchers: [CheckedContinuation<Void, Never>] = []

        var count: Int { buffer.count - head }

        mutating func pop() -> [[UInt8]] {
            let message = buffer[head]
            buffer[head] = []
            head += 1
            if head == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024, head * 2 >= buffer.count {
                buffer.removeFirst(head)
                head = 0
            }
            return message
        }
    }

    private let state = Mutex(State())
    let limit: Int
    private let resumeThreshold: Int
    private let onResume: @Sendable () -> Void

    init(limit: Int, onResume: @escaping @Sendable () -> Void) {
        self.limit = max(1, limit)
        self.resumeThreshold = self.limit / 2
        self.onResume = onResume
    }

    // MARK: I/O thread side

    /// Hands a message to the consumer (directly when one is waiting).
    /// - Returns: `false` when the buffer is now full and reading must pause.
    func deliver(_ message: [[UInt8]]) -> Bool {
        enum Outcome { case handedOver(CheckedContinuation<[[UInt8]]?, Error>), buffered, full([CheckedContinuation<Void, Never>]) }
        let outcome: Outcome = state.withLock { state in
            if let waiter = state.waiter {
                state.waiter = nil
                return .handedOver(waiter)
            }
            state.buffer.append(message)
            let count = state.count
            state.peak = max(state.peak, count)
            guard count >= limit else { return .buffered }
            state.paused = true
            state.pauses += 1
            let watchers = state.pauseWatchers
            state.pauseWatchers.removeAll()
            return .full(watchers)
        }
        switch outcome {
        case .handedOver(let waiter):
            waiter.resume(returning: message)
            return true
        case .buffered:
            return true
        case .full(let watchers):
            for watcher in watchers { watcher.resume() }
            return false
        }
    }

    /// Ends the stream once the buffered messages are consumed (with `failure` if given).
    func finish(_ failure: ZMQError? = nil) {
        let waiter: CheckedContinuation<[[UInt8]]?, Error>? = state.withLock { state in
            guard !state.finished else { return nil }
            state.finished = true
            state.failure = failure
            defer { state.waiter = nil }
            return state.waiter
        }
        if let failure { waiter?.resume(throwing: failure) } else { waiter?.resume(returning: nil) }
    }

    // MARK: Consumer side

    /// The next message; `nil` when the socket has closed and the buffer is empty.
    /// - Throws: `CancellationError` when the waiting task is cancelled, or the socket's failure.
    func next() async throws -> [[UInt8]]? {
        enum Fast { case message([[UInt8]], resume: Bool), end(ZMQError?), wait }
        let fast: Fast = state.withLock { state in
            if state.count > 0 {
                let message = state.pop()
                var resume = false
                if state.paused, state.count <= resumeThreshold {
                    state.paused = false
                    resume = true
                }
                return .message(message, resume: resume)
            }
            if state.finished { return .end(state.failure) }
            return .wait
        }
        switch fast {
        case .message(let message, let resume):
            if resume { onResume() }
            return message
        case .end(let failure):
            if let failure { throw failure }
            return nil
        case .wait:
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    enum Slow { case message([[UInt8]]), end(ZMQError?), cancelled, busy, parked }
                    let slow: Slow = state.withLock { state in
                        if state.count > 0 { return .message(state.pop()) }
                        if state.finished { return .end(state.failure) }
                        if Task.isCancelled { return .cancelled }
                        if state.waiter != nil { return .busy }
                        state.waiter = continuation
                        return .parked
                    }
                    switch slow {
                    case .message(let message): continuation.resume(returning: message)
                    case .end(nil): continuation.resume(returning: nil)
                    case .end(let failure?): continuation.resume(throwing: failure)
                    case .cancelled: continuation.resume(throwing: CancellationError())
                    case .busy:
                        continuation.resume(throwing: ZMQError(
                            errno: EBUSY, operation: "receive",
                            message: "another task is already receiving from this socket"))
                    case .parked: break
                    }
                }
            } onCancel: {
                let waiter = state.withLock { state in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(throwing: CancellationError())
            }
        }
    }

    // MARK: Introspection

    /// Messages waiting for the consumer.
    var count: Int { state.withLock { $0.count } }
    /// The most messages ever waiting at once.
    var peak: Int { state.withLock { $0.peak } }
    /// How many times reading was paused because the buffer was full.
    var pauses: Int { state.withLock { $0.pauses } }

    /// Returns once reading has been paused at least once (for tests).
    func waitUntilPaused() async {
        await withCheckedContinuation { continuation in
            let already = state.withLock { state in
                if state.pauses > 0 { return true }
                state.pauseWatchers.append(continuation)
                return false
            }
            if already { continuation.resume() }
        }
    }
}
