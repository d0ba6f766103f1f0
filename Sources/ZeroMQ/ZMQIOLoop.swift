import Foundation
import Logging
import Synchronization

/// One dedicated OS thread that owns and polls every socket made through it, bridged to
/// Swift concurrency.
///
/// ZeroMQ sockets are not thread-safe and waiting on them blocks, so neither may run on the
/// cooperative thread pool. A `ZMQIOLoop` starts one thread that creates, waits on and closes
/// all of its sockets; tasks talk to it by enqueuing commands (woken through an eventfd only
/// when the thread is asleep in `epoll_wait`) and get replies through continuations resumed
/// from that thread. One loop per process serves hundreds of sockets: a wake-up costs in
/// proportion to the sockets with news, not to all of them (docs/zeromq.md, "Threading design").
///
/// The loop is also a `TaskExecutor`: a task started with `Task(executorPreference: loop)` runs
/// on the I/O thread between polls and so skips the thread hops of a request/reply exchange.
/// Such a task must never block.
///
/// ```swift
/// let loop = try ZMQIOLoop(context: context)
/// let router = try await loop.makeSocket(.router)
/// let endpoint = try await router.bind("tcp://127.0.0.1:*")
/// for try await message in router.messages { try await router.send(message) } // echo
/// await loop.shutdown()
/// ```
public final class ZMQIOLoop: TaskExecutor, Sendable {
    let shared: LoopShared

    /// Starts the I/O thread.
    /// - Parameters:
    ///   - context: the context the sockets are created in.
    ///   - label: the thread's name (visible in debuggers and `top -H`).
    ///   - logger: where the loop logs socket lifecycle and unexpected failures.
    /// - Throws: ``ZMQError`` when the wake-up eventfd cannot be created.
    public init(context: ZMQContext, label: String = "zmq-io", logger: Logger = Logger(label: "signfleet.zeromq")) throws {
        let shared = try LoopShared(context: context, label: label, logger: logger)
        self.shared = shared
        // Unowned: the thread must not keep the loop alive (its deinit stops the thread); tasks
        // preferring this executor retain it while they have jobs.
        let executor = asUnownedTaskExecutor()
        let readinessDescriptor = try ReadinessSet.makeDescriptor()
        let thread = Thread {
            nameCurrentThread(label)
            shared.threadID.store(currentThreadID(), ordering: .releasing)
            // Everything the worker holds (sockets, pending sends) lives and dies on this thread.
            IOWorker(shared: shared, readiness: ReadinessSet(descriptor: readinessDescriptor), executor: executor).run()
        }
        thread.name = label
        thread.start()
    }

    /// The context this loop's sockets are created in.
    public var context: ZMQContext { shared.context }

    deinit {
        // Sockets keep their loop alive, so none is left; stop the thread without waiting.
        shared.requestShutdown(nil)
    }

    /// Opens a socket owned by this loop's thread, with `options` applied before any bind or connect.
    /// - Throws: ``ZMQError`` if libzmq rejects the socket or an option, or the loop has shut down.
    public func makeSocket(_ type: SocketType, options: SocketOptions = .init()) async throws -> AsyncSocket {
        let id = shared.nextSocketID()
        let inbox = Inbox(limit: options.receiveBufferLimit) { [shared] in
            shared.submit(.resumeReading(socket: id))
        }
        let sendWindow = SendWindow(limit: options.effectiveSendWindow(for: type))
        var monitorContinuation: AsyncStream<MonitorEvent>.Continuation?
        let monitorEvents: AsyncStream<MonitorEvent>
        if options.monitor {
            let (stream, continuation) = AsyncStream.makeStream(of: MonitorEvent.self, bufferingPolicy: .bufferingNewest(max(1, options.monitorBufferLimit)))
            monitorEvents = stream
            monitorContinuation = continuation
        } else {
            let (stream, continuation) = AsyncStream.makeStream(of: MonitorEvent.self)
            continuation.finish()
            monitorEvents = stream
        }
        try await withCheckedThrowingContinuation { (reply: CheckedContinuation<Void, Error>) in
            shared.submit(.open(OpenRequest(
                socket: id, type: type, options: options, inbox: inbox, sendWindow: sendWindow,
                monitor: monitorContinuation, reply: reply)))
        }
        return AsyncSocket(
            loop: self, id: id, type: type, inbox: inbox, sendWindow: sendWindow, monitorEvents: monitorEvents)
    }

