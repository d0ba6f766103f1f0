import Chaos
import FleetTesting
import Foundation
import Testing

/// `signfleet proxy` as a real process: announces its addresses, proxies, answers the API,
/// exits 0 on a signal, and refuses a bad config file naming the field.
@Suite struct ProxyCommandProcessTests {
    func binary() throws -> String {
        let path = ProcessInfo.processInfo.environment["SIGNFLEET_BIN"] ?? FileManager.default.currentDirectoryPath + "/.build/debug/signfleet"
        try #require(FileManager.default.isExecutableFile(atPath: path), "signfleet not found at \(path); build it or set SIGNFLEET_BIN")
        return path
    }

    func writeConfig(_ json: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("proxies-\(UUID().uuidString).json").path
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func proxiesFromTheConfigAndStopsOnASignal(signal: Int32) async throws {
        let upstream = try await TestUpstream()
        let config = try writeConfig(#"[{"name": "echo", "listen": "127.0.0.1:0", "upstream": "\#(upstream.address)"}]"#)
        defer { try? FileManager.default.removeItem(atPath: config) }
        let process = try ChildProcess.launch(
            try binary(), ["proxy", "--api", "127.0.0.1:0", "--config", config, "--seed", "77"], name: "proxy")
        defer { Task { await process.terminate() } }

        let seedLine = try await process.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("seed ") }
        #expect(seedLine == "seed 77")
        let apiLine = try await process.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("api ") }
        let proxyLine = try await process.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("proxy echo ") }
        let api = String(apiLine.dropFirst("api ".count))
        let listen = String(proxyLine.dropFirst("proxy echo ".count))
        #expect(api.hasPrefix("127.0.0.1:") && !api.hasSuffix(":0"), "\(api)")
        let port = try #require(Int(listen.split(separator: ":").last ?? ""))
        #expect(port != 0)

        let client = FaultProxyClient(address: api)
        #expect(try await client.proxy("echo").listen == listen)
        try await client.addToxic(Toxic(name: "cut", kind: .limitData(bytes: 1)), to: "echo")
        let connection = try await RawClient.connect(port: port)
        try connection.send([4, 2])
        let (bytes, stop) = await connection.readToEnd()
        #expect(bytes == [4] && stop == .end)

        process.signal(signal)
        #expect(try await process.waitForExit(timeout: .seconds(20)) == 0, "\(process.output)")
        await #expect(throws: SocketFailure.self) { _ = try await RawClient.connect(port: port) }
        await upstream.close()
    }

    @Test func aBadConfigIsRefusedNamingTheField() async throws {
        let config = try writeConfig(#"[{"name": "x", "upstream": "127.0.0.1:1", "toxics": [{"type": "latency", "attributes": {"latency": -1}}]}]"#)
        defer { try? FileManager.default.removeItem(atPath: config) }
        let process = try ChildProcess.launch(try binary(), ["proxy", "--api", "127.0.0.1:0", "--config", config], name: "proxy")
        defer { Task { await process.terminate() } }
        let status = try await process.waitForExit(timeout: .seconds(20))
        #expect(status != 0)
        #expect(process.output.contains("\"latency\""), "\(process.output)")
    }
}
