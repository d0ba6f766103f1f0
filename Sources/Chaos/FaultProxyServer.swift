import Logging
import NIOCore
import NIOPosix

/// Every proxy of one `signfleet proxy` process, and the operations of Toxiproxy's API on them.
///
/// Operations run one at a time (binding a listener suspends, and two creates of one name must
/// not both succeed). Errors are ``FaultProxyError``s carrying Toxiproxy's status codes.
///
/// ```swift
/// let server = FaultProxyServer(seed: 42)
/// let proxy = try await server.create(ProxyDefinition(name: "coordinator", upstream: "127.0.0.1:5555"))
/// _ = try await server.addToxic(Toxic(kind: .latency(latency: 200, jitter: 20)), to: "coordinator")
/// print(proxy.listen)   // 127.0.0.1:<real port>
/// ```
public actor FaultProxyServer {
    /// The seed every random choice derives from (print it: it replays a run).
    public nonisolated let seed: UInt64
    private let group: any EventLoopGroup
    private let logger: Logger
    private var proxies: [String: FaultProxy] = [:]
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init(seed: UInt64, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger? = nil) {
        self.seed = seed
        self.group = group
        self.logger = logger ?? Logger(label: "signfleet.proxy")
    }

    // MARK: - Proxies

    /// Every proxy, by name (`GET /proxies`).
    public func all() -> [String: ProxyDefinition] {
        proxies.mapValues(\.definition)
    }

    /// `GET /proxies/{name}`.
    public func proxy(named name: String) throws -> ProxyDefinition {
        try existing(name).definition
    }

    /// Creates and (when enabled) starts a proxy with its toxics (`POST /proxies`).
    /// - Throws: ``FaultProxyError``: 409 when the name is taken, 500 when the address cannot be bound.
    public func create(_ definition: ProxyDefinition) async throws -> ProxyDefinition {
        try await exclusively {
            guard proxies[definition.name] == nil else { throw FaultProxyError.proxyAlreadyExists(definition.name) }
            return try await makeProxy(definition)
        }
    }

    /// Creates or replaces several proxies (`POST /populate`): a proxy that exists with the same
    /// listen and upstream addresses is kept (its toxics too) and only its `enabled` follows the
    /// definition; a different one is replaced. Stops at the first failure, keeping what was done.
    public func populate(_ definitions: [ProxyDefinition]) async throws -> [ProxyDefinition] {
        try await exclusively {
            var result: [ProxyDefinition] = []
            for definition in definitions {
                if let current = proxies[definition.name] {
                    let shown = current.definition
                    let listen = try HostPort(parsing: definition.listen, field: "listen")
                    if shown.upstream == (try HostPort(parsing: definition.upstream, field: "upstream")).description
                        && (shown.listen == listen.description || (listen.port == 0 && shown.listen.hasPrefix(listen.host + ":")))
                    {
                        try await current.setEnabled(definition.enabled)
                        result.append(current.definition)
                        continue
                    }
                    await current.stop()
                    proxies[definition.name] = nil
                }
                result.append(try await makeProxy(definition))
            }
            return result
        }
    }

    /// Changes a proxy's addresses or `enabled` (`POST`/`PATCH /proxies/{name}`).
    public func update(_ name: String, _ update: ProxyUpdate) async throws -> ProxyDefinition {
        try await exclusively {
            let proxy = try existing(name)
            try await proxy.move(
                listen: try update.listen.map { try HostPort(parsing: $0, field: "listen") },
                upstream: try update.upstream.map { try HostPort(parsing: $0, field: "upstream") })
            if let enabled = update.enabled { try await proxy.setEnabled(enabled) }
            return proxy.definition
        }
    }

    /// Takes a proxy down or brings it back up: down closes its connections and refuses new ones.
    public func setEnabled(_ name: String, _ enabled: Bool) async throws -> ProxyDefinition {
        try await update(name, ProxyUpdate(enabled: enabled))
    }

    /// Stops and forgets a proxy (`DELETE /proxies/{name}`).
    public func delete(_ name: String) async throws {
        try await exclusively {
            let proxy = try existing(name)
            await proxy.stop()
            proxies[name] = nil
        }
    }

    /// Enables every proxy and removes every toxic (`POST /reset`).
    public func reset() async throws {
        try await exclusively {
            for proxy in proxies.values {
                await proxy.removeAllToxics()
                try await proxy.setEnabled(true)
            }
        }
    }

    /// Stops every proxy (process shutdown).
    public func shutdown() async {
        await exclusively {
            for proxy in proxies.values { await proxy.stop() }
            proxies = [:]
        }
    }

    /// Connections a proxy has open now (for tests and status).
    public func connectionCount(_ name: String) throws -> Int {
        try existing(name).connectionCount
    }

    /// Connections a proxy has accepted since it was made, closed ones included (for tests: a
    /// client that redials shows here).
    public func connectionsAccepted(_ name: String) throws -> UInt64 {
        try existing(name).connectionsAccepted
    }

    // MARK: - Toxics

    /// `GET /proxies/{name}/toxics`.
    public func toxics(of proxy: String) throws -> [Toxic] {
        try existing(proxy).toxics
    }

    /// `GET /proxies/{name}/toxics/{toxic}`.
    public func toxic(_ name: String, of proxy: String) throws -> Toxic {
        try existing(proxy).toxic(named: name)
    }

    /// Adds a toxic; open connections get it at once (`POST /proxies/{name}/toxics`).
    /// - Throws: ``FaultProxyError``: 404 for an unknown proxy, 409 when the toxic name is taken.
    @discardableResult
    public func addToxic(_ toxic: Toxic, to proxy: String) async throws -> Toxic {
        try await existing(proxy).add(toxic)
    }

    /// Changes a toxic's attributes or toxicity (`POST /proxies/{name}/toxics/{toxic}`).
    @discardableResult
    public func updateToxic(_ name: String, of proxy: String, _ update: ToxicUpdate) async throws -> Toxic {
        try await existing(proxy).update(toxic: name) { try update.applied(to: $0) }
    }

    /// `DELETE /proxies/{name}/toxics/{toxic}`.
    public func removeToxic(_ name: String, from proxy: String) async throws {
        try await existing(proxy).remove(toxic: name)
    }

    // MARK: - Helpers

    private func existing(_ name: String) throws -> FaultProxy {
        guard let proxy = proxies[name] else { throw FaultProxyError.proxyNotFound(name) }
        return proxy
    }

    private func makeProxy(_ definition: ProxyDefinition) async throws -> ProxyDefinition {
        let proxy = try FaultProxy(definition: definition, seed: seed, group: group, logger: logger)
        for toxic in definition.toxics { _ = try await proxy.add(toxic) }
        try await proxy.start()
        proxies[definition.name] = proxy
        return proxy.definition
    }

    /// Runs `body` with no other operation of this server in between (actors are reentrant at
    /// every `await`; binding a listener awaits).
    private func exclusively<T>(_ body: () async throws -> T) async rethrows -> T {
        while busy { await withCheckedContinuation { waiting.append($0) } }
        busy = true
        defer {
            busy = false
            if !waiting.isEmpty { waiting.removeFirst().resume() }
        }
        return try await body()
    }
}
