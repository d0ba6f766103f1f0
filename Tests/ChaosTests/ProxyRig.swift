import Chaos
import Foundation
import Logging

/// A fault-proxy server with one proxy `"p"` in front of a test upstream.
struct ProxyRig {
    let server: FaultProxyServer
    let upstream: TestUpstream
    let proxy: ProxyDefinition

    var port: Int { Int(proxy.listen.split(separator: ":").last ?? "") ?? 0 }

    init(seed: UInt64 = 42, upstream mode: TestUpstream.Mode = .echo, toxics: [Toxic] = []) async throws {
        var logger = Logger(label: "chaos-tests")
        logger.logLevel = .critical
        server = FaultProxyServer(seed: seed, logger: logger)
        upstream = try await TestUpstream(mode)
        proxy = try await server.create(ProxyDefinition(name: "p", upstream: upstream.address, toxics: toxics))
    }

    func stop() async {
        await server.shutdown()
        await upstream.close()
    }
}