    /// Closes every socket (with `LINGER 0`, each exactly once), fails whatever was still
    /// pending, and returns when the I/O thread has finished. Idempotent.
    public func shutdown() async {
        await withCheckedContinuation { (reply: CheckedContinuation<Void, Never>) in
            shared.requestShutdown(reply)
        }
    }

    /// Runs `job` on the I/O thread, between two polls.
    ///
    /// A task that prefers this executor (`Task(executorPreference: loop) { ... }`) runs on the
    /// I/O thread, so the socket replies that resume it need no hop to another thread: a
    /// request/reply loop then wakes a single thread per round trip, as raw libzmq does. Such
    /// tasks must not block. After ``shutdown()`` jobs go to the global concurrent executor.
    public func enqueue(_ job: consuming ExecutorJob) {
        shared.submit(.job(UnownedJob(job)))
    }

    /// Whether the caller runs on this loop's I/O thread (e.g. a task preferring the loop as executor).
    public var isCurrentThread: Bool {
        shared.threadID.load(ordering: .acquiring) == currentThreadID()
    }

    /// Counters for tests and metrics.
    public struct Statistics: Sendable, Hashable {
        /// Sockets successfully opened so far.
        public var socketsOpened = 0
        /// Sockets closed so far (each socket is counted once, when `zmq_close` runs).
        public var socketsClosed = 0
        /// Times the loop asked a socket's `ZMQ_EVENTS`: in proportion to the traffic, not to
        /// the sockets it holds (an idle socket is asked only when libzmq signals it).
        public var eventChecks = 0
    }

    /// Current ``Statistics``.
    public var statistics: Statistics {
        var statistics = shared.statistics.withLock { $0 }
        statistics.eventChecks = shared.eventChecks.load(ordering: .relaxed)
        return statistics
    }
}

struct OpenRequest: Sendable {
    var socket: Int
    var type: SocketType
    var options: SocketOptions
    var inbox: Inbox
    var sendWindow: SendWindow
    var monitor: AsyncStream<MonitorEvent>.Continuation?
    var reply: CheckedContinuation<Void, Error>
}

/// Where the outcome of a ``Command/sendOrDrop(socket:frames:reply:)`` goes: a task waiting for it,
/// or a function the I/O thread calls (the sender does not wait).
enum SendOrDropReply: Sendable {
    case waiting(CheckedContinuation<Bool, Error>)
    case callback(@Sendable (Result<Bool, ZMQError>) -> Void)

    func complete(_ result: Result<Bool, ZMQError>) {
        switch self {
        case .waiting(let continuation): continuation.resume(with: result.mapError { $0 as Error })
        case .callback(let outcome): outcome(result)
        }
    }
}

/// A request from a task to the I/O thread.
enum Command: Sendable {
    enum EndpointAction: Sendable { case bind, unbind, connect, disconnect }

    case open(OpenRequest)
    case endpoint(socket: Int, action: EndpointAction, endpoint: String, reply: CheckedContinuation<String, Error>)
    /// `reply == nil`: a windowed send whose caller did not wait; `window` gets its credit back.
    case send(socket: Int, frames: [[UInt8]], token: UInt64, reply: CheckedContinuation<Void, Error>?)
    case cancelSend(socket: Int, token: UInt64)
    /// A send that never waits: `reply` gets false when the destination's queue is full.
    case sendOrDrop(socket: Int, frames: [[UInt8]], reply: SendOrDropReply)
    case resumeReading(socket: Int)
    case close(socket: Int, reply: CheckedContinuation<Void, Never>?)
    /// A job of a task that prefers the loop as its executor.
    case job(UnownedJob)

