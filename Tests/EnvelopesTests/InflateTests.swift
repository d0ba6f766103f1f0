import FleetTesting
import Foundation
import Testing
@testable import Envelopes

/// `qpdf --object-streams=generate` applied to `SamplePDF.make(pages: 3)`: the catalog and page
/// tree live in a Flate-compressed object stream and the cross-reference data is a stream.
let qpdfObjectStreamPDF = "JVBERi0xLjUKJb/3ov4KMSAwIG9iago8PCAvVHlwZSAvT2JqU3RtIC9MZW5ndGggMjUzIC9GaWx0ZXIgL0ZsYXRlRGVjb2RlIC9OIDcgL0ZpcnN0IDM5ID4+CnN0cmVhbQp4nLWQzUrEMBSF9z7FWbar/LS2HRgqTKUIIpSpO+sitpdarM3QpqJvb5KOKLhVEi4J9zvn5kSCI0IUI4YQCS4hUoEEMoqQIpIcGWKeXez3YJXqabEwxxHs/uNEYIUyatQ98twThV4nYwl2O3QLHqyPY1NfM18fwe6oG9RBv9s+tysREulOus7muY05Ox7UQqW2puyGxjcyQ6vA6vXJeNQJxJfOY2dZNetubWlGUA/9VI5EBrV6PY1UXZehVQxmJATFM7UvaIKmaUJchd8xJkOTWbDbslZqJp/L34606HVu7Rsd66f6g7Bf6IA8d/tHmF+2gv+Tr/gz308pkpAjZW5kc3RyZWFtCmVuZG9iago5IDAgb2JqCjw8IC9MZW5ndGggNzcgL0ZpbHRlciAvRmxhdGVEZWNvZGUgPj4Kc3RyZWFtCniccwpR0HczVDAyUQhJUzA3AiIDhZAUBQ3njNTkbIUYjZiYGE0Fe02FkCwFAwVdYzOQJEiDIViDRkBieqqCoUJ+moIxWI1rCAAMIhNlZW5kc3RyZWFtCmVuZG9iagoxMCAwIG9iago8PCAvTGVuZ3RoIDc3IC9GaWx0ZXIgL0ZsYXRlRGVjb2RlID4+CnN0cmVhbQp4nHMKUdB3M1QwMlEISVMwNwIiA4WQFAUN54zU5GyFGI2YmBhNBXtNhZAsBQMFXWMzkCRIgyFYg0ZAYnqqgpFCfpqCMViNawgADC8TZmVuZHN0cmVhbQplbmRvYmoKMTEgMCBvYmoKPDwgL0xlbmd0aCA3NyAvRmlsdGVyIC9GbGF0ZURlY29kZSA+PgpzdHJlYW0KeJxzClHQdzNUMDJRCElTMDcCIgOFkBQFDeeM1ORshRiNmJgYTQV7TYWQLAUDBV1jM5AkSIMhWINGQGJ6qoKxQn6agjFYjWsIAAw8E2dlbmRzdHJlYW0KZW5kb2JqCjEyIDAgb2JqCjw8IC9UeXBlIC9YUmVmIC9MZW5ndGggNDEgL0ZpbHRlciAvRmxhdGVEZWNvZGUgL0RlY29kZVBhcm1zIDw8IC9Db2x1bW5zIDQgL1ByZWRpY3RvciAxMiA+PiAvVyBbIDEgMiAxIF0gL0luZm8gNSAwIFIgL1Jvb3QgMiAwIFIgL1NpemUgMTMgL0lEIFs8MmEzYjdhY2VhZGI0NzY1MzA3ZTIwYTYwNDFmYmUzYzM+PDJhM2I3YWNlYWRiNDc2NTMwN2UyMGE2MDQxZmJlM2MzPl0gPj4Kc3RyZWFtCnicY2IAAiZGBn4Q8YmBCchjxE38Z8z/xcTAOBmkbgqQYJzCAABvrgVKCmVuZHN0cmVhbQplbmRvYmoKc3RhcnR4cmVmCjgxMQolJUVPRgo="

/// A zlib stream made only of stored (uncompressed) blocks.
func storedZlib(_ payload: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [0x78, 0x01]
    var chunks = stride(from: 0, to: payload.count, by: 1000).map { Array(payload[$0..<min(payload.count, $0 + 1000)]) }
    if chunks.isEmpty { chunks = [[]] }
    for (i, chunk) in chunks.enumerated() {
        out.append(i == chunks.count - 1 ? 1 : 0)
        let n = UInt16(chunk.count)
        out += [UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8(~n >> 8)]
        out += chunk
    }
    return out + [0, 0, 0, 0] // checksum, ignored
}

@Suite("Inflate and object streams")
struct InflateTests {
    @Test func inflatesFixedHuffmanBlocks() throws {
        let data = try #require(Data(base64Encoded: "eNrLSM3JyVfIQJAAOi4GfQ=="))
        #expect(Inflater.inflateZlib([UInt8](data), maxOutput: 1000) == Array("hello hello hello".utf8))
    }

