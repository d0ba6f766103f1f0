import Logging
import NIOCore
import NIOPosix

/// One proxied connection: the accepted downstream channel (the client), the upstream channel
/// it opened to the proxy's upstream, and a ``ToxicPipe`` for each direction.
///
/// Both channels run on the downstream channel's event loop, and the link, its pipes and their
/// stages are only touched there, so none of it needs a lock.
final class ProxyLink {
    let number: UInt64
    let downstream: Channel
    private(set) var upstream: Channel?
    private(set) var toUpstream: ToxicPipe!
    private(set) var toDownstream: ToxicPipe!
    private(set) var isClosed = false
    private var toxics: [ActiveToxic]
    private let applies: (ActiveToxic) -> Bool
    private let onClose: (UInt64) -> Void
    private let logger: Logger

    /// - Parameters:
    ///   - number: the connection's number within its proxy.
    ///   - downstream: the accepted client channel.
    ///   - toxics: the proxy's toxics when the connection opened.
    ///   - random: seeds the two pipes' random sources.
    ///   - applies: the toxicity draw for this connection.
    ///   - onClose: called once when the link closes (the proxy forgets it).
    ///   - logger: where the link logs.
    init(
        number: UInt64, downstream: Channel, toxics: [ActiveToxic], random: ChaosRandom,
        applies: @escaping (ActiveToxic) -> Bool, onClose: @escaping (UInt64) -> Void, logger: Logger
    ) {
        self.number = number
        self.downstream = downstream
        self.toxics = toxics
        self.applies = applies
        self.onClose = onClose
        self.logger = logger
        var random = random
        toUpstream = ToxicPipe(stream: .upstream, link: self, random: ChaosRandom(mixing: random.next(), 1))
        toDownstream = ToxicPipe(stream: .downstream, link: self, random: ChaosRandom(mixing: random.next(), 2))
    }

    /// Opens the upstream connection; closes the client when that fails (as Toxiproxy does).
    func start(upstream address: HostPort) {
        let bound = NIOLoopBound(self, eventLoop: downstream.eventLoop)
        ClientBootstrap(group: downstream.eventLoop)
            .channelOption(.autoRead, value: false)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.recvAllocator, value: FaultProxy.receiveBuffers)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                do {
                    try channel.pipeline.syncOperations.addHandler(LinkSideHandler(link: bound.value, side: .upstream))
                    return channel.eventLoop.makeSucceededVoidFuture()
                } catch {
                    return channel.eventLoop.makeFailedFuture(error)
                }
            }
            .connect(host: address.host, port: address.port)
            .assumeIsolated()
            .whenComplete { result in
                let link = bound.value
                switch result {
                case .success(let channel):
                    link.upstreamConnected(channel)
                case .failure(let error):
                    link.logger.warning(
                        "cannot reach the upstream; closing the client",
                        metadata: ["upstream": "\(address)", "error": "\(error)"])
                    link.close(reset: false)
                }
            }
    }

    private func upstreamConnected(_ channel: Channel) {
        guard !isClosed else {
            channel.close(promise: nil)
            return
        }
        upstream = channel
        toUpstream.source = downstream
        toUpstream.sink = channel
        toDownstream.source = channel
        toDownstream.sink = downstream
        toUpstream.apply(toxics, applies: applies)
        toDownstream.apply(toxics, applies: applies)
        // A channel not active yet is pumped again by its handler's channelActive.
        toUpstream.pump()
        toDownstream.pump()
    }

    /// The proxy's toxics changed.
    func apply(_ toxics: [ActiveToxic]) {
        self.toxics = toxics
        guard !isClosed, upstream != nil else { return }
        toUpstream.apply(toxics, applies: applies)
        toDownstream.apply(toxics, applies: applies)
    }

    /// The pipe that reads from `side`'s channel.
    func pipe(readingFrom side: LinkSideHandler.Side) -> ToxicPipe? {
        guard upstream != nil else { return nil }
        return side == .downstream ? toUpstream : toDownstream
    }

    /// The pipe that writes to `side`'s channel.
    func pipe(writingTo side: LinkSideHandler.Side) -> ToxicPipe? {
        guard upstream != nil else { return nil }
        return side == .downstream ? toDownstream : toUpstream
    }

    /// Closes both sockets; with `reset`, abortively (SO_LINGER 0: the peers get a TCP RST).
    func close(reset: Bool) {
        guard !isClosed else { return }
        isClosed = true
        toUpstream.stop()
        toDownstream.stop()
        for channel in [downstream, upstream].compactMap({ $0 }) {
            if reset, let options = channel as? SocketOptionProvider {
                options.setSoLinger(NIOLinger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
                    channel.close(promise: nil)
                }
            } else {
                channel.close(promise: nil)
            }
        }
        onClose(number)
    }
}

/// Sits on each of a link's two channels and hands their events to the link.
final class LinkSideHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    enum Side { case downstream, upstream }

    let link: ProxyLink
    let side: Side

    init(link: ProxyLink, side: Side) {
        self.link = link
        self.side = side
    }

    func channelActive(context: ChannelHandlerContext) {
        link.pipe(readingFrom: side)?.pump()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        link.pipe(readingFrom: side)?.receive(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        link.pipe(readingFrom: side)?.readComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let pipe = link.pipe(readingFrom: side) { pipe.receiveEnd() } else { link.close(reset: false) }
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        link.pipe(writingTo: side)?.pump()
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        link.close(reset: false)
    }
}
