import Foundation
import FoundationXML
import Testing
@testable import SignatureCapture

final class SVGCollector: NSObject, XMLParserDelegate {
    var elements: [String] = []
    var points: [(Double, Double)] = []
    var viewBox = ""
    var widths: Set<String> = []
    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        elements.append(name)
        if name == "svg" { viewBox = attributes["viewBox"] ?? "" }
        if name == "polyline" {
            widths.insert(attributes["stroke-width"] ?? "")
            for pair in (attributes["points"] ?? "").split(separator: " ") {
                let xy = pair.split(separator: ",").compactMap { Double($0) }
                if xy.count == 2 { points.append((xy[0], xy[1])) }
            }
        }
    }
}

/// Walks PNG chunks and checks each CRC with an independent CRC-32.
func walkPNG(_ png: [UInt8]) throws -> (types: [String], width: Int, height: Int) {
    struct PNGError: Error, CustomStringConvertible { var description: String }
    guard png.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { throw PNGError(description: "bad signature") }
    var i = 8
    var types: [String] = []
    var width = 0, height = 0
    func u32(_ at: Int) -> Int { png[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
    while i < png.count {
        guard i + 12 <= png.count else { throw PNGError(description: "truncated chunk header at \(i)") }
        let length = u32(i)
        guard i + 12 + length <= png.count else { throw PNGError(description: "truncated chunk at \(i)") }
        let type = String(decoding: png[i + 4..<i + 8], as: UTF8.self)
        let crc = UInt32(u32(i + 8 + length))
        guard referenceCRC32(png[i + 4..<i + 8 + length]) == crc else { throw PNGError(description: "bad CRC in \(type)") }
        if type == "IHDR" {
            width = u32(i + 8)
            height = u32(i + 12)
        }
        types.append(type)
        i += 12 + length
    }
    return (types, width, height)
}

@Suite struct RenderTests {
    @Test func svgParsesAsXMLAndStaysInTheArea() throws {
        let signature = try sampleCapture(pen: .applePencil)
        let collector = SVGCollector()
        let parser = XMLParser(data: Data(signature.svgBytes()))
        parser.delegate = collector
        #expect(parser.parse(), "\(String(describing: parser.parserError))")
        #expect(collector.elements.first == "svg")
        #expect(collector.elements.filter { $0 == "polyline" }.count > 3)
        #expect(collector.viewBox == "0 0 140.00 60.00")
        #expect(collector.widths.count > 2, "width follows pressure")
        #expect(collector.points.allSatisfy { $0.0 >= 0 && $0.0 <= 140 && $0.1 >= 0 && $0.1 <= 60 })
        #expect(signature.svg().hasPrefix("<?xml"))
        // Finger: no pressure, one width.
        let finger = try sampleCapture(pen: .finger)
        let fc = SVGCollector()
        let fp = XMLParser(data: Data(finger.svgBytes()))
        fp.delegate = fc
        #expect(fp.parse())
        #expect(fc.widths.count == 1)
    }

    @Test func pngChunksAndCRCsAreValid() throws {
        for pen in PenKind.allKinds {
            let png = try sampleCapture(pen: pen).png(pixelsPerMillimetre: 5)
            let walk = try walkPNG(png)
            #expect(walk.types == ["IHDR", "IDAT", "IEND"])
            #expect(walk.width == 700 && walk.height == 300)
        }
    }

    @Test func pngCheckedByPython() throws {
        guard let python = findExecutable("python3") else {
            print("SKIPPED pngCheckedByPython: python3 is not installed; the Swift chunk walker still checked the PNG")
            return
        }
        let png = try sampleCapture(pen: .applePencil).png()
        let script = """
        import sys, zlib, struct
        d = sys.stdin.buffer.read()
        assert d[:8] == b'\\x89PNG\\r\\n\\x1a\\n', 'signature'
        i, idat, w, h, ink = 8, b'', 0, 0, 0
        while i < len(d):
            n, = struct.unpack('>I', d[i:i+4]); t = d[i+4:i+8]; c = d[i+8:i+8+n]
            crc, = struct.unpack('>I', d[i+8+n:i+12+n])
            assert zlib.crc32(t + c) & 0xffffffff == crc, 'crc ' + t.decode()
            if t == b'IHDR': w, h = struct.unpack('>II', c[:8])
            if t == b'IDAT': idat += c
            i += 12 + n
        raw = zlib.decompress(idat)
        assert len(raw) == h * (1 + 3 * w), 'size'
        ink = sum(1 for y in range(h) for x in range(w) if raw[y*(1+3*w)+1+3*x] < 128)
        print('ok', w, h, ink)
        """
        let result = try run(python, ["-c", script], stdin: Data(png))
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.hasPrefix("ok 840 360"), "\(result.output)")
        let ink = Int(result.output.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        #expect(ink > 1000, "the signature has ink: \(result.output)")
    }

    @Test func svgRenderedByRsvg() throws {
        guard let rsvg = findExecutable("rsvg-convert") else {
            print("SKIPPED svgRenderedByRsvg: rsvg-convert is absent (apt-get install librsvg2-bin); the XML parse test still ran")
            return
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("signfleet-rsvg-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let svg = directory.appendingPathComponent("s.svg"), png = directory.appendingPathComponent("s.png")
        try Data(try sampleCapture(pen: .applePencil).svgBytes()).write(to: svg)
        let result = try run(rsvg, ["-o", png.path, svg.path])
        #expect(result.status == 0, "\(result.output)")
        let walk = try walkPNG(Array(try Data(contentsOf: png)))
        #expect(walk.types.first == "IHDR" && walk.types.last == "IEND")
    }
}

@Suite struct BindingTests {
    @Test func canonicalBytesLayout() {
        let binding = SignatureBinding(
            documentSHA256: [UInt8](repeating: 0xAA, count: 32), isoSHA256: [UInt8](repeating: 0xBB, count: 32),
            fieldID: "f1", signerID: "é", times: CaptureTimes(
                started: CaptureTimestamp(nanosecondsSinceEpoch: 1), completed: CaptureTimestamp(nanosecondsSinceEpoch: -2)))
        var expected: [UInt8] = [0x53, 0x46, 0x53, 0x42, 0x00, 0x01]
        expected += [0, 0, 0, 32] + [UInt8](repeating: 0xAA, count: 32)
        expected += [0, 0, 0, 32] + [UInt8](repeating: 0xBB, count: 32)
        expected += [0, 0, 0, 2, 0x66, 0x31]
        expected += [0, 0, 0, 2, 0xC3, 0xA9]
        expected += [0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1]
        expected += [0, 0, 0, 8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE]
        #expect(binding.canonicalBytes() == expected)
        #expect((try? SignatureBinding(canonicalBytes: expected)) == binding)
        #expect(throws: BindingError.self) { try SignatureBinding(canonicalBytes: expected + [0]) }
        #expect(throws: BindingError.self) { try SignatureBinding(canonicalBytes: Array(expected.dropLast())) }
    }

    @Test func bindsDocumentAndISORecord() throws {
        let signature = try sampleCapture()
        let document = Array("%PDF-1.7 test document".utf8)
        let binding = SignatureBinding(document: document, signature: signature)
        // SHA-256("abc") known answer through the same path.
        let abc = SignatureBinding(document: Array("abc".utf8), iso: [], fieldID: "", signer: "", times: CaptureTimes(started: .epoch, completed: .epoch))
        let hex: String = abc.documentSHA256.map { (b: UInt8) -> String in
            let h = String(b, radix: 16)
            return h.count == 1 ? "0" + h : h
        }.joined()
        #expect(hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(binding.matches(document: document, iso: signature.isoRecord))
        #expect(!binding.matches(document: document + [0], iso: signature.isoRecord))
        #expect(binding.fieldID == "sig1" && binding.signerID == "signer-42")
        #expect(binding.times.completed > binding.times.started)
        let other = SignatureBinding(document: document, signature: try sampleCapture(signing: 2))
        #expect(other.canonicalBytes() != binding.canonicalBytes())
    }
}
