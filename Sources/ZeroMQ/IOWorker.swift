import CZeroMQ
import Logging

/// The body of a ``ZMQIOLoop`` thread. Not `Sendable`: it is created on the I/O thread and
/// every socket it holds is created, used and closed there.
///
/// It sleeps in a ``ReadinessSet`` on the waker and every socket's `ZMQ_FD`, and asks
/// `ZMQ_EVENTS` only of sockets that may have news: one whose descriptor turned readable, or
/// one it just sent on or received from (libzmq's rule: a `send` or `recv` can change what a
/// socket is ready for without signalling its descriptor). So a wake-up costs in proportion to
/// the busy sockets, not to every socket the thread holds.
final class IOWorker {
    private final class Entry {
        let id: Int
        let socket: Socket
        let inbox: Inbox
        let sendWindow: SendWindow
        var monitorReader: Socket?
        var monitor: AsyncStream<MonitorEvent>.Continuation?
        var pendingSends: [PendingSend] = []
        var pendingHead = 0
        /// Input is not polled while the inbox is full.
        var readingPaused = false
        /// ``SocketOptions/inboundFilter``.
        var inboundFilter: (@Sendable ([[UInt8]], Int32) -> Bool)?
        /// After a POLLOUT that still could not send (a ROUTER reports POLLOUT if *any* peer
        /// has room), retry on a timer instead of spinning on POLLOUT.
        var retrySendAt: ContinuousClock.Instant?
        /// The socket's `ZMQ_FD` and its monitor reader's, as registered in the readiness set.
        var signalDescriptor: Int32 = -1
        var monitorDescriptor: Int32 = -1
        /// In the list of sockets whose `ZMQ_EVENTS` is to be asked.
        var queuedForCheck = false

        init(id: Int, socket: Socket, inbox: Inbox, sendWindow: SendWindow) {
            self.sendWindow = sendWindow
            self.id = id
            self.socket = socket
            self.inbox = inbox
        }

        var hasPendingSends: Bool { pendingHead < pendingSends.count }
    }

    private struct PendingSend {
        var frames: [[UInt8]]
        var nextFrame: Int
        var token: UInt64
        var reply: CheckedContinuation<Void, Error>?

        /// Reports the outcome to a waiting caller, or returns a windowed send's credit.
        func complete(_ entry: Entry, _ result: Result<Void, ZMQError>, logger: Logger) {
            if let reply {
                reply.resume(with: result.mapError { $0 as Error })
            } else {
                entry.sendWindow.release()
                if case .failure(let error) = result, error.errno != ENOTSOCK, error.errno != ETERM {
                    // Nobody waits for this message; its failure can only be logged.
                    logger.warning("zmq send failed with no caller waiting", metadata: [
                        "socket": "\(entry.id)", "error": "\(error)",
                    ])
                }
            }
        }
    }

    private let shared: LoopShared
    private var entries: [Int: Entry] = [:]
    private let readiness: ReadinessSet
    /// Sockets whose `ZMQ_EVENTS` is to be asked before the thread may sleep.
    private var toCheck: [Entry] = []
    /// Sockets waiting on ``Entry/retrySendAt``.
    private var retrying: [Int: Entry] = [:]
    private var batch: [Command] = []
    private let clock = ContinuousClock()
    /// Messages taken from one socket per wake-up before serving the others.
    private let receiveBatch = 128
    private var roundsWithoutPolling = 0

    private let executor: UnownedTaskExecutor

    /// Readiness keys: a socket's id, its monitor reader's id with this bit, or the waker.
    private static let monitorBit: UInt64 = 1 << 62
    private static let wakerKey: UInt64 = .max

    /// A socket's readiness key. Socket ids count up from 1 (``LoopShared/nextSocketID()``), so
    /// they never reach the monitor bit; the bits are taken as they are, never trapping.
    private static func key(socket id: Int) -> UInt64 {
        UInt64(truncatingIfNeeded: id) & ~monitorBit
    }

    init(shared: LoopShared, readiness: ReadinessSet, executor: UnownedTaskExecutor) {
        self.shared = shared
        self.readiness = readiness
        self.executor = executor
    }

