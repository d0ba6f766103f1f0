import Chaos
import FleetTesting
import Foundation
import Logging
import ServiceLifecycle
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The control API over real HTTP: Toxiproxy's JSON shapes, status codes and error bodies.
final class APIRig: Sendable {
    let server: FaultProxyServer
    let upstream: TestUpstream
    let group: ServiceGroup
    let running: Task<Void, any Error>
    let address: String

    init() async throws {
        var logger = Logger(label: "chaos-api-tests")
        logger.logLevel = .critical
        server = FaultProxyServer(seed: 5, logger: logger)
        upstream = try await TestUpstream()
        let (addresses, announced) = AsyncStream<String>.makeStream()
        let http = FaultProxyHTTPService(
            api: FaultProxyAPI(server: server), host: "127.0.0.1", port: 0, logger: logger,
            onListening: { announced.yield($0) })
        let group = ServiceGroup(services: [http], logger: logger)
        self.group = group
        running = Task { try await group.run() }
        address = try await firstElement(of: addresses, "the control API's address")
    }

    /// Sends a request; returns the status and the body parsed as JSON (nil when empty).
    func call(_ method: String, _ path: String, _ body: String? = nil) async throws -> (Int, Any?) {
        let url = try #require(URL(string: "http://\(address)\(path)"))
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.httpBody = body.map { Data($0.utf8) }
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        let status = try #require(response as? HTTPURLResponse).statusCode
        return (status, data.isEmpty ? nil : try JSONSerialization.jsonObject(with: data))
    }

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await running.value
        await server.shutdown()
        await upstream.close()
    }
}

@Suite struct ControlAPITests {
    /// Asserts a Toxiproxy error body: `{"error": …, "status": code}` whose message mentions `mention`.
    func expectError(_ answer: (Int, Any?), _ code: Int, mentioning mention: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let body = answer.1 as? [String: Any]
        #expect(answer.0 == code, "\(answer)", sourceLocation: sourceLocation)
        #expect(body?["status"] as? Int == code, "\(answer)", sourceLocation: sourceLocation)
        let message = body?["error"] as? String ?? ""
        #expect(message.contains(mention), "\(message)", sourceLocation: sourceLocation)
    }