    /// Answers a command that will never run because the loop has stopped.
    func reject() {
        switch self {
        case .open(let request):
            request.monitor?.finish()
            request.inbox.finish()
            request.reply.resume(throwing: ZMQError.loopClosed("open socket"))
        case .endpoint(_, let action, let endpoint, let reply):
            reply.resume(throwing: ZMQError.loopClosed("\(action)(\(endpoint))"))
        case .send(_, _, _, let reply):
            reply?.resume(throwing: ZMQError.loopClosed("send"))
        case .sendOrDrop(_, _, let reply):
            reply.complete(.failure(ZMQError.loopClosed("send")))
        case .close(_, let reply):
            reply?.resume()
        case .job(let job):
            // The thread is gone; the task must still run, so it continues on the shared pool.
            globalConcurrentExecutor.enqueue(job)
        case .cancelSend, .resumeReading:
            break
        }
    }
}

/// The state shared between tasks and the I/O thread: the command queue and the wake-up fd.
final class LoopShared: Sendable {
    struct State {
        var commands: [Command] = []
        /// The I/O thread is (about to be) blocked in `epoll_wait` with an empty queue: wake it.
        var sleeping = false
        var stopping = false
        var stopped = false
        var shutdownWaiters: [CheckedContinuation<Void, Never>] = []
        var nextSocketID = 0
    }

    let state = Mutex(State())
    let statistics = Mutex(ZMQIOLoop.Statistics())
    let sendTokens = Atomic<UInt64>(0)
    /// ``ZMQIOLoop/Statistics/eventChecks`` (an atomic: counted on every check).
    let eventChecks = Atomic<Int>(0)
    /// The I/O thread's `pthread_self()`, for checks that code runs on it.
    let threadID = Atomic<UInt>(0)
    let waker: Waker
    let context: ZMQContext
    let label: String
    let logger: Logger
    /// Distinguishes this loop's inproc monitor endpoints from other loops' in the same context.
    let instance = UInt64.random(in: 0 ... .max)

    init(context: ZMQContext, label: String, logger: Logger) throws {
        self.waker = try Waker()
        self.context = context
        self.label = label
        self.logger = logger
    }

    // Closed only here: a task that decided to wake the thread may still write to the fd
    // after the thread has stopped, so it must stay open while anyone can reach it.
    deinit { waker.close() }

    func nextSocketID() -> Int {
        state.withLock { state in
            state.nextSocketID += 1
            return state.nextSocketID
        }
    }

    func nextSendToken() -> UInt64 {
        sendTokens.wrappingAdd(1, ordering: .relaxed).newValue
    }

    /// Enqueues `command`, waking the I/O thread only if it is asleep; rejects it once stopping.
    /// - Returns: whether the command was accepted.
    @discardableResult
    func submit(_ command: Command) -> Bool {
        let (accepted, wake) = state.withLock { state -> (Bool, Bool) in
            if state.stopping { return (false, false) }
            state.commands.append(command)
            if state.sleeping {
                state.sleeping = false
                return (true, true)
            }
            return (true, false)
        }
        if !accepted { command.reject() }
        if wake { waker.wake() }
        return accepted
    }

    /// Asks the I/O thread to stop; `reply` resumes once it has (at once if it already has).
    func requestShutdown(_ reply: CheckedContinuation<Void, Never>?) {
        let (finished, wake) = state.withLock { state -> (Bool, Bool) in
            if state.stopped { return (true, false) }
            if let reply { state.shutdownWaiters.append(reply) }
            if state.stopping { return (false, false) }
            state.stopping = true
            return (false, true)
        }
        if finished { reply?.resume() }
        // The thread may be about to sleep or already asleep; an extra wake is harmless.
        if wake { waker.wake() }
    }
}

/// Sends the caller did not wait for, counted from `AsyncSocket.send` until libzmq has taken
/// them (or they are dropped): at most `limit` at a time, so they stay bounded.
final class SendWindow: Sendable {
    let limit: Int
    private let outstanding = Atomic<Int>(0)

    init(limit: Int) { self.limit = max(0, limit) }

    /// Takes a credit if one is free.
    func tryAcquire() -> Bool {
        guard limit > 0 else { return false }
        if outstanding.wrappingAdd(1, ordering: .acquiringAndReleasing).newValue <= limit { return true }
        outstanding.wrappingSubtract(1, ordering: .relaxed)
        return false
    }

    /// Gives a credit back (I/O thread, once the message is queued in libzmq or dropped).
    func release() { outstanding.wrappingSubtract(1, ordering: .acquiringAndReleasing) }

    var inFlight: Int { outstanding.load(ordering: .relaxed) }
}
