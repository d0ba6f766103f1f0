// `signfleet-bench proxy [seconds]`: what the TCP fault proxy adds with no toxics.
//
// ZeroMQ DEALER -> ROUTER echo round trips, one DEALER connected straight to the ROUTER and one
// through a `signfleet proxy` (Chaos.FaultProxyServer, in this process), measured alternately
// in the same run; the report shows the proxied rate as a ratio of the direct one.
import Chaos
import Foundation
import ZeroMQ

func proxyBenchmark(_ arguments: [String]) async throws {
    let seconds = arguments.first.flatMap(Double.init) ?? 2.0
    let context = try ZMQContext()
    let serverLoop = try ZMQIOLoop(context: context, label: "bench-proxy-server")
    let clientLoop = try ZMQIOLoop(context: context, label: "bench-proxy-client")
    let router = try await serverLoop.makeSocket(.router)
    let endpoint = try await router.bind("tcp://127.0.0.1:*")
    let echo = Task(executorPreference: serverLoop) {
        for try await message in router.messages { try await router.send(message) }
    }
    guard let routerPort = endpoint.split(separator: ":").last else { throw ProxyBenchmarkFailure(message: "no port in \(endpoint)") }

    let proxies = FaultProxyServer(seed: 1)
    let proxy = try await proxies.create(ProxyDefinition(name: "bench", upstream: "127.0.0.1:\(routerPort)"))
    let direct = try await clientLoop.makeSocket(.dealer)
    try await direct.connect(endpoint)
    let proxied = try await clientLoop.makeSocket(.dealer)
    try await proxied.connect("tcp://\(proxy.listen)")

    for (size, label) in [(64, "64B"), (6 * 1024, "6KB")] {
        // Direct and proxied alternate in halves, so a busy moment hits both alike.
        var totals: [String: (trips: Double, elapsed: Double)] = [:]
        for _ in 0..<2 {
            for (name, socket) in [("direct", direct), ("via_proxy", proxied)] {
                let (trips, elapsed) = try await Task(executorPreference: clientLoop) {
                    try await echoRoundTrips(socket, payloadSize: size, seconds: seconds / 2)
                }.value
                totals[name, default: (0, 0)].trips += trips
                totals[name, default: (0, 0)].elapsed += elapsed
            }
        }
        for (name, total) in totals.sorted(by: { $0.key < $1.key }) {
            Report.emit("proxy", "\(name).rtt.\(label).per_s", total.trips / total.elapsed, "rt/s")
            Report.emit("proxy", "\(name).rtt.\(label).mean_us", total.elapsed / total.trips * 1e6, "us")
        }
        if let viaProxy = totals["via_proxy"], let straight = totals["direct"] {
            let added = (viaProxy.elapsed / viaProxy.trips - straight.elapsed / straight.trips) * 1e6
            Report.emit("proxy", "added_latency.rtt.\(label).us", added, "us")
        }
    }

    await direct.close()
    await proxied.close()
    await router.close()
    _ = await echo.result
    await proxies.shutdown()
    await clientLoop.shutdown()
    await serverLoop.shutdown()
    context.shutdown()
}

/// Sequential request/reply round trips for `seconds` after a 200 ms warm-up: (trips, seconds).
private func echoRoundTrips(_ socket: AsyncSocket, payloadSize: Int, seconds: Double) async throws -> (Double, Double) {
    let payload = [UInt8](repeating: 0x78, count: payloadSize)
    let clock = ContinuousClock()
    func trip() async throws {
        try await socket.send([payload])
        guard let reply = try await socket.receive(), reply.count == 1, reply[0].count == payloadSize else {
            throw ProxyBenchmarkFailure(message: "bad or missing echo")
        }
    }
    let warmUpEnd = clock.now.advanced(by: .milliseconds(200))
    while clock.now < warmUpEnd { try await trip() }
    var trips = 0
    let start = clock.now
    let end = start.advanced(by: .milliseconds(Int64(seconds * 1000)))
    repeat {
        for _ in 0..<64 { try await trip() }
        trips += 64
    } while clock.now < end
    let (wholeSeconds, attoseconds) = start.duration(to: clock.now).components
    return (Double(trips), Double(wholeSeconds) + Double(attoseconds) / 1e18)
}

private struct ProxyBenchmarkFailure: Error { var message: String }
