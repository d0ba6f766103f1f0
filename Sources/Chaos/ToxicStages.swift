import NIOCore

/// What travels through a connection's toxic chain: bytes, then the end of the stream.
enum ChainItem {
    case data(ByteBuffer)
    case end
}

/// One toxic acting on one direction of one connection. Stages form a chain (in the order the
/// toxics were added, as in Toxiproxy); each passes what it lets through to `output`.
///
/// Every stage lives on its connection's event loop and is only touched there.
class ToxicStage {
    /// The toxic and its revision: a stage is kept across chain rebuilds while both are unchanged.
    let key: ActiveToxic.Key
    unowned let pipe: ToxicPipe
    var output: (ChainItem) -> Void = { _ in }

    init(key: ActiveToxic.Key, pipe: ToxicPipe) {
        self.key = key
        self.pipe = pipe
    }

    /// Called once the stage is wired into the chain (timers that start with the toxic start here).
    func start() {}

    func input(_ item: ChainItem) { output(item) }

    /// Stops the stage's timers and hands back what it still holds, oldest first, so a removed
    /// toxic lets its data go on rather than losing it.
    func drain() -> [ChainItem] { [] }

    static func make(_ active: ActiveToxic, pipe: ToxicPipe) -> ToxicStage {
        switch active.toxic.kind {
        case .latency(let latency, let jitter):
            ScheduledStage(key: active.key, pipe: pipe, plan: .latency(milliseconds: latency, jitter: jitter))
        case .bandwidth(let rate):
            ScheduledStage(key: active.key, pipe: pipe, plan: .bandwidth(kilobytesPerSecond: rate))
        case .slowClose(let delay):
            ScheduledStage(key: active.key, pipe: pipe, plan: .slowClose(milliseconds: delay))
        case .slicer(let averageSize, let sizeVariation, let delay):
            ScheduledStage(
                key: active.key, pipe: pipe,
                plan: .slicer(averageSize: averageSize, sizeVariation: sizeVariation, microseconds: delay))
        case .timeout(let timeout):
            TimeoutStage(key: active.key, pipe: pipe, milliseconds: timeout)
        case .resetPeer(let timeout):
            ResetPeerStage(key: active.key, pipe: pipe, milliseconds: timeout)
        case .limitData(let bytes):
            LimitDataStage(key: active.key, pipe: pipe, bytes: bytes)
        }
    }
}

/// Toxics that only move items in time (latency, bandwidth, slow_close, slicer): each item gets
/// a deadline no earlier than the previous one's, so order is always kept, and is passed on when
/// it is due.
final class ScheduledStage: ToxicStage {
    enum Plan {
        case latency(milliseconds: Int, jitter: Int)
        case bandwidth(kilobytesPerSecond: Int)
        case slowClose(milliseconds: Int)
        case slicer(averageSize: Int, sizeVariation: Int, microseconds: Int)
    }

    let plan: Plan
    private var queue = CircularBuffer<(item: ChainItem, due: NIODeadline)>()
    /// When the last queued item leaves: later items never leave before it.
    private var cursor = NIODeadline.uptimeNanoseconds(0)
    private var timer: Scheduled<Void>?
    private var draining = false

    init(key: ActiveToxic.Key, pipe: ToxicPipe, plan: Plan) {
        self.plan = plan
        super.init(key: key, pipe: pipe)
    }

    override func input(_ item: ChainItem) {
        let now = NIODeadline.now()
        let base = max(now, cursor)
        switch (plan, item) {
        case (.latency(let milliseconds, let jitter), _):
            var delay = Int64(milliseconds)
            if jitter > 0, case .data = item { delay += Int64(pipe.random.nextInt(in: -jitter...jitter)) }
            let due: NIODeadline
            if case .data = item { due = max(now + .milliseconds(max(0, delay)), cursor) } else { due = base }
            enqueue(item, due: due)
        case (.bandwidth(let rate), .data(var buffer)) where rate > 0:
            // Pieces of at most 100 ms worth, each leaving once its share of time has passed.
            let piece = max(1, rate * 100)
            var due = base
            while buffer.readableBytes > 0, let slice = buffer.readSlice(length: min(piece, buffer.readableBytes)) {
                due = due + .nanoseconds(Int64(slice.readableBytes) * 1_000_000 / Int64(rate))
                enqueue(.data(slice), due: due)
            }
        case (.slowClose(let milliseconds), .end):
            enqueue(.end, due: base + .milliseconds(Int64(milliseconds)))
        case (.slicer(let averageSize, let sizeVariation, let microseconds), .data(var buffer)):
            var due = base
            var offsets = [0]
            Self.cut(0, buffer.readableBytes, averageSize: averageSize, variation: sizeVariation, random: &pipe.random, into: &offsets)
            for (start, end) in zip(offsets, offsets.dropFirst()) {
                guard let slice = buffer.readSlice(length: end - start) else { break }
                enqueue(.data(slice), due: due)
                due = due + .microseconds(Int64(microseconds))
            }
            cursor = max(cursor, due)
        default:
            enqueue(item, due: base)
        }
        release()
    }

