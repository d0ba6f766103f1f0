@testable import Chaos
import Foundation
import Testing

/// The toxic model without sockets: JSON defaults and validation, toxicity draws, slicing.
@Suite struct ToxicModelTests {
    func decode(_ json: String) throws -> Toxic {
        try JSONDecoder().decode(Toxic.self, from: Data(json.utf8))
    }

    @Test func decodingAppliesToxiproxyDefaults() throws {
        let toxic = try decode(#"{"type": "bandwidth", "attributes": {"rate": 50}}"#)
        #expect(toxic == Toxic(name: "bandwidth_downstream", stream: .downstream, toxicity: 1, kind: .bandwidth(rate: 50)))
        let bare = try decode(#"{"type": "timeout", "stream": "upstream"}"#)
        #expect(bare.name == "timeout_upstream" && bare.kind == .timeout(timeout: 0))
        let encoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(toxic)) as? [String: Any]
        #expect(encoded?["type"] as? String == "bandwidth")
        #expect(encoded?["attributes"] as? [String: Int] == ["rate": 50])
    }

    @Test(arguments: [
        (#"{"type": "latency", "attributes": {"latency": 1.5}}"#, "latency"),
        (#"{"type": "latency", "attributes": {"latency": "100"}}"#, "latency"),
        (#"{"type": "latency", "attributes": [1]}"#, "attributes"),
        (#"{"type": "limit_data", "attributes": {"bytes": -1}}"#, "bytes"),
        (#"{"type": "slicer", "attributes": {"average_size": 0}}"#, "average_size"),
        (#"{"type": "latency", "toxicity": -0.1}"#, "toxicity"),
        (#"{"type": "latency", "stream": 3}"#, "stream"),
        (#"{"attributes": {}}"#, "type"),
    ])
    func badToxicsNameTheField(json: String, field: String) throws {
        do {
            _ = try decode(json)
            Issue.record("accepted \(json)")
        } catch let error as FaultProxyError {
            #expect(error.status == 400)
            #expect(error.message.contains(field), "\(error.message)")
        }
    }

    @Test func updatesMergeAttributes() throws {
        let toxic = Toxic(name: "l", kind: .latency(latency: 100, jitter: 0))
        let updated = try ToxicUpdate(toxicity: 0.5, attributes: ["jitter": 20]).applied(to: toxic)
        #expect(updated.kind == .latency(latency: 100, jitter: 20) && updated.toxicity == 0.5)
        #expect(throws: FaultProxyError.self) { try ToxicUpdate(attributes: ["rate": 1]).applied(to: toxic) }
    }

    @Test func toxicityDrawsAreDeterministicAndProportional() {
        func draws(seed: UInt64, toxicity: Double) -> [Bool] {
            (1...2000).map { ToxicityDraw.applies(seed: seed, proxy: "p", connection: UInt64($0), toxic: "t", toxicity: toxicity) }
        }
        #expect(draws(seed: 8, toxicity: 0.3) == draws(seed: 8, toxicity: 0.3))
        #expect(draws(seed: 8, toxicity: 0.3) != draws(seed: 9, toxicity: 0.3))
        let share = Double(draws(seed: 8, toxicity: 0.3).filter { $0 }.count) / 2000
        #expect((0.25...0.35).contains(share), "\(share)")
        #expect(!draws(seed: 8, toxicity: 0).contains(true))
        #expect(!draws(seed: 8, toxicity: 1).contains(false))
    }

    @Test func slicerCutsCoverEveryByteInBoundedPieces() {
        var random = ChaosRandom(seed: 3)
        var offsets = [0]
        ScheduledStage.cut(0, 1000, averageSize: 40, variation: 10, random: &random, into: &offsets)
        #expect(offsets.first == 0 && offsets.last == 1000)
        let pieces = zip(offsets, offsets.dropFirst()).map { $1 - $0 }
        #expect(pieces.allSatisfy { $0 > 0 && $0 <= 50 }, "\(pieces)")
        #expect(pieces.count >= 20)
    }

    @Test func addressesParseAndNameTheField() throws {
        #expect(try HostPort(parsing: "127.0.0.1:0", field: "listen") == HostPort(host: "127.0.0.1", port: 0))
        #expect(try HostPort(parsing: "[::1]:80", field: "listen").description == "[::1]:80")
        #expect(try HostPort(parsing: ":9", field: "listen").host == "0.0.0.0")
        for bad in ["localhost", "host:http", "h:70000"] {
            #expect(throws: FaultProxyError.badRequestBody("field \"upstream\" must be host:port (for example 127.0.0.1:8474), got \"\(bad)\"")) {
                try HostPort(parsing: bad, field: "upstream")
            }
        }
    }
}
