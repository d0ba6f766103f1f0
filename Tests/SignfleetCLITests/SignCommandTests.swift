import Foundation
import FleetTesting
import Testing

@Suite struct SignCommandTests {
    func sign(into directory: URL, seed: Int) async throws -> ChildProcess {
        let child = try ChildProcess.launch(
            try signfleetBinary(),
            ["sign", "--signer", "42", "--pen", "pencil", "--seed", "\(seed)", "--out", directory.path], name: "sign")
        #expect(try await child.waitForExit(timeout: .seconds(60)) == 0, "\(child.output)")
        return child
    }

    @Test func writesISOSVGAndPNGReproduciblyFromTheSeed() async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-sign-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let first = try await sign(into: base.appendingPathComponent("a"), seed: 7)
        _ = try await sign(into: base.appendingPathComponent("b"), seed: 7)
        #expect(first.lines(.standardOutput).contains { $0.hasPrefix("seed: 7") }, "the seed is printed: \(first.output)")

        func files(_ name: String) throws -> [String: Data] {
            let directory = base.appendingPathComponent(name)
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            return try Dictionary(uniqueKeysWithValues: names.map { ($0, try Data(contentsOf: directory.appendingPathComponent($0))) })
        }
        let a = try files("a")
        let b = try files("b")
        #expect(a == b, "the same seed gives byte-identical files")
        let iso = try #require(a.first { $0.key.hasSuffix(".iso") || $0.key.hasSuffix(".bin") }?.value)
        #expect(iso.prefix(4) == Data("SDI\0".utf8))
        let png = try #require(a.first { $0.key.hasSuffix(".png") }?.value)
        #expect(png.prefix(8) == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
        let svg = try #require(a.first { $0.key.hasSuffix(".svg") }?.value)
        #expect(String(decoding: svg, as: UTF8.self).contains("<svg"))
    }

    @Test func unknownPenIsNamedInTheError() async throws {
        let child = try ChildProcess.launch(try signfleetBinary(), ["sign", "--pen", "quill", "--out", "/tmp/never"], name: "sign")
        #expect(try await child.waitForExit(timeout: .seconds(60)) != 0)
        #expect(child.output.contains("quill"), "\(child.output)")
    }
}
