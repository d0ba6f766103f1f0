import FleetTesting
import Foundation
import SignatureCapture
import Testing

@testable import Chaos

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Seeded fuzzing of the fault proxy's control API (issue #14 part 2): request bodies decoded
/// in-process (every refusal a ``FaultProxyError`` with status 400), then a few hundred fuzzed
/// requests over real HTTP (every answer below 500, a refusal a JSON error body, and the API
/// still answering afterwards). `SIGNFLEET_SEED` replays, `SIGNFLEET_FUZZ_ITERATIONS` multiplies.
@Suite struct ControlAPIFuzzTests {
    static let proxy: FuzzJSON = .object([
        "name": .string("coordinator"), "upstream": .string("127.0.0.1:5555"), "enabled": .raw("true"),
        "toxics": .array([toxics[0]]),
    ])
    static let toxics: [FuzzJSON] = [
        .object([
            "name": .string("slow"), "type": .string("latency"), "stream": .string("downstream"), "toxicity": .raw("0.5"),
            "attributes": .object(["latency": .raw("300"), "jitter": .raw("50")]),
        ]),
        .object(["type": .string("slicer"), "stream": .string("upstream"), "attributes": .object(["average_size": .raw("10"), "size_variation": .raw("5"), "delay": .raw("1")])]),
        .object(["type": .string("bandwidth"), "attributes": .object(["rate": .raw("100")])]),
        .object(["type": .string("limit_data"), "toxicity": .raw("1"), "attributes": .object(["bytes": .raw("4096")])]),
        .object(["type": .string("reset_peer"), "attributes": .object(["timeout": .raw("0")])]),
    ]
    static let updates: [FuzzJSON] = [
        .object(["toxicity": .raw("0.25"), "attributes": .object(["latency": .raw("2000")])]),
        .object(["listen": .string("127.0.0.1:0"), "upstream": .string("127.0.0.1:5556"), "enabled": .raw("false")]),
    ]

    /// A value-level mutation (sometimes followed by a byte-level one), or random bytes.
    static func body(_ corpus: [FuzzJSON], using rng: inout SeededRandom) -> Data {
        let base = corpus.randomElement(using: &rng)!
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: return Data(FuzzMutator.randomBytes(count: Int.random(in: 0...40, using: &rng), using: &rng))
        case 1, 2: return Data(FuzzMutator.mutate(Array(base.mutated(using: &rng).rendered().utf8), using: &rng))
        default: return Data(base.mutated(using: &rng).rendered().utf8)
        }
    }

    @Test func requestBodiesDecodeOrAreRefusedWith400() async throws {
        let run = FuzzRun("fuzz proxy control api")
        let start = ContinuousClock.now
        let inputs = run.count(6_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                do {
                    switch index % 5 {
                    case 0: _ = try FaultProxyAPI.decode(ProxyDefinition.self, from: Self.body([Self.proxy], using: &rng))
                    case 1: _ = try FaultProxyAPI.decode([ProxyDefinition].self, from: Self.body([.array([Self.proxy, Self.proxy])], using: &rng))
                    case 2: _ = try FaultProxyAPI.decode(ProxyUpdate.self, from: Self.body(Self.updates, using: &rng))
                    case 3: _ = try FaultProxyAPI.decode(Toxic.self, from: Self.body(Self.toxics, using: &rng))
                    default:
                        let type = ToxicKind.typeNames.sorted().randomElement(using: &rng)!
                        let update = try FaultProxyAPI.decodeUpdate(for: type, from: Self.body(Self.updates + Self.toxics, using: &rng))
                        // Applying an accepted update validates the merged attributes: typed refusals only.
                        if let toxic = try? FaultProxyAPI.decode(Toxic.self, from: Data(Self.toxics[0].rendered().utf8)) {
                            _ = try? update.applied(to: toxic)
                        }
                    }
                    findings.accept()
                } catch let error as FaultProxyError {
                    findings.check(error.status == 400 && !error.message.isEmpty, "\(error)", input: index)
                } catch {
                    findings.record("untyped error \(type(of: error)): \(error)", input: index)
                }
            }
        }
        run.report("control API bodies", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    @Test func fuzzedRequestsOverHTTPAreAnsweredBelow500() async throws {
        let run = FuzzRun("fuzz proxy control api over http")
        var rng = SeededRandom(seed: run.seed)
        let rig = try await APIRig()
        let upstream = rig.upstream.address
        let created = try await Self.send(rig.address, "POST", "/proxies", Data(#"{"name": "p", "upstream": "\#(upstream)"}"#.utf8))
        #expect(created.status == 201)
        _ = try await Self.send(rig.address, "POST", "/proxies/p/toxics", Data(Self.toxics[0].rendered().utf8))

        // Proxy bodies without `listen`: an accepted one listens on a free port, never on a taken one.
        let proxyBody: FuzzJSON = .object(["name": .string("q"), "upstream": .string(upstream), "enabled": .raw("false")])
        let routes: [(method: String, path: String, corpus: [FuzzJSON])] = [
            ("POST", "/proxies/p/toxics", Self.toxics), ("PATCH", "/proxies/p/toxics/slow", Self.updates + Self.toxics),
            ("POST", "/proxies/p/toxics/slow", Self.updates), ("POST", "/proxies", [proxyBody]),
            ("POST", "/populate", [.array([proxyBody])]), ("PATCH", "/proxies/p", [.object(["enabled": .raw("true")])]),
            ("POST", "/proxies/none/toxics", Self.toxics),
        ]
        let start = ContinuousClock.now
        let inputs = run.count(150)
        var accepted = 0
        for index in 0..<inputs {
            let route = routes[index % routes.count]
            let answer = try await Self.send(rig.address, route.method, route.path, Self.body(route.corpus, using: &rng))
            let context = "\(route.method) \(route.path) → \(answer.status) \(String(decoding: answer.body.prefix(300), as: UTF8.self)) (SIGNFLEET_SEED=\(run.seed), input \(index))"
            #expect((200..<500).contains(answer.status), "\(context)")
            if answer.status >= 400 {
                let error = try? JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
                #expect(error?["error"] is String && error?["status"] as? Int == answer.status, "\(context)")
            } else {
                accepted += 1
            }
        }
        run.report("control API over HTTP", inputs: inputs, accepted: accepted, since: start)
        #expect(try await Self.send(rig.address, "GET", "/version", nil).status == 200)
        #expect(try await Self.send(rig.address, "GET", "/proxies/p", nil).status == 200)
        try await rig.stop()
    }

    static func send(_ address: String, _ method: String, _ path: String, _ body: Data?) async throws -> (status: Int, body: Data) {
        var request = URLRequest(url: try #require(URL(string: "http://\(address)\(path)")))
        request.httpMethod = method
        request.httpBody = body
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        let (data, response) = try await session.data(for: request)
        return (try #require(response as? HTTPURLResponse).statusCode, data)
    }
}
