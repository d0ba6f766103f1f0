import FleetTesting
import Foundation
import SignatureCapture
import Testing
import CZlib
@testable import Envelopes

/// Seeded fuzzing of the PDF reader and of inflate (issue #14 part 2): every input gives a
/// ``PDFInfo`` or a ``PDFInspectionError``; inflate gives bytes within its bound or an
/// ``InflateError``. `SIGNFLEET_SEED` replays, `SIGNFLEET_FUZZ_ITERATIONS` multiplies the counts.
@Suite struct PDFFuzzTests {
    /// Edits at the places a PDF reader trusts numbers: counts, lengths, offsets, object numbers.
    static let pdfTokens: [String] = [
        "/Count -1", "/Count 99999999999999999999", "/Count 9223372036854775807", "/Count 1e300", "/Count NaN",
        "/Length 9223372036854775807", "/Length -9223372036854775808", "/Length 18446744073709551615",
        "startxref\n-5\n", "startxref\n9223372036854775807\n", "xref\n0 9223372036854775807\n", "xref\n9223372036854775807 2\n",
        "/N 4294967296", "/N -1", "/First -1", "/First 9223372036854775807", "/Prev 9223372036854775807", "/Prev -1",
        "9223372036854775807 0 obj", "-1 0 obj", "1 9223372036854775807 R", "/Root 9223372036854775807 0 R",
        "/Type /ObjStm", "/Filter /FlateDecode", "/DecodeParms << /Predictor 12 >>", "/Kids [1 0 R 1 0 R]", "%%EOF",
        "stream\nx\u{9c}\nendstream", String(repeating: "[", count: 200), String(repeating: "<<", count: 200),
        "(\\", "<", "#", "/Pa#67e", "/Pa#zz", "/Type /Page",
    ]

    static var corpus: [[UInt8]] {
        var pdfs = [1, 3].map { [UInt8](SamplePDF.make(pages: $0)) }
        if let data = Data(base64Encoded: qpdfObjectStreamPDF) { pdfs.append([UInt8](data)) }
        // Boxes and a rotation inherited down the page tree (the page geometry's paths).
        let boxes = "%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R 4 0 R] "
            + "/Count 2 /MediaBox [0 0 595.28 841.89] /CropBox [10 10 500 800] /Rotate 90 >>\nendobj\n3 0 obj\n<< /Type /Page "
            + "/Parent 2 0 R >>\nendobj\n4 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 842 595] /Rotate -270 >>\nendobj\n"
            + "trailer\n<< /Root 1 0 R >>\n%%EOF\n"
        pdfs.append(Array(boxes.utf8))
        let objects = "<< /Type /Catalog /Pages 3 0 R >>\n<< /Type /Pages /Kids [4 0 R 5 0 R] /Count 2 >>\n<< /Type /Page >>\n<< /Type /Page >>"
        let header = "2 0 3 34 4 82 5 100\n"
        let data = storedZlib(Array((header + objects).utf8))
        var pdf = Array("%PDF-1.5\n1 0 obj\n<< /Type /ObjStm /N 4 /First \(header.utf8.count) /Length \(data.count) /Filter /FlateDecode >>\nstream\n".utf8)
        pdf += data + Array("\nendstream\nendobj\n6 0 obj\n<< /Type /XRef /Root 2 0 R /Size 7 >>\nendobj\nstartxref\n0\n%%EOF\n".utf8)
        pdfs.append(pdf)
        return pdfs
    }

