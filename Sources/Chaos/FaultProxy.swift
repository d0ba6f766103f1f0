import Logging
import NIOCore
import NIOPosix
import Synchronization

/// One named proxy: a TCP listener whose every accepted connection opens a connection to
/// `upstream` and pipes bytes both ways through the proxy's toxics.
///
/// Changes come from ``FaultProxyServer`` (one at a time); connections read the toxics under the
/// same lock, and each hears of a change on its own event loop.
final class FaultProxy: Sendable {
    let name: String
    private let seed: UInt64
    private let group: any EventLoopGroup
    private let logger: Logger
    private let state: Mutex<State>

    private struct State {
        var listen: HostPort
        var upstream: HostPort
        var enabled: Bool
        var toxics: [ActiveToxic] = []
        var revisions: UInt64 = 0
        var listener: Channel?
        /// The port held while the proxy is down (``PortReservation``).
        var reservation: PortReservation?
        var accepting = false
        var links: [UInt64: NIOLoopBound<ProxyLink>] = [:]
        var connections: UInt64 = 0
    }

    /// Reads start at 64 KB (NIO's default starts at 2 KB), so a large frame crosses in one read
    /// and one write rather than several.
    static let receiveBuffers = AdaptiveRecvByteBufferAllocator(minimum: 4096, initial: 64 * 1024, maximum: 1024 * 1024)

    init(definition: ProxyDefinition, seed: UInt64, group: any EventLoopGroup, logger: Logger) throws {
        name = definition.name
        self.seed = seed
        self.group = group
        var logger = logger
        logger[metadataKey: "proxy"] = "\(definition.name)"
        self.logger = logger
        state = Mutex(
            State(
                listen: try HostPort(parsing: definition.listen, field: "listen"),
                upstream: try HostPort(parsing: definition.upstream, field: "upstream"), enabled: definition.enabled))
    }

    /// The proxy as the API shows it (`listen` with the real port once bound).
    var definition: ProxyDefinition {
        state.withLock { state in
            ProxyDefinition(
                name: name, listen: state.listen.description, upstream: state.upstream.description,
                enabled: state.enabled, toxics: state.toxics.map(\.toxic))
        }
    }

    var listenAddress: String { state.withLock { $0.listen.description } }

    /// Connections open now.
    var connectionCount: Int { state.withLock { $0.links.count } }

    /// Connections accepted since the proxy was made (open or closed since).
    var connectionsAccepted: UInt64 { state.withLock { $0.connections } }

    // MARK: - Listening

    /// Binds the listener when the proxy is enabled and not yet listening.
    /// - Throws: ``FaultProxyError`` (500) when the address cannot be bound.
    func start() async throws {
        guard let (address, reserved) = state.withLock({ $0.enabled && $0.listener == nil ? ($0.listen, $0.reservation != nil) : nil }) else {
            return
        }
        let channel: Channel
        do {
            channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // Rebinding beside the reservation that holds the port (and holding it the same way later).
                .serverChannelOption(.socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: reserved ? 1 : 0)
                .childChannelOption(.autoRead, value: false)
                .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
                .childChannelOption(.recvAllocator, value: Self.receiveBuffers)
                .childChannelInitializer { [self] channel in
                    accept(channel)
                    return channel.eventLoop.makeSucceededVoidFuture()
                }
                .bind(host: address.host, port: address.port)
                .get()
        } catch {
            throw FaultProxyError.cannotListen(address.description, error)
        }
        let port = channel.localAddress?.port ?? address.port
        state.withLock { state in
            state.listener = channel
            state.reservation = nil
            state.accepting = true
            state.listen.port = port
        }
        logger.info("proxy listening", metadata: ["listen": "\(address.host):\(port)", "upstream": "\(definition.upstream)"])
    }

    /// Stops listening and closes every connection (the proxy is "down").
    /// - Parameter reserving: keep the port bound (refusing connections) until the proxy listens
    ///   again on it (``PortReservation``); false when the proxy goes away or moves.
    func stop(reserving: Bool = false) async {
        let (listener, links) = state.withLock { state in
            state.accepting = false
            defer {
                state.listener = nil
                state.links = [:]
            }
            return (state.listener, Array(state.links.values))
        }
        let address = reserving ? listener?.localAddress : nil
        // Bound before the listener closes when the listener allows it (a rebound one does).
        var reservation = address.flatMap { try? PortReservation($0) }
        try? await listener?.close()
        if reservation == nil, let address { reservation = try? PortReservation(address) }
        // A proxy already down keeps its reservation; one that goes away or moves gives it up.
        if reservation != nil || !reserving { state.withLock { $0.reservation = reservation } }
        for link in links {
            try? await link.eventLoop.submit { link.value.close(reset: false) }.get()
        }
    }

    /// Takes the proxy down or brings it back (on the same address, the real port included).
    func setEnabled(_ enabled: Bool) async throws {
        state.withLock { $0.enabled = enabled }
        if enabled { try await start() } else { await stop(reserving: true) }
    }

