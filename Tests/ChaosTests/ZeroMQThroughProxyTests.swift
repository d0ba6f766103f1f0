import Chaos
import FleetTesting
import Foundation
import Testing
import ZeroMQ

/// A real ZeroMQ DEALER → ROUTER pair talking through the proxy, as devices and the coordinator do.
@Suite struct ZeroMQThroughProxyTests {
    @Test func dealerAndRouterTalkThroughTheProxy() async throws {
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "chaos-zmq")
        let router = try await loop.makeSocket(.router)
        let endpoint = try await router.bind("tcp://127.0.0.1:*")
        let routerPort = try #require(endpoint.split(separator: ":").last)
        let server = FaultProxyServer(seed: 3)
        let proxy = try await server.create(ProxyDefinition(name: "coordinator", upstream: "127.0.0.1:\(routerPort)"))

        var options = SocketOptions()
        options.routingID = Array("device-1".utf8)
        let dealer = try await loop.makeSocket(.dealer, options: options)
        try await dealer.connect("tcp://\(proxy.listen)")

        let big = testBytes(200_000, seed: 11)
        for (index, body) in [Array("hello".utf8), big].enumerated() {
            try await dealer.send([[UInt8(index)], body])
            let request = try await firstElement(of: router.messages, "the request at the router")
            #expect(request == [Array("device-1".utf8), [UInt8(index)], body])
            try await router.send([request[0], Array("reply".utf8), body])
            let reply = try await firstElement(of: dealer.messages, "the reply at the dealer")
            #expect(reply == [Array("reply".utf8), body])
        }
        #expect(try await server.connectionCount("coordinator") == 1)

        await dealer.close()
        await router.close()
        await server.shutdown()
        await loop.shutdown()
        context.shutdown()
    }
}
