import CZeroMQ
import Logging

/// The body of a ``ZMQIOLoop`` thread. Not `Sendable`: it is created on the I/O thread and
/// every socket it holds is created, used and closed there.
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

    private enum PollTarget { case socket(Entry), monitor(Entry) }

    private let shared: LoopShared
    private var entries: [Int: Entry] = [:]
    private let poller = Poller()
    private var targets: [PollTarget] = []
    private var pollerDirty = true
    private var batch: [Command] = []
    private let clock = ContinuousClock()
    /// Messages taken from one socket per wake-up before serving the others.
    private let receiveBatch = 128
    private var roundsWithoutPolling = 0

    private let executor: UnownedTaskExecutor

    init(shared: LoopShared, executor: UnownedTaskExecutor) {
        self.shared = shared
        self.executor = executor
    }

    func run() {
        shared.logger.debug("zmq I/O loop started", metadata: ["loop": "\(shared.label)"])
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
            if pollerDirty { rebuildPoller() }
            let timeout = pollTimeout()
            let sleep = shared.state.withLock { state in
                guard state.commands.isEmpty, !state.stopping else { return false }
                state.sleeping = true
                return true
            }
            // More commands (typically jobs resumed by the last batch) are already queued: run
            // them before a non-blocking zmq_poll, but poll at least every few rounds so the
            // sockets are never starved by a busy queue.
            if !sleep, roundsWithoutPolling < 8 {
                roundsWithoutPolling += 1
                continue
            }
            roundsWithoutPolling = 0
            do {
                try poller.poll(timeoutMilliseconds: sleep ? timeout : 0)
            } catch {
                // ETERM: the context is being terminated under us; close everything so it can finish.
                shared.logger.debug("zmq_poll stopped the I/O loop", metadata: ["error": "\(error)"])
                terminated = true
                continue
            }
            dispatchPollResults()
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
                if entry.hasPendingSends { pollerDirty = true }
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
        case .cancelSend(let id, let token):
            guard let entry = entries[id] else { return }
            for index in entry.pendingHead..<entry.pendingSends.count
            where entry.pendingSends[index].token == token && entry.pendingSends[index].nextFrame == 0 {
                let cancelled = entry.pendingSends.remove(at: index)
                cancelled.reply?.resume(throwing: CancellationError())
                if !entry.hasPendingSends { pollerDirty = true }
                break
            }
        case .resumeReading(let id):
            guard let entry = entries[id], entry.readingPaused else { return }
            entry.readingPaused = false
            pollerDirty = true
            // Anything already queued in libzmq is picked up by the next zmq_poll.
        case .job(let job):
            job.runSynchronously(on: executor)
        case .close(let id, let reply):
            if let entry = entries.removeValue(forKey: id) {
                close(entry, forceLinger: false)
                pollerDirty = true
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
            if let monitor = request.monitor {
                let endpoint = "inproc://signfleet-zmq-monitor-\(shared.instance)-\(request.socket)"
                do throws(ZMQError) {
                    try socket.monitor(endpoint: endpoint)
                    let reader = try Socket(context: shared.context, type: .pair)
                    entry.monitorReader = reader
                    try reader.setOption(ZMQ_LINGER, Int32(0))
                    try reader.connect(endpoint)
                } catch {
                    _ = try? socket.monitor(endpoint: nil)
                    entry.monitorReader?.close()
                    socket.close()
                    throw error
                }
                entry.monitor = monitor
            }
            entries[request.socket] = entry
            pollerDirty = true
            shared.statistics.withLock { $0.socketsOpened += 1 }
            request.reply.resume()
        } catch {
            request.monitor?.finish()
            request.inbox.finish()
            request.reply.resume(throwing: error)
        }
    }

    // MARK: Polling

    private func rebuildPoller() {
        poller.removeAll()
        targets.removeAll(keepingCapacity: true)
        poller.register(fd: shared.waker.readFD, events: .readable)
        for entry in entries.values {
            var events: Poller.Events = []
            if !entry.readingPaused { events.insert(.readable) }
            if entry.hasPendingSends, entry.retrySendAt == nil { events.insert(.writable) }
            if !events.isEmpty {
                poller.register(entry.socket, events: events)
                targets.append(.socket(entry))
            }
            if let reader = entry.monitorReader {
                poller.register(reader, events: .readable)
                targets.append(.monitor(entry))
            }
        }
        pollerDirty = false
    }

    private func pollTimeout() -> Int {
        var earliest: ContinuousClock.Instant?
        for entry in entries.values {
            if let due = entry.retrySendAt, earliest.map({ due < $0 }) ?? true { earliest = due }
        }
        guard let earliest else { return -1 }
        let (seconds, attoseconds) = clock.now.duration(to: earliest).components
        return max(0, Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000) + 1)
    }

    private func retryDueSends() {
        let now = clock.now
        for entry in entries.values {
            guard let due = entry.retrySendAt, due <= now else { continue }
            entry.retrySendAt = nil
            flushSends(entry)
            pollerDirty = true
        }
    }

    private func dispatchPollResults() {
        if poller.returnedEvents(at: 0).contains(.readable) { shared.waker.drain() }
        for (offset, target) in targets.enumerated() {
            let events = poller.returnedEvents(at: offset + 1)
            if events.isEmpty { continue }
            switch target {
            case .socket(let entry):
                // The entry may have been closed by an earlier target's failure handling.
                guard !entry.socket.isClosed else { continue }
                if events.contains(.writable) {
                    let before = (entry.pendingHead, entry.pendingSends.count)
                    flushSends(entry)
                    if entry.hasPendingSends, before == (entry.pendingHead, entry.pendingSends.count) {
                        entry.retrySendAt = clock.now.advanced(by: .milliseconds(2))
                        pollerDirty = true
                    } else if !entry.hasPendingSends {
                        pollerDirty = true
                    }
                }
                if events.contains(.readable) { receive(entry) }
            case .monitor(let entry):
                readMonitor(entry)
            }
        }
    }

    private func receive(_ entry: Entry) {
        for _ in 0..<receiveBatch {
            let message: [[UInt8]]?
            do throws(ZMQError) {
                message = try entry.socket.receive(dontWait: true)
            } catch {
                shared.logger.warning("zmq receive failed", metadata: ["socket": "\(entry.id)", "error": "\(error)"])
                return
            }
            guard let message else { return }
            if let filter = entry.inboundFilter, !filter(message, entry.socket.lastSourceDescriptor) { continue }
            if !entry.inbox.deliver(message) {
                entry.readingPaused = true
                pollerDirty = true
                return
            }
        }
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
        while let frames = try? reader.receive(dontWait: true) {
            if let event = MonitorEvent(frames: frames) { entry.monitor?.yield(event) }
        }
    }

    // MARK: Closing

    private func close(_ entry: Entry, forceLinger: Bool) {
        if forceLinger { _ = try? entry.socket.setOption(ZMQ_LINGER, Int32(0)) }
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
        poller.removeAll()
        targets.removeAll()
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
