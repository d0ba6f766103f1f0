import FleetTesting
import SignatureCapture
import Testing

/// What docs/signature-capture.md's quick start produces.
struct QuickStartOutputs: Equatable {
    var signature: CapturedSignature
    var iso: [UInt8]
    var svg: String
    var png: [UInt8]
    var samples: [PenSample]
    var message: [UInt8]
}

/// docs/signature-capture.md's quick start (the doc shows this function's body): `now` is when
/// the dialog opens, `pdfBytes` the signed document.
func quickStartExample(now: Int64, pdfBytes: [UInt8]) throws -> QuickStartOutputs {
    // BEGIN EXAMPLE signature-quick-start
    // One connected pen; strategies are that pen's strategy, then hand.
    let capturer = SignatureCapturer(pen: .applePencil, area: .standard, border: .bestData)
    let signature = try capturer.capture(
        signer: SignerProfile(seed: 42),      // signer 42 always has the same signature
        signing: 3,                           // the 3rd time they sign: slightly different
        fieldID: "sig1",
        startedAt: CaptureTimestamp(nanosecondsSinceEpoch: now),
        onEvent: { event in /* .point, .erased, .aborted, .completed … */ })

    let iso = signature.isoRecord          // [UInt8], ISO/IEC 19794-7:2007 full format
    let svg = signature.svg()              // String;  svgBytes() for [UInt8]
    let png = try signature.png()          // [UInt8], 8-bit RGB on white, zlib-compressed
    let samples = signature.samples        // [PenSample]: x, y (mm), pressure, tick, isDown, altitude, azimuth

    let binding = SignatureBinding(document: pdfBytes, signature: signature)
    let message = binding.canonicalBytes()   // sign with the device's Ed25519 key
    // END EXAMPLE
    return QuickStartOutputs(signature: signature, iso: iso, svg: svg, png: png, samples: samples, message: message)
}

/// docs/signature-capture.md's live capture (the doc shows the code between the markers): the
/// signature, and the points `draw` was handed.
func liveCaptureExample(capturer: SignatureCapturer) async throws -> (signature: CapturedSignature, drawn: [PointHistory]) {
    var drawn: [PointHistory] = []
    func draw(_ point: PointHistory) { drawn.append(point) }
    // BEGIN EXAMPLE signature-live-capture
    let capture = capturer.captureWithEvents(signer: SignerProfile(seed: 42), signing: 1, fieldID: "sig1",
                                             clock: ContinuousClock())
    async let signature = capture.run()          // about as long as the signer writes (~3 s)
    for try await event in capture.events {      // .strategySelected, .point …, .completed
        if case .point(let p) = event { draw(p) }
    }
    let captured = try await signature
    // END EXAMPLE
    return (captured, drawn)
}

@Suite("docs/signature-capture.md")
struct SignatureCaptureExamplesTests {
    @Test("the examples in docs/signature-capture.md are this file's code, verbatim")
    func docMatchesCode() throws {
        for name in ["signature-quick-start", "signature-live-capture"] {
            let example = try DocExample.compare(name, in: "docs/signature-capture.md", file: #filePath)
            #expect(example.shown == example.code, "\(name)")
        }
    }

    @Test("the quick start captures the same signature every time, in every output format")
    func quickStartRuns() throws {
        let document: [UInt8] = Array("%PDF-1.4 a document".utf8)
        let outputs = try quickStartExample(now: 1_764_400_000_000_000_000, pdfBytes: document)
        #expect(try quickStartExample(now: 1_764_400_000_000_000_000, pdfBytes: document) == outputs, "same inputs, same bytes")
        let record = try ISOSignatureRecord(bytes: outputs.iso)
        #expect(record.sampleCount > 20)
        #expect(outputs.samples.count > 20)
        #expect(outputs.svg.contains("<svg"))
        #expect(outputs.png.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), "a PNG signature")
        #expect(outputs.signature.fieldID == "sig1")
        // The binding covers the document: another document, another message.
        let other = try quickStartExample(now: 1_764_400_000_000_000_000, pdfBytes: Array("%PDF-1.4 another".utf8))
        #expect(other.message != outputs.message && other.iso == outputs.iso)
    }

    @Test("the live capture draws every point and returns the synchronous capture's signature")
    func liveCaptureRuns() async throws {
        let capturer = SignatureCapturer(pen: .applePencil)
        var points = 0
        let expected = try capturer.capture(signer: SignerProfile(seed: 42), signing: 1, fieldID: "sig1") { event in
            if case .point = event { points += 1 }
        }
        let live = try await withDeadline(.seconds(120), "the live capture") { try await liveCaptureExample(capturer: capturer) }
        #expect(live.signature == expected)
        #expect(live.drawn.count == points && points > 0)
    }
}
