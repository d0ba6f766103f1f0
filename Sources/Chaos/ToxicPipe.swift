import NIOCore

/// A toxic as a proxy holds it: the toxic and a revision that changes when it is updated, so
/// connections redraw its toxicity and restart it, as Toxiproxy does.
struct ActiveToxic: Sendable, Hashable {
    struct Key: Hashable {
        var name: String
        var revision: UInt64
    }

    var toxic: Toxic
    var revision: UInt64

    var key: Key { Key(name: toxic.name, revision: revision) }
}

/// Whether a toxic applies to a connection: a draw from the seed and the values that identify the
/// decision, never from a shared stream, so that the same seed gives the same decisions
/// whatever the threads do. Toxicity 1 always applies, 0 never does.
public enum ToxicityDraw {
    public static func applies(
        seed: UInt64, proxy: String, connection: UInt64, toxic: String, revision: UInt64 = 0, toxicity: Double
    ) -> Bool {
        var random = ChaosRandom(mixing: seed, ChaosRandom.hash(proxy), connection, ChaosRandom.hash(toxic), revision)
        return random.nextDouble() < toxicity
    }
}

/// One direction of one proxied connection: reads from `source`, runs the bytes through the
/// chain of toxics that apply to this connection, writes them to `sink`.
///
/// Backpressure: `source` has auto-read off and is asked for more only while the sink is
/// writable and less than ``highWater`` bytes are held inside the chain.
/// Lives on the connection's event loop.
final class ToxicPipe {
    /// Bytes held in the chain above which reading from the source pauses.
    static let highWater = 256 * 1024

    let stream: ToxicStream
    unowned let link: ProxyLink
    var source: Channel?
    var sink: Channel?
    var random: ChaosRandom
    private(set) var stages: [ToxicStage] = []
    /// Bytes read from the source and not yet written to the sink or dropped.
    private var held = 0
    private var readRequested = false
    /// Between a channelRead and its channelReadComplete: writes wait for one flush at the end.
    private var inReadCycle = false
    private var unflushed = false

    var eventLoop: EventLoop { link.downstream.eventLoop }
    var isFinished: Bool { link.isClosed }

    init(stream: ToxicStream, link: ProxyLink, random: ChaosRandom) {
        self.stream = stream
        self.link = link
        self.random = random
    }

    // MARK: - From the source channel

    func receive(_ buffer: ByteBuffer) {
        guard !isFinished else { return }
        held += buffer.readableBytes
        inReadCycle = true
        enter(.data(buffer))
    }

    func receiveEnd() {
        guard !isFinished else { return }
        enter(.end)
    }

    func readComplete() {
        inReadCycle = false
        if unflushed, let sink {
            unflushed = false
            sink.flush()
        }
        readRequested = false
        pump()
    }

    /// Asks the source for more when there is room.
    func pump() {
        // A read asked of a channel NIO has not finished activating is lost: wait for channelActive.
        guard !isFinished, !readRequested, held < Self.highWater, let source, source.isActive, let sink, sink.isWritable
        else { return }
        readRequested = true
        source.read()
    }

    private func enter(_ item: ChainItem) {
        if let first = stages.first { first.input(item) } else { deliver(item) }
    }

    // MARK: - To the sink

    /// The end of the chain: bytes to the sink; the end of the stream closes the connection once
    /// everything before it is written.
    func deliver(_ item: ChainItem) {
        guard !isFinished, let sink else { return }
        switch item {
        case .data(let buffer):
            held -= buffer.readableBytes
            if inReadCycle {
                sink.write(buffer, promise: nil)
                unflushed = true
            } else {
                sink.writeAndFlush(buffer, promise: nil)
            }
            pump()
        case .end:
            // Writes complete in order: once this empty one is done, everything before it is out.
            let link = self.link
            sink.writeAndFlush(ByteBuffer()).assumeIsolated().whenComplete { _ in link.close(reset: false) }
        }
    }

    /// A stage dropped `count` bytes (timeout, limit_data, reset_peer).
    func dropped(_ count: Int) {
        held -= count
        pump()
    }

    func resetConnection() {
        link.close(reset: true)
    }

    // MARK: - The chain

    /// Rebuilds the chain for the proxy's current toxics: unchanged toxics keep their stage (and
    /// what it holds), removed ones pass on what they held, new ones start empty.
    func apply(_ toxics: [ActiveToxic], applies: (ActiveToxic) -> Bool) {
        let wanted = toxics.filter { $0.toxic.stream == stream && applies($0) }
        let old = stages
        var kept = Set<ActiveToxic.Key>()
        var fresh: [ToxicStage] = []
        let rebuilt: [ToxicStage] = wanted.map { active in
            if let existing = old.first(where: { $0.key == active.key }) {
                kept.insert(active.key)
                return existing
            }
            let stage = ToxicStage.make(active, pipe: self)
            fresh.append(stage)
            return stage
        }
        for (index, stage) in rebuilt.enumerated() {
            if index + 1 < rebuilt.count {
                let next = rebuilt[index + 1]
                stage.output = { [unowned next] item in next.input(item) }
            } else {
                stage.output = { [unowned self] item in self.deliver(item) }
            }
        }
        stages = rebuilt
        for stage in fresh { stage.start() }
        // Newest data sits in the earliest stages: pass on what later removed stages held first.
        for (index, removed) in old.enumerated().reversed() where !kept.contains(removed.key) {
            let items = removed.drain()
            guard !items.isEmpty else { continue }
            let successor = old[(index + 1)...].first { kept.contains($0.key) }
            for item in items {
                if let successor { successor.input(item) } else { deliver(item) }
            }
        }
    }

    /// Stops every stage's timers (the connection is closing).
    func stop() {
        for stage in stages { _ = stage.drain() }
    }
}

