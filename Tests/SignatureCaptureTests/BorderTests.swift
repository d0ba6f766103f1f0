import Testing
@testable import SignatureCapture

@Suite struct BorderStrategyTests {
    /// An area much narrower than signer 42's signature (about 120 mm wide).
    static let small = SigningArea.centered(on: .iPadPro, width: 70, height: 30)

    func edgeInk(_ raster: (width: Int, height: Int, coverage: [UInt8])) -> Int {
        var count = 0
        for y in 0..<raster.height {
            for x in 0..<raster.width where x == 0 || y == 0 || x == raster.width - 1 || y == raster.height - 1 {
                if raster.coverage[y * raster.width + x] > 128 { count += 1 }
            }
        }
        return count
    }

    @Test func bestDataKeepsOutsideSamplesButDoesNotRenderThem() throws {
        let area = Self.small
        let signature = try sampleCapture(area: area, border: .bestData)
        #expect(signature.attempts == 1)
        let outside = signature.samples.filter { !area.contains(x: $0.x, y: $0.y) }
        #expect(!outside.isEmpty, "samples beyond the area stay in the biometric data")
        let record = try ISOSignatureRecord(bytes: signature.isoRecord)
        #expect(record.sampleCount == signature.samples.count)
        let minX = record.description(of: .x)?.minimum ?? 0
        #expect(Double(minX) / 100 < area.x, "the ISO record reaches beyond the area")
        let segments = signature.renderedSegments()
        #expect(!segments.isEmpty)
        for s in segments {
            #expect(s.x0 >= 0 && s.x1 >= 0 && s.x0 <= area.width && s.x1 <= area.width)
            #expect(s.y0 >= 0 && s.y1 >= 0 && s.y0 <= area.height && s.y1 <= area.height)
        }
        let downPairs = zip(signature.samples, signature.samples.dropFirst()).filter { $0.isDown && $1.isDown && $1.tick == $0.tick + 1 }.count
        #expect(segments.count < downPairs, "segments leaving the area are not rendered")
    }

    @Test func trimClampsSamplesToTheBorder() throws {
        let area = Self.small
        let best = try sampleCapture(area: area, border: .bestData)
        let trimmed = try sampleCapture(area: area, border: .trim)
        #expect(trimmed.samples.count == best.samples.count)
        #expect(trimmed.samples.allSatisfy { area.contains(x: $0.x, y: $0.y) })
        let onBorder = trimmed.samples.filter { $0.x == area.x || $0.x == area.x + area.width || $0.y == area.y || $0.y == area.y + area.height }
        #expect(!onBorder.isEmpty)
        // Inside samples are untouched.
        for (a, b) in zip(best.samples, trimmed.samples) where area.contains(x: a.x, y: a.y) {
            #expect(a == b)
        }
        // Image: trim draws along the border, best data leaves those parts out.
        let trimRaster = try trimmed.rasterize(pixelsPerMillimetre: 4)
        let bestRaster = try best.rasterize(pixelsPerMillimetre: 4)
        #expect(edgeInk(trimRaster) > edgeInk(bestRaster))
        let ink = { (r: (width: Int, height: Int, coverage: [UInt8])) in r.coverage.reduce(0) { $0 + ($1 > 128 ? 1 : 0) } }
        #expect(ink(trimRaster) > ink(bestRaster))
    }

    @Test func alertErasesAndTheSignerTriesAgain() throws {
        let log = EventLog()
        let area = SigningArea.centered(on: .iPadPro, width: 110, height: 40)
        let signature = try SignatureCapturer(pen: .applePencil, area: area, border: .alert)
            .capture(signer: SignerProfile(seed: 42), signing: 1, fieldID: "f", onEvent: log.append)
        #expect(signature.attempts > 1)
        #expect(log.milestones.contains(.borderAlert(attempt: 1)))
        #expect(log.milestones.contains(.erased(.leftSigningArea, attempt: 1)))
        #expect(signature.samples.filter(\.isDown).allSatisfy { area.contains(x: $0.x, y: $0.y) }, "the kept signature is clean")
        let segments = signature.renderedSegments()
        let downPairs = zip(signature.samples, signature.samples.dropFirst()).filter { $0.isDown && $1.isDown && $1.tick == $0.tick + 1 }.count
        #expect(segments.count == downPairs, "everything captured is rendered")
    }

    @Test func alertGivesUpWhenTheAreaIsTooSmall() {
        let tiny = SigningArea.centered(on: .iPadPro, width: 8, height: 4)
        #expect {
            try SignatureCapturer(pen: .applePencil, area: tiny, border: .alert)
                .capture(signer: SignerProfile(seed: 42), signing: 1, fieldID: "f")
        } throws: { ($0 as? CaptureError)?.code == .tooManyAttempts }
    }

    @Test func invalidAreaIsRejected() {
        let outside = SigningArea(x: 250, y: 10, width: 100, height: 40)
        #expect {
            try SignatureCapturer(pen: .applePencil, area: outside).capture(signer: SignerProfile(seed: 1), signing: 1, fieldID: "f")
        } throws: { ($0 as? CaptureError)?.code == .invalidConfiguration }
    }
}