    func run() {
        shared.logger.debug("zmq I/O loop started", metadata: ["loop": "\(shared.label)"])
        do throws(ZMQError) {
            try readiness.add(shared.waker.readFD, key: Self.wakerKey)
        } catch {
            shared.logger.error("zmq I/O loop cannot watch its waker", metadata: ["error": "\(error)"])
            stop()
            return
        }
        var terminated = false
        while !terminated {
            let stopping = shared.state.withLock { state in
                swap(&state.commands, &batch)
                state.sleeping = false
                return state.stopping
            }
            for command in batch { handle(command) }
            batch.removeAll(keepingCapacity: true)
            if stopping { break }

            retryDueSends()
            checkQueuedSockets()
            let sleep = shared.state.withLock { state in
                guard state.commands.isEmpty, !state.stopping, toCheck.isEmpty else { return false }
                state.sleeping = true
                return true
            }
            // More commands (typically jobs resumed by the last batch) are already queued: run
            // them before a non-blocking look at the descriptors, but look at least every few
            // rounds so the sockets are never starved by a busy queue.
            if !sleep, roundsWithoutPolling < 8 {
                roundsWithoutPolling += 1
                continue
            }
            roundsWithoutPolling = 0
            do throws(ZMQError) {
                try readiness.wait(timeoutMilliseconds: sleep ? pollTimeout() : 0) { key in ready(key) }
            } catch {
                shared.logger.error("the zmq I/O loop's wait failed; closing its sockets", metadata: ["error": "\(error)"])
                terminated = true
                continue
            }
            checkQueuedSockets()
        }
        stop()
    }

    // MARK: Commands

    private func handle(_ command: Command) {
        switch command {
        case .open(let request):
            open(request)
        case .endpoint(let id, let action, let endpoint, let reply):
            guard let entry = entries[id] else {
                reply.resume(throwing: ZMQError.socketClosed("\(action)(\(endpoint))"))
                return
            }
            do throws(ZMQError) {
                switch action {
                case .bind:
                    try entry.socket.bind(endpoint)
                    reply.resume(returning: try entry.socket.lastEndpoint)
                case .unbind:
                    try entry.socket.unbind(endpoint)
                    reply.resume(returning: endpoint)
                case .connect:
                    try entry.socket.connect(endpoint)
                    reply.resume(returning: endpoint)
                case .disconnect:
                    try entry.socket.disconnect(endpoint)
                    reply.resume(returning: endpoint)
                }
            } catch {
                reply.resume(throwing: error)
            }
        case .send(let id, let frames, let token, let reply):
            guard let entry = entries[id] else {
                reply?.resume(throwing: ZMQError.socketClosed("send"))
                return
            }
            entry.pendingSends.append(PendingSend(frames: frames, nextFrame: 0, token: token, reply: reply))
            // Sends queued earlier go first; only an idle queue is tried at once.
            if entry.pendingSends.count - entry.pendingHead == 1 {
                flushSends(entry)
                queueCheck(entry)
            }
        case .sendOrDrop(let id, let frames, let reply):
            guard let entry = entries[id] else {
                reply.complete(.failure(ZMQError.socketClosed("send")))
                return
            }
            // Tried once, now, whatever waits in `pendingSends`: for a ROUTER those wait on other
            // peers, and a full peer must cost only itself (its message is dropped, not queued).
            do throws(ZMQError) {
                reply.complete(.success(try entry.socket.send(frames: frames, dontWait: true)))
            } catch {
                reply.complete(.failure(error))
            }
            queueCheck(entry)
        case .cancelSend(let id, let token):
            guard let entry = entries[id] else { return }
            for index in entry.pendingHead..<entry.pendingSends.count
            where entry.pendingSends[index].token == token && entry.pendingSends[index].nextFrame == 0 {
                let cancelled = entry.pendingSends.remove(at: index)
                cancelled.reply?.resume(throwing: CancellationError())
                break
            }
        case .resumeReading(let id):
            guard let entry = entries[id], entry.readingPaused else { return }
            entry.readingPaused = false
            // Anything already queued in libzmq: its descriptor will not signal it again.
            queueCheck(entry)
        case .job(let job):
            job.runSynchronously(on: executor)
        case .close(let id, let reply):
            if let entry = entries.removeValue(forKey: id) {
                close(entry, forceLinger: false)
            }
            reply?.resume()
        }
    }

