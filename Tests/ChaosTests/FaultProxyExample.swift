import Chaos
import FleetTesting
import Testing

/// docs/fault-proxy.md's "From Swift" (the doc shows this function's body): the control API at
/// `api`, the coordinator at `coordinator`.
func faultProxyExample(api: String, coordinator: String) async throws -> ProxyDefinition {
    // BEGIN EXAMPLE fault-proxy-client
    let client = FaultProxyClient(address: api)                    // "127.0.0.1:8474", as `signfleet proxy` prints it
    let proxy = try await client.create(ProxyDefinition(name: "coordinator", upstream: coordinator))   // "127.0.0.1:5555"
    try await client.addToxic(Toxic(name: "slow", kind: .latency(latency: 300, jitter: 50)), to: "coordinator")
    try await client.setEnabled("coordinator", false)
    try await client.reset()
    // END EXAMPLE
    return proxy
}

@Suite("docs/fault-proxy.md: from Swift")
struct FaultProxyExampleTests {
    @Test("the Swift example in docs/fault-proxy.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("fault-proxy-client", in: "docs/fault-proxy.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("the example creates a proxy, adds a toxic, disables it and resets, over the real control API")
    func runs() async throws {
        let rig = try await APIRig()
        let proxy = try await faultProxyExample(api: rig.address, coordinator: rig.upstream.address)
        #expect(proxy.name == "coordinator" && proxy.upstream == rig.upstream.address)
        #expect(proxy.listen != "127.0.0.1:0", "the answer has the real listen address")

        // After the reset: enabled, no toxics, and bytes go through to the upstream and back.
        let client = FaultProxyClient(address: rig.address)
        let after = try await client.proxy("coordinator")
        #expect(after.enabled && after.toxics.isEmpty && after.listen == proxy.listen)
        let port = try #require(Int(proxy.listen.split(separator: ":").last ?? ""))
        let connection = try await RawClient.connect(port: port)
        try connection.send([1, 2, 3])
        let echoed = await connection.read(3)
        #expect(echoed.bytes == [1, 2, 3])
        try await rig.stop()
    }
}