    /// Moves the proxy to new addresses: as in Toxiproxy, its open connections are closed and new
    /// ones go to the new addresses.
    func move(listen: HostPort?, upstream: HostPort?) async throws {
        let current = state.withLock { ($0.listen, $0.upstream) }
        let newListen = listen ?? current.0
        let newUpstream = upstream ?? current.1
        guard newListen != current.0 || newUpstream != current.1 else { return }
        if newListen == current.0 {
            // Only the upstream moves: the listener stays bound. Closing and rebinding it would
            // leave the port free for a moment, and any outgoing connection on the machine may
            // take a free port as its local one (then the rebind fails with EADDRINUSE).
            let links = state.withLock { state in
                state.upstream = newUpstream
                defer { state.links = [:] }
                return Array(state.links.values)
            }
            for link in links {
                try? await link.eventLoop.submit { link.value.close(reset: false) }.get()
            }
            try await start()  // binds only when enabled and not listening (an earlier bind failed)
            return
        }
        await stop()
        state.withLock { state in
            state.reservation = nil
            state.listen = newListen
            state.upstream = newUpstream
        }
        try await start()
    }

    private func accept(_ channel: Channel) {
        let admitted: (UInt64, [ActiveToxic], HostPort)? = state.withLock { state in
            guard state.accepting else { return nil }
            state.connections += 1
            return (state.connections, state.toxics, state.upstream)
        }
        guard let (number, toxics, upstream) = admitted else {
            channel.close(promise: nil)
            return
        }
        let seed = self.seed
        let name = self.name
        let link = ProxyLink(
            number: number, downstream: channel, toxics: toxics,
            random: ChaosRandom(mixing: seed, ChaosRandom.hash(name), number),
            applies: { active in
                ToxicityDraw.applies(
                    seed: seed, proxy: name, connection: number, toxic: active.toxic.name, revision: active.revision,
                    toxicity: active.toxic.toxicity)
            },
            onClose: { [weak self] number in self?.forget(number) },
            logger: logger)
        let bound = NIOLoopBound(link, eventLoop: channel.eventLoop)
        // Registered under the lock with the toxics as they are now: a change made between the
        // two locks is caught here, later ones reach the link through `change`.
        let latest: [ActiveToxic]? = state.withLock { state in
            guard state.accepting else { return nil }
            state.links[number] = bound
            return state.toxics
        }
        guard let latest else {
            link.close(reset: false)
            return
        }
        if latest != toxics { link.apply(latest) }
        do {
            try channel.pipeline.syncOperations.addHandler(LinkSideHandler(link: link, side: .downstream))
        } catch {
            link.close(reset: false)
            return
        }
        link.start(upstream: upstream)
    }

    private func forget(_ number: UInt64) {
        _ = state.withLock { $0.links.removeValue(forKey: number) }
    }

    // MARK: - Toxics

    var toxics: [Toxic] { state.withLock { $0.toxics.map(\.toxic) } }

    func toxic(named name: String) throws -> Toxic {
        guard let found = state.withLock({ $0.toxics.first { $0.toxic.name == name } }) else {
            throw FaultProxyError.toxicNotFound(name)
        }
        return found.toxic
    }

    /// - Throws: ``FaultProxyError`` (409) when a toxic of that name exists.
    func add(_ toxic: Toxic) async throws -> Toxic {
        try await change { toxics, revisions in
            guard !toxics.contains(where: { $0.toxic.name == toxic.name }) else {
                throw FaultProxyError.toxicAlreadyExists(toxic.name)
            }
            revisions += 1
            toxics.append(ActiveToxic(toxic: toxic, revision: revisions))
        }
        return toxic
    }

    /// - Throws: ``FaultProxyError`` (404) when there is no such toxic, (400) for bad attributes.
    func update(toxic name: String, with update: (Toxic) throws -> Toxic) async throws -> Toxic {
        var result: Toxic?
        try await change { toxics, revisions in
            guard let index = toxics.firstIndex(where: { $0.toxic.name == name }) else {
                throw FaultProxyError.toxicNotFound(name)
            }
            var updated = try update(toxics[index].toxic)
            updated.name = name
            updated.stream = toxics[index].toxic.stream
            revisions += 1
            toxics[index] = ActiveToxic(toxic: updated, revision: revisions)
            result = updated
        }
        guard let result else { throw FaultProxyError.toxicNotFound(name) }
        return result
    }

    /// - Throws: ``FaultProxyError`` (404) when there is no such toxic.
    func remove(toxic name: String) async throws {
        try await change { toxics, _ in
            guard let index = toxics.firstIndex(where: { $0.toxic.name == name }) else {
                throw FaultProxyError.toxicNotFound(name)
            }
            toxics.remove(at: index)
        }
    }

    func removeAllToxics() async {
        try? await change { toxics, _ in toxics.removeAll() }
    }

    /// Applies `body` to the toxics and tells every open connection, each on its event loop;
    /// returns once they all have the change (as Toxiproxy does), so bytes sent after a change
    /// meet the new toxics.
    private func change(_ body: (inout [ActiveToxic], inout UInt64) throws -> Void) async throws {
        let (toxics, links) = try state.withLock { state in
            try body(&state.toxics, &state.revisions)
            return (state.toxics, Array(state.links.values))
        }
        for link in links {
            try? await link.eventLoop.submit { link.value.apply(toxics) }.get()
        }
    }
}