    private func open(_ request: OpenRequest) {
        do throws(ZMQError) {
            let socket = try Socket(context: shared.context, type: request.type)
            do throws(ZMQError) {
                try socket.apply(request.options)
            } catch {
                socket.close()
                throw error
            }
            let entry = Entry(id: request.socket, socket: socket, inbox: request.inbox, sendWindow: request.sendWindow)
            entry.inboundFilter = request.options.inboundFilter
            do throws(ZMQError) {
                entry.signalDescriptor = try socket.signalDescriptor()
                try readiness.add(entry.signalDescriptor, key: Self.key(socket: request.socket))
            } catch {
                socket.close()
                throw error
            }
            if let monitor = request.monitor {
                let endpoint = "inproc://signfleet-zmq-monitor-\(shared.instance)-\(request.socket)"
                do throws(ZMQError) {
                    try socket.monitor(endpoint: endpoint, events: request.options.monitoredEvents)
                    let reader = try Socket(context: shared.context, type: .pair)
                    entry.monitorReader = reader
                    try reader.setOption(ZMQ_LINGER, Int32(0))
                    try reader.connect(endpoint)
                    entry.monitorDescriptor = try reader.signalDescriptor()
                    try readiness.add(entry.monitorDescriptor, key: Self.key(socket: request.socket) | Self.monitorBit)
                } catch {
                    _ = try? socket.monitor(endpoint: nil)
                    readiness.remove(entry.signalDescriptor)
                    entry.monitorReader?.close()
                    socket.close()
                    throw error
                }
                entry.monitor = monitor
            }
            entries[request.socket] = entry
            // A pipe nobody has found empty yet signals nothing when written to: asking each
            // socket once arms its descriptor (the monitor's first event would otherwise be lost).
            queueCheck(entry)
            readMonitor(entry)
            shared.statistics.withLock { $0.socketsOpened += 1 }
            request.reply.resume()
        } catch {
            request.monitor?.finish()
            request.inbox.finish()
            request.reply.resume(throwing: error)
        }
    }

    // MARK: Readiness

    /// Asks `entry`'s `ZMQ_EVENTS` before the thread next sleeps.
    private func queueCheck(_ entry: Entry) {
        guard !entry.queuedForCheck else { return }
        entry.queuedForCheck = true
        toCheck.append(entry)
    }

    /// A descriptor of the readiness set turned readable.
    private func ready(_ key: UInt64) {
        if key == Self.wakerKey {
            shared.waker.drain()
        } else if key & Self.monitorBit != 0 {
            if let entry = entries[Int(truncatingIfNeeded: key & ~Self.monitorBit)] { readMonitor(entry) }
        } else if let entry = entries[Int(truncatingIfNeeded: key)] {
            queueCheck(entry)
        }
    }

    /// Serves every queued socket: receives while it is readable (up to ``receiveBatch``
    /// messages, then it waits for the next round so the others are served), sends while it is
    /// writable, and asks again after each, until `ZMQ_EVENTS` offers nothing it wants.
    private func checkQueuedSockets() {
        guard !toCheck.isEmpty else { return }
        let queued = toCheck
        toCheck.removeAll(keepingCapacity: true)
        for entry in queued {
            entry.queuedForCheck = false
            // Closed by an earlier entry's handling, or by a command since it was queued.
            guard !entry.socket.isClosed else { continue }
            serve(entry)
        }
    }

    private func serve(_ entry: Entry) {
        while true {
            let events: Poller.Events
            shared.eventChecks.wrappingAdd(1, ordering: .relaxed)
            do throws(ZMQError) {
                events = try entry.socket.currentEvents()
            } catch {
                if error.errno == ETERM {
                    // The context is shutting down under us: close everything so it can finish.
                    shared.logger.debug("zmq context terminated under the I/O loop", metadata: ["loop": "\(shared.label)"])
                    shared.state.withLock { $0.stopping = true }
                } else {
                    shared.logger.warning("zmq_getsockopt(ZMQ_EVENTS) failed", metadata: ["socket": "\(entry.id)", "error": "\(error)"])
                }
                return
            }
            var acted = false
            if entry.hasPendingSends, entry.retrySendAt == nil, events.contains(.writable) {
                let before = (entry.pendingHead, entry.pendingSends.count)
                flushSends(entry)
                if entry.hasPendingSends, before == (entry.pendingHead, entry.pendingSends.count) {
                    entry.retrySendAt = clock.now.advanced(by: .milliseconds(2))
                    retrying[entry.id] = entry
                } else {
                    acted = true
                }
            }
            if !entry.readingPaused, events.contains(.readable) {
                switch receive(entry) {
                case .drained(let count): acted = acted || count > 0
                case .batchFull:
                    queueCheck(entry)
                    return
                case .paused, .failed: break
                }
            }
            if !acted { return }
        }
    }