    /// A byte mutation, a token spliced in at a random place, or a number replaced by an extreme one.
    static func mutatedPDF(_ corpus: [[UInt8]], using rng: inout SeededRandom) -> [UInt8] {
        var bytes = corpus.randomElement(using: &rng)!
        switch Int.random(in: 0..<4, using: &rng) {
        case 0:
            return FuzzMutator.mutate(bytes, corpus: corpus, using: &rng)
        case 1, 2:
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let token = Array(pdfTokens.randomElement(using: &rng)!.utf8)
                let at = Int.random(in: 0...bytes.count, using: &rng)
                if Bool.random(using: &rng) {
                    bytes.insert(contentsOf: token, at: at)
                } else {
                    bytes.replaceSubrange(at..<min(bytes.count, at + token.count), with: token)
                }
            }
            return bytes
        default:
            // Every run of digits is a candidate: replace one with an extreme number.
            let digits = bytes.indices.filter { bytes[$0] >= 0x30 && bytes[$0] <= 0x39 && ($0 == 0 || !(bytes[$0 - 1] >= 0x30 && bytes[$0 - 1] <= 0x39)) }
            guard let at = digits.randomElement(using: &rng) else { return bytes }
            var end = at
            while end < bytes.count, bytes[end] >= 0x30, bytes[end] <= 0x39 { end += 1 }
            let replacement = ["0", "-1", "9223372036854775807", "9223372036854775808", "99999999999", "4294967295", "1e300"].randomElement(using: &rng)!
            bytes.replaceSubrange(at..<end, with: Array(replacement.utf8))
            return bytes
        }
    }

    @Test func thePDFReaderTakesAnyBytes() async throws {
        let run = FuzzRun("fuzz pdf inspector")
        let corpus = Self.corpus
        let inspector = PDFInspector(limits: .init(maxBytes: 1 << 20))
        let start = ContinuousClock.now
        let inputs = run.count(6_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                let bytes = Int.random(in: 0..<16, using: &rng) == 0
                    ? FuzzMutator.randomBytes(count: Int.random(in: 0...200, using: &rng), using: &rng)
                    : Self.mutatedPDF(corpus, using: &rng)
                do {
                    let info = try inspector.inspect(Data(bytes))
                    findings.check(info.pageCount > 0 && info.pageCount <= 10_000, "page count \(info.pageCount)", input: index)
                    findings.accept()
                } catch let error as PDFInspectionError {
                    findings.check(!error.message.isEmpty, "an error without a message", input: index)
                } catch {
                    findings.record("untyped error \(type(of: error)): \(error)", input: index)
                }
                // The page geometry the captive page draws by: whatever the input, pages a renderer can be asked for.
                if let pages = try? inspector.pageGeometry(Data(bytes)) {
                    let sane = pages.count <= 10_000 && pages.allSatisfy {
                        (3...14_400).contains($0.width) && (3...14_400).contains($0.height) && [0, 90, 180, 270].contains($0.rotation)
                    }
                    findings.check(sane, "implausible geometry \(pages.prefix(3))", input: index)
                }
            }
        }
        run.report("PDFInspector.inspect", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    @Test func inflateStaysWithinItsBoundOnAnyBytes() async throws {
        let run = FuzzRun("fuzz inflate")
        let corpus: [[UInt8]] = [
            [UInt8](Data(base64Encoded: "eNrLSM3JyVfIQJAAOi4GfQ==")!), storedZlib(Array("hello".utf8)), zlibCompressed(Array(repeating: 0x41, count: 3000)),
            zlibCompressed((0..<2000).map { UInt8(truncatingIfNeeded: $0 &* 31) }),
        ]
        let start = ContinuousClock.now
        let inputs = run.count(15_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                let bytes = FuzzMutator.input(from: corpus, using: &rng)
                let bound = [0, 1, 100, 4096].randomElement(using: &rng)!
                do {
                    let out = try Inflater.inflate(bytes, maxOutput: bound)
                    findings.check(out.count <= bound, "\(out.count) bytes out of a \(bound)-byte bound", input: index)
                    findings.accept()
                } catch let error as InflateError {
                    findings.check(!error.message.isEmpty, "an error without a message", input: index)
                } catch {
                    findings.record("untyped error \(type(of: error)): \(error)", input: index)
                }
            }
        }
        run.report("Inflater.inflate", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    @Test func aZlibBombStopsAtTheBoundAndATruncatedStreamFails() throws {
        // 10 MiB of zeros compress to about 10 KB: inflating it is stopped at the bound.
        let bomb = zlibCompressed([UInt8](repeating: 0, count: 10 << 20))
        #expect(bomb.count < 20_000)
        #expect(throws: InflateError.self) { try Inflater.inflate(bomb, maxOutput: 1 << 20) }
        do {
            _ = try Inflater.inflate(bomb, maxOutput: 1 << 20)
        } catch {
            #expect(error.outputLimitExceeded && error.message.contains("more than 1048576 bytes"), "\(error)")
        }
        #expect(try Inflater.inflate(bomb, maxOutput: 10 << 20).count == 10 << 20)
        #expect(Inflater.inflateZlib(bomb, maxOutput: (10 << 20) - 1) == nil)

        // Cut anywhere before its final block, a stream is refused (not returned short).
        let text = zlibCompressed(Array(String(repeating: "signfleet ", count: 500).utf8))
        for cut in [3, text.count / 2, text.count - 5] {
            do {
                _ = try Inflater.inflate(Array(text.prefix(cut)), maxOutput: 1 << 20)
                Issue.record("a stream cut at \(cut) of \(text.count) bytes inflated")
            } catch {
                #expect(!error.outputLimitExceeded && error.message.contains("truncated"), "\(error)")
            }
        }
        // The Adler-32 checksum after the final block is not required.
        #expect(try Inflater.inflate(Array(text.dropLast(4)), maxOutput: 1 << 20).count == 5000)
        // A bomb inside a PDF's object stream leaves the page count unread, not the process dead.
        let objects = "<< /Type /Catalog /Pages 3 0 R >>\n"
        var pdf = Array("%PDF-1.5\n1 0 obj\n<< /Type /ObjStm /N 1 /First 4 /Length \(bomb.count) /Filter /FlateDecode >>\nstream\n".utf8)
        pdf += bomb + Array("\nendstream\nendobj\n\(objects)startxref\n0\n%%EOF\n".utf8)
        #expect(throws: PDFInspectionError.self) { try PDFInspector(limits: .init(maxBytes: 1 << 20)).inspect(Data(pdf)) }
    }
}

/// `bytes` compressed by zlib (level 9), with its header and checksum.
func zlibCompressed(_ bytes: [UInt8]) -> [UInt8] {
    var size = compressBound(uLong(bytes.count))
    var out = [UInt8](repeating: 0, count: Int(size))
    let status = out.withUnsafeMutableBufferPointer { buffer in
        bytes.withUnsafeBufferPointer { compress2(buffer.baseAddress, &size, $0.baseAddress, uLong(bytes.count), 9) }
    }
    precondition(status == Z_OK, "compress2 failed: \(status)")
    return Array(out.prefix(Int(size)))
}