    private func enqueue(_ item: ChainItem, due: NIODeadline) {
        queue.append((item, due))
        cursor = max(cursor, due)
    }

    /// Passes on everything due, then waits for the next deadline.
    private func release() {
        let now = NIODeadline.now()
        while let head = queue.first, head.due <= now, !pipe.isFinished {
            queue.removeFirst()
            output(head.item)
        }
        guard timer == nil, !draining, !pipe.isFinished, let next = queue.first else { return }
        timer = pipe.eventLoop.assumeIsolated().scheduleTask(deadline: next.due) { [weak self] in
            self?.timer = nil
            self?.release()
        }
    }

    override func drain() -> [ChainItem] {
        draining = true
        timer?.cancel()
        timer = nil
        let held = queue.map(\.item)
        queue.removeAll()
        return held
    }

    /// Cuts `start..<end` into pieces of about `averageSize` (± `variation`) bytes, as
    /// Toxiproxy's slicer does: halve around a random midpoint until pieces are small enough.
    static func cut(
        _ start: Int, _ end: Int, averageSize: Int, variation: Int, random: inout ChaosRandom, into offsets: inout [Int]
    ) {
        if (end - start) - averageSize <= variation {
            offsets.append(end)
            return
        }
        let shift = variation > 0 ? random.nextInt(in: -variation...(variation - 1)) : 0
        let middle = min(end - 1, max(start + 1, start + (end - start) / 2 + shift))
        cut(start, middle, averageSize: averageSize, variation: variation, random: &random, into: &offsets)
        cut(middle, end, averageSize: averageSize, variation: variation, random: &random, into: &offsets)
    }
}

/// `timeout`: drops all data; after `milliseconds` (when not 0) closes the connection.
final class TimeoutStage: ToxicStage {
    let milliseconds: Int
    private var timer: Scheduled<Void>?
    private var ended = false

    init(key: ActiveToxic.Key, pipe: ToxicPipe, milliseconds: Int) {
        self.milliseconds = milliseconds
        super.init(key: key, pipe: pipe)
    }

    override func start() {
        guard milliseconds > 0 else { return }
        timer = pipe.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(milliseconds))) { [weak self] in
            guard let self, !self.ended else { return }
            self.ended = true
            self.output(.end)
        }
    }

    override func input(_ item: ChainItem) {
        switch item {
        case .data(let buffer):
            pipe.dropped(buffer.readableBytes)
        case .end:
            guard !ended else { return }
            ended = true
            timer?.cancel()
            output(.end)
        }
    }

    override func drain() -> [ChainItem] {
        timer?.cancel()
        return []
    }
}

/// `reset_peer`: on the first item, waits `milliseconds`, then resets both sockets (SO_LINGER 0,
/// so the peers see a TCP RST: "connection reset by peer"). Data meanwhile is dropped.
final class ResetPeerStage: ToxicStage {
    let milliseconds: Int
    private var timer: Scheduled<Void>?
    private var triggered = false

    init(key: ActiveToxic.Key, pipe: ToxicPipe, milliseconds: Int) {
        self.milliseconds = milliseconds
        super.init(key: key, pipe: pipe)
    }

    override func input(_ item: ChainItem) {
        if case .data(let buffer) = item { pipe.dropped(buffer.readableBytes) }
        guard !triggered else { return }
        triggered = true
        if milliseconds == 0 {
            pipe.resetConnection()
            return
        }
        timer = pipe.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(milliseconds))) { [weak self] in
            self?.pipe.resetConnection()
        }
    }

    override func drain() -> [ChainItem] {
        timer?.cancel()
        return []
    }
}

/// `limit_data`: passes `bytes` bytes (cutting the chunk that crosses the limit), then ends
/// the stream, which closes the connection.
final class LimitDataStage: ToxicStage {
    let limit: Int
    private var passed = 0
    private var ended = false

    init(key: ActiveToxic.Key, pipe: ToxicPipe, bytes: Int) {
        self.limit = bytes
        super.init(key: key, pipe: pipe)
    }

    override func input(_ item: ChainItem) {
        guard !ended else {
            if case .data(let buffer) = item { pipe.dropped(buffer.readableBytes) }
            return
        }
        switch item {
        case .end:
            ended = true
            output(.end)
        case .data(var buffer):
            let allowed = min(limit - passed, buffer.readableBytes)
            if allowed > 0, let head = buffer.readSlice(length: allowed) {
                passed += allowed
                output(.data(head))
            }
            if buffer.readableBytes > 0 { pipe.dropped(buffer.readableBytes) }
            if passed >= limit {
                ended = true
                output(.end)
            }
        }
    }
}