    private func pollTimeout() -> Int {
        var earliest: ContinuousClock.Instant?
        for entry in retrying.values {
            if let due = entry.retrySendAt, earliest.map({ due < $0 }) ?? true { earliest = due }
        }
        guard let earliest else { return -1 }
        let (seconds, attoseconds) = clock.now.duration(to: earliest).components
        return max(0, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000) + 1)
    }

    private func retryDueSends() {
        guard !retrying.isEmpty else { return }
        let now = clock.now
        for (id, entry) in retrying {
            guard let due = entry.retrySendAt, due <= now else { continue }
            entry.retrySendAt = nil
            retrying[id] = nil
            guard !entry.socket.isClosed else { continue }
            flushSends(entry)
            queueCheck(entry)
        }
    }

    private enum Received { case drained(Int), batchFull, paused, failed }

    /// Receives up to ``receiveBatch`` messages: until none is left (`drained`, with how many
    /// were received), the batch is
    /// used up (`batchFull`), the inbox is full (`paused`: reading waits for `resumeReading`) or
    /// a receive failed.
    private func receive(_ entry: Entry) -> Received {
        for count in 0..<receiveBatch {
            let message: [[UInt8]]?
            do throws(ZMQError) {
                message = try entry.socket.receive(dontWait: true)
            } catch {
                shared.logger.warning("zmq receive failed", metadata: ["socket": "\(entry.id)", "error": "\(error)"])
                return .failed
            }
            guard let message else { return .drained(count) }
            if let filter = entry.inboundFilter, !filter(message, entry.socket.lastSourceDescriptor) { continue }
            if !entry.inbox.deliver(message) {
                entry.readingPaused = true
                return .paused
            }
        }
        return .batchFull
    }

    private func flushSends(_ entry: Entry) {
        while entry.hasPendingSends {
            var pending = entry.pendingSends[entry.pendingHead]
            do throws(ZMQError) {
                pending.nextFrame = try entry.socket.send(frames: pending.frames, from: pending.nextFrame, dontWait: true)
            } catch {
                popPending(entry)
                pending.complete(entry, .failure(error), logger: shared.logger)
                continue
            }
            if pending.nextFrame < pending.frames.count {
                entry.pendingSends[entry.pendingHead].nextFrame = pending.nextFrame
                return
            }
            popPending(entry)
            pending.complete(entry, .success(()), logger: shared.logger)
        }
    }

    private func popPending(_ entry: Entry) {
        entry.pendingHead += 1
        if entry.pendingHead == entry.pendingSends.count {
            entry.pendingSends.removeAll(keepingCapacity: true)
            entry.pendingHead = 0
        } else if entry.pendingHead >= 256, entry.pendingHead * 2 >= entry.pendingSends.count {
            entry.pendingSends.removeFirst(entry.pendingHead)
            entry.pendingHead = 0
        }
    }

    private func readMonitor(_ entry: Entry) {
        guard let reader = entry.monitorReader else { return }
        repeat {
            while let frames = try? reader.receive(dontWait: true) {
                if let event = MonitorEvent(frames: frames) { entry.monitor?.yield(event) }
            }
            // A `recv` may leave libzmq's commands unprocessed for a while, and so the descriptor
            // readable; `ZMQ_EVENTS` processes them, so the thread does not wake again for nothing.
            shared.eventChecks.wrappingAdd(1, ordering: .relaxed)
        } while (try? reader.currentEvents())?.contains(.readable) == true
    }

    // MARK: Closing

    private func close(_ entry: Entry, forceLinger: Bool) {
        if forceLinger { _ = try? entry.socket.setOption(ZMQ_LINGER, Int32(0)) }
        // Out of the readiness set before libzmq may close or reuse the descriptors.
        if entry.signalDescriptor >= 0 { readiness.remove(entry.signalDescriptor) }
        if entry.monitorDescriptor >= 0 { readiness.remove(entry.monitorDescriptor) }
        retrying[entry.id] = nil
        if let reader = entry.monitorReader {
            // Stop the monitor first so libzmq's monitor socket is closed before its reader.
            _ = try? entry.socket.monitor(endpoint: nil)
            readMonitor(entry)
            reader.close()
            entry.monitorReader = nil
        }
        entry.monitor?.finish()
        entry.monitor = nil
        entry.socket.close()
        shared.statistics.withLock { $0.socketsClosed += 1 }
        entry.inbox.finish()
        for index in entry.pendingHead..<entry.pendingSends.count {
            entry.pendingSends[index].complete(entry, .failure(ZMQError.socketClosed("send")), logger: shared.logger)
        }
        entry.pendingSends.removeAll()
        entry.pendingHead = 0
        shared.logger.trace("zmq socket closed", metadata: ["socket": "\(entry.id)", "type": "\(entry.socket.type)"])
    }

    private func stop() {
        // From here on `submit` rejects new commands itself.
        let leftovers = shared.state.withLock { state in
            state.stopping = true
            defer { state.commands.removeAll() }
            return state.commands
        }
        for command in leftovers { command.reject() }
        for entry in entries.values { close(entry, forceLinger: true) }
        entries.removeAll()
        toCheck.removeAll()
        readiness.close()
        let waiters = shared.state.withLock { state in
            state.stopped = true
            defer { state.shutdownWaiters.removeAll() }
            return state.shutdownWaiters
        }
        shared.logger.debug("zmq I/O loop stopped", metadata: ["loop": "\(shared.label)"])
        // Resumed last: once `shutdown()` returns, this thread touches no socket any more.
        for waiter in waiters { waiter.resume() }
    }
}