    @Test func inflatesDynamicHuffmanBlocks() throws {
        let data = try #require(Data(base64Encoded: "eNotUluqBSEM20q2FjBgoVSodf83c7h+zKC2eVUwsLQHGkVPpd5oLqdGAra8xotnEv4XFXdEHeIJRwz2me7vLEp5o562BobZsWJx6wV1NWch3Jfi4QhifxxZLg5uXG9kLBnX1TekS23M2n2a7JIqB19Jc+UKxTN/0pcH89Rp5E3TBBE3LOAsrZloCxi8dYkE7ehtfHZMOBYhO5jU3VFwAGPk4lWGvmrmOo+hex8yPm/1+jMQKh2f6eDVvdPWWANYq7uPv2qb2kMrt7rktFwlF6AXYGYyD+gRhM14m1s5psIDurrG+Vn8I9w3nX2s86Wnwk/3VfU3og+Lv9g9HWefJqTekw05+4PucPrfGRbTs6R5aOKJ/Zv10ce/rLact5Y8GIcmfVYr/AIQVQoQN5ah/Rj+X4cMrtu+ONsaPv4/FZboRQ=="))
        let out = try #require(Inflater.inflateZlib([UInt8](data), maxOutput: 10_000))
        #expect(out.count == 600)
        #expect(out.reduce(0) { $0 + Int($1) } == 59460)
        #expect(out.starts(with: Array(" ai deht eteirtnleutetsatntee".utf8)))
        // The output cap is enforced.
        #expect(Inflater.inflateZlib([UInt8](data), maxOutput: 599) == nil)
    }

    @Test func inflatesStoredBlocksAndRejectsBadInput() {
        let payload = (0..<2500).map { UInt8(truncatingIfNeeded: $0 * 7) }
        #expect(Inflater.inflateZlib(storedZlib(payload), maxOutput: 10_000) == payload)
        #expect(Inflater.inflateZlib(storedZlib([]), maxOutput: 10) == [])
        #expect(Inflater.inflateZlib([], maxOutput: 10) == nil)
        #expect(Inflater.inflateZlib([0x78, 0x02], maxOutput: 10) == nil) // bad header check
        var broken = storedZlib(payload)
        broken[3] ^= 0xFF // LEN no longer matches NLEN
        #expect(Inflater.inflateZlib(broken, maxOutput: 10_000) == nil)
        #expect(Inflater.inflateZlib(Array(storedZlib(payload).prefix(600)), maxOutput: 10_000) == nil)
    }

    @Test func randomInflateInputNeverCrashes() {
        let seed = testSeed("inflate fuzz")
        var rng = SeededGenerator(seed: seed)
        let valid = [UInt8](Data(base64Encoded: "eNrLSM3JyVfIQJAAOi4GfQ==") ?? Data())
        for _ in 0..<2000 {
            var bytes: [UInt8] = [0x78, 0x9C] + (0..<Int.random(in: 0...300, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if Bool.random(using: &rng), !valid.isEmpty {
                bytes = valid
                bytes[Int.random(in: 2..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
            }
            if let out = Inflater.inflateZlib(bytes, maxOutput: 4096) { #expect(out.count <= 4096, "seed \(seed)") }
        }
    }

    @Test func readsQpdfObjectStreamPDF() throws {
        let pdf = try #require(Data(base64Encoded: qpdfObjectStreamPDF))
        let info = try PDFInspector().inspect(pdf)
        #expect(info.pageCount == 3)
        #expect(info.method == .pageTreeScan)
        #expect(info.version == "1.5")
        let document = try DocumentBuilder().documentId("d").name("n").pdfBytes(pdf).build()
        #expect(document.pageCount == 3)
    }

    @Test func readsAnUncompressedAndAStoredObjectStream() throws {
        let objects = "<< /Type /Catalog /Pages 3 0 R >>\n<< /Type /Pages /Kids [4 0 R 5 0 R] /Count 2 >>\n<< /Type /Page >>\n<< /Type /Page >>"
        let starts = [0, 34, 82, 100]
        let header = "2 \(starts[0]) 3 \(starts[1]) 4 \(starts[2]) 5 \(starts[3])\n"
        let body = Array((header + objects).utf8)
        for (filter, data) in [("", body), ("/Filter /FlateDecode", storedZlib(body))] {
            var pdf = Array("%PDF-1.5\n1 0 obj\n<< /Type /ObjStm /N 4 /First \(header.utf8.count) /Length \(data.count) \(filter) >>\nstream\n".utf8)
            pdf += data
            pdf += Array("\nendstream\nendobj\n6 0 obj\n<< /Type /XRef /Root 2 0 R /Size 7 >>\nendobj\nstartxref\n0\n%%EOF\n".utf8)
            let info = try PDFInspector().inspect(Data(pdf))
            #expect(info.pageCount == 2 && info.method == .pageTreeScan, "filter '\(filter)'")
        }
    }
}
