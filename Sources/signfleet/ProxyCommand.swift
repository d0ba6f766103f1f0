import ArgumentParser
import Chaos
import Foundation
import Logging
import ServiceLifecycle

/// `signfleet proxy`: the TCP fault proxy between devices and the coordinator, with a
/// Toxiproxy-compatible HTTP control API. See docs/fault-proxy.md.
struct ProxyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "proxy",
        abstract: "Run the TCP fault proxy (Toxiproxy-style toxics, Toxiproxy-compatible control API).",
        discussion: """
            Prints `seed <n>`, then `api <host:port>` once the control API listens, then \
            `proxy <name> <listen host:port>` for each proxy of --config (a JSON array of proxies, as \
            Toxiproxy's config file and POST /populate take). Port 0 picks a free port; the lines show \
            the real one. Stops cleanly on SIGINT or SIGTERM (exit code 0).
            """
    )

    @Option(help: "Control API host:port (Toxiproxy's port by default); port 0 picks a free port.")
    var api: String = "127.0.0.1:8474"

    @Option(help: "JSON file with an array of proxies to create at start.")
    var config: String?

    @Option(help: "Seed of every random choice (toxicity draws, jitter, slice sizes); random when omitted, always printed.")
    var seed: UInt64?

    @OptionGroup var logging: LoggingOptions

    func apiAddress() throws -> (host: String, port: Int) { try hostAndPort(api, option: "--api") }

    func validate() throws {
        _ = try apiAddress()
    }

    /// The proxies of --config.
    func configuredProxies() throws -> [ProxyDefinition] {
        guard let config else { return [] }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: config))
        } catch {
            throw ValidationError("cannot read --config \(config): \(error.localizedDescription)")
        }
        do {
            return try JSONDecoder().decode([ProxyDefinition].self, from: data)
        } catch let error as FaultProxyError {
            throw ValidationError("--config \(config): \(error.message)")
        } catch {
            throw ValidationError("--config \(config) must hold a JSON array of proxies: \(error)")
        }
    }

    func run() async throws {
        let logger = try logging.makeLogger(label: "proxy")
        let (host, port) = try apiAddress()
        let definitions = try configuredProxies()
        let seed = self.seed ?? UInt64.random(in: 0...UInt64(Int64.max))
        announce("seed \(seed)")
        let server = FaultProxyServer(seed: seed, logger: logger)
        let created: [ProxyDefinition]
        do {
            created = try await server.populate(definitions)
        } catch let error as FaultProxyError {
            await server.shutdown()
            throw ValidationError("--config \(config ?? ""): \(error.message)")
        }
        let http = FaultProxyHTTPService(
            api: FaultProxyAPI(server: server), host: host, port: port, logger: logger,
            onListening: { address in
                announce("api \(address)")
                for proxy in created { announce("proxy \(proxy.name) \(proxy.listen)") }
            })
        do {
            try await ShutdownSignals.run([http], logger: logger)
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
        logger.info("proxy stopped")
    }
}