    @Test func proxiesRoundTripToxiproxyShapes() async throws {
        let rig = try await APIRig()
        let upstream = rig.upstream.address

        let (versionStatus, version) = try await rig.call("GET", "/version")
        #expect(versionStatus == 200 && (version as? [String: Any])?["version"] is String)

        let (created, proxy) = try await rig.call(
            "POST", "/proxies", #"{"name": "coordinator", "listen": "127.0.0.1:0", "upstream": "\#(upstream)"}"#)
        #expect(created == 201)
        let shown = try #require(proxy as? [String: Any])
        #expect(shown["name"] as? String == "coordinator")
        #expect(shown["upstream"] as? String == upstream)
        #expect(shown["enabled"] as? Bool == true)
        #expect((shown["toxics"] as? [Any])?.isEmpty == true)
        let listen = try #require(shown["listen"] as? String)
        #expect(listen.hasPrefix("127.0.0.1:") && listen != "127.0.0.1:0", "the real port: \(listen)")

        expectError(
            try await rig.call("POST", "/proxies", #"{"name": "coordinator", "upstream": "\#(upstream)"}"#), 409,
            mentioning: "proxy already exists")
        expectError(try await rig.call("POST", "/proxies", #"{"name": "x"}"#), 400, mentioning: "missing required field: upstream")
        expectError(try await rig.call("POST", "/proxies", #"{"upstream": "\#(upstream)"}"#), 400, mentioning: "name")
        expectError(try await rig.call("POST", "/proxies", #"{"name": "x", "#), 400, mentioning: "bad request body")
        expectError(
            try await rig.call("POST", "/proxies", #"{"name": "x", "upstream": "nowhere"}"#), 400, mentioning: "upstream")

        let (listed, all) = try await rig.call("GET", "/proxies")
        #expect(listed == 200)
        let byName = try #require(all as? [String: [String: Any]])
        #expect(byName["coordinator"]?["listen"] as? String == listen)

        let (updated, disabled) = try await rig.call("POST", "/proxies/coordinator", #"{"enabled": false}"#)
        #expect(updated == 200 && (disabled as? [String: Any])?["enabled"] as? Bool == false)
        let (patched, enabled) = try await rig.call("PATCH", "/proxies/coordinator", #"{"enabled": true}"#)
        #expect(patched == 200 && (enabled as? [String: Any])?["enabled"] as? Bool == true)
        expectError(try await rig.call("POST", "/proxies/coordinator", #"{"enabled": "yes"}"#), 400, mentioning: "enabled")
        expectError(try await rig.call("GET", "/proxies/nope"), 404, mentioning: "proxy not found")

        let (populated, result) = try await rig.call(
            "POST", "/populate",
            #"[{"name": "coordinator", "listen": "\#(listen)", "upstream": "\#(upstream)"}, {"name": "second", "upstream": "\#(upstream)", "enabled": false}]"#
        )
        #expect(populated == 201)
        let proxies = try #require((result as? [String: Any])?["proxies"] as? [[String: Any]])
        #expect(proxies.map { $0["name"] as? String } == ["coordinator", "second"])
        #expect(proxies[0]["listen"] as? String == listen, "an unchanged proxy is kept")
        #expect(proxies[1]["enabled"] as? Bool == false)
        expectError(try await rig.call("POST", "/populate", #"{"name": "x"}"#), 400, mentioning: "array")

        let (deleted, nothing) = try await rig.call("DELETE", "/proxies/second")
        #expect(deleted == 204 && nothing == nil)
        expectError(try await rig.call("DELETE", "/proxies/second"), 404, mentioning: "proxy not found")
        try await rig.stop()
    }

    @Test func toxicsRoundTripToxiproxyShapes() async throws {
        let rig = try await APIRig()
        _ = try await rig.call("POST", "/proxies", #"{"name": "p", "upstream": "\#(rig.upstream.address)"}"#)

        let (added, toxic) = try await rig.call("POST", "/proxies/p/toxics", #"{"type": "latency", "attributes": {"latency": 100}}"#)
        #expect(added == 200)
        let shown = try #require(toxic as? [String: Any])
        #expect(shown["name"] as? String == "latency_downstream", "Toxiproxy's default name")
        #expect(shown["type"] as? String == "latency")
        #expect(shown["stream"] as? String == "downstream")
        #expect(shown["toxicity"] as? Double == 1)
        #expect(shown["attributes"] as? [String: Int] == ["latency": 100, "jitter": 0])

        let (slicerAdded, slicer) = try await rig.call(
            "POST", "/proxies/p/toxics",
            #"{"name": "cut", "type": "slicer", "stream": "upstream", "toxicity": 0.5, "attributes": {"average_size": 64, "size_variation": 8, "delay": 10}}"#
        )
        #expect(slicerAdded == 200)
        #expect((slicer as? [String: Any])?["toxicity"] as? Double == 0.5)

        expectError(
            try await rig.call("POST", "/proxies/p/toxics", #"{"type": "latency"}"#), 409, mentioning: "toxic already exists")
        expectError(try await rig.call("POST", "/proxies/p/toxics", #"{"type": "lightning"}"#), 400, mentioning: "invalid toxic type")
        expectError(
            try await rig.call("POST", "/proxies/p/toxics", #"{"name": "n", "type": "latency", "attributes": {"latency": -5}}"#), 400,
            mentioning: "\"latency\"")
        expectError(
            try await rig.call("POST", "/proxies/p/toxics", #"{"name": "n", "type": "latency", "attributes": {"lag": 5}}"#), 400,
            mentioning: "\"lag\"")
        expectError(
            try await rig.call("POST", "/proxies/p/toxics", #"{"name": "n", "type": "bandwidth", "stream": "sideways"}"#), 400,
            mentioning: "stream")
        expectError(
            try await rig.call("POST", "/proxies/p/toxics", #"{"name": "n", "type": "bandwidth", "toxicity": 2}"#), 400,
            mentioning: "toxicity")
        expectError(
            try await rig.call("POST", "/proxies/p/toxics", #"{"name": "n", "type": "slicer", "attributes": {"average_size": 4, "size_variation": 9}}"#),
            400, mentioning: "size_variation")
        expectError(try await rig.call("POST", "/proxies/nope/toxics", #"{"type": "latency"}"#), 404, mentioning: "proxy not found")

        let (listed, toxics) = try await rig.call("GET", "/proxies/p/toxics")
        #expect(listed == 200 && (toxics as? [[String: Any]])?.compactMap { $0["name"] as? String } == ["latency_downstream", "cut"])
        let (proxyStatus, proxy) = try await rig.call("GET", "/proxies/p")
        #expect(proxyStatus == 200 && ((proxy as? [String: Any])?["toxics"] as? [Any])?.count == 2)

        let (updated, changed) = try await rig.call(
            "POST", "/proxies/p/toxics/latency_downstream", #"{"attributes": {"jitter": 10}, "toxicity": 0.25}"#)
        #expect(updated == 200)
        #expect((changed as? [String: Any])?["attributes"] as? [String: Int] == ["latency": 100, "jitter": 10])
        #expect((changed as? [String: Any])?["toxicity"] as? Double == 0.25)
        expectError(
            try await rig.call("PATCH", "/proxies/p/toxics/latency_downstream", #"{"attributes": {"rate": 1}}"#), 400,
            mentioning: "\"rate\"")
        expectError(try await rig.call("GET", "/proxies/p/toxics/nope"), 404, mentioning: "toxic not found")

        let (removed, _) = try await rig.call("DELETE", "/proxies/p/toxics/cut")
        #expect(removed == 204)
        expectError(try await rig.call("DELETE", "/proxies/p/toxics/cut"), 404, mentioning: "toxic not found")

        _ = try await rig.call("POST", "/proxies/p", #"{"enabled": false}"#)
        let (reset, _) = try await rig.call("POST", "/reset")
        #expect(reset == 204)
        let (_, afterReset) = try await rig.call("GET", "/proxies/p")
        #expect((afterReset as? [String: Any])?["enabled"] as? Bool == true)
        #expect(((afterReset as? [String: Any])?["toxics"] as? [Any])?.isEmpty == true)
        try await rig.stop()
    }

    @Test func clientDrivesTheAPI() async throws {
        let rig = try await APIRig()
        let client = FaultProxyClient(address: rig.address)
        #expect(try await client.version().contains("signfleet"))
        let proxy = try await client.create(ProxyDefinition(name: "c", upstream: rig.upstream.address))
        #expect(proxy.enabled && proxy.listen != "127.0.0.1:0")
        let toxic = try await client.addToxic(Toxic(name: "cut", kind: .limitData(bytes: 3)), to: "c")
        #expect(toxic == Toxic(name: "cut", kind: .limitData(bytes: 3)))
        let updated = try await client.updateToxic("cut", of: "c", ToxicUpdate(attributes: ["bytes": 2]))
        #expect(updated.kind == .limitData(bytes: 2))
        #expect(try await client.toxics(of: "c") == [updated])

        // The toxic acts on real traffic: two bytes, then the close.
        let port = try #require(Int(proxy.listen.split(separator: ":").last ?? ""))
        let connection = try await RawClient.connect(port: port)
        try connection.send([1, 2, 3, 4])
        let (bytes, stop) = await connection.readToEnd()
        #expect(bytes == [1, 2] && stop == .end)

        try await client.removeToxic("cut", from: "c")
        #expect(try await client.setEnabled("c", false).enabled == false)
        await #expect(throws: SocketFailure.self) { _ = try await RawClient.connect(port: port) }
        try await client.reset()
        #expect(try await client.proxy("c").enabled)

        let populated = try await client.populate([ProxyDefinition(name: "d", upstream: rig.upstream.address, enabled: false)])
        #expect(populated.map(\.name) == ["d"])
        #expect(Set(try await client.proxies().keys) == ["c", "d"])
        try await client.delete("d")
        do {
            _ = try await client.proxy("d")
            Issue.record("a deleted proxy is still there")
        } catch let error as FaultProxyError {
            #expect(error.status == 404 && error.message.contains("proxy not found"))
        }
        try await rig.stop()
    }
}
