import Foundation
import SignatureCapture

/// `signfleet-bench capture [--seconds S]`: the full capture path of a ~3-second signature at
/// 240 Hz (Apple Pencil): synthesis, ISO/IEC 19794-7 encoding, SVG, binding hash.
/// Reports captures per second on one core and microseconds per stage.
func captureBenchmark(_ arguments: [String]) async throws {
    var seconds = 2.0
    if let i = arguments.firstIndex(of: "--seconds"), i + 1 < arguments.count, let s = Double(arguments[i + 1]) {
        seconds = s
    }
    let bench = "capture"
    let capturer = SignatureCapturer(
        configuration: CaptureConfiguration(reportsPointHistory: false),
        availability: PenAvailability(connected: [.applePencil]))

    // Signers whose signatures last close to 3 s at 240 Hz.
    var signers: [SignerProfile] = []
    var seed: UInt64 = 1
    while signers.count < 16 && seed < 10_000 {
        let signer = SignerProfile(seed: seed)
        let duration = try capturer.capture(signer: signer, signing: 1, fieldID: "sig1").duration
        if duration >= 2.9 && duration <= 3.1 { signers.append(signer) }
        seed += 1
    }
    let probe = try capturer.capture(signer: signers[0], signing: 1, fieldID: "sig1")
    let document = [UInt8](repeating: 0x25, count: 64 * 1024)
    let documentHash = SignatureBinding(document: document, iso: [], fieldID: "", signer: "",
                                        times: CaptureTimes(started: .epoch, completed: .epoch)).documentSHA256
    Report.emit(bench, "signature_duration", probe.duration, "s")
    Report.emit(bench, "samples_per_capture", Double(probe.samples.count), "samples")
    Report.emit(bench, "iso_bytes", Double(probe.isoRecord.count), "bytes")
    Report.emit(bench, "svg_bytes", Double(probe.svgBytes().count), "bytes")

    // Full capture: synthesis + ISO (inside capture) + SVG + binding (hash of the ISO record; the
    // document's hash is computed once per document, not per capture).
    var signing = 0
    let full = try measureRate(seconds: seconds) {
        signing += 1
        let signature = try capturer.capture(signer: signers[signing & 15], signing: signing, fieldID: "sig1")
        let svg = signature.svgBytes()
        let binding = SignatureBinding(documentSHA256: documentHash,
                                       isoSHA256: SignatureBinding(document: [], iso: signature.isoRecord, fieldID: "", signer: "",
                                                                   times: CaptureTimes(started: .epoch, completed: .epoch)).isoSHA256,
                                       fieldID: signature.fieldID, signerID: signature.signerID,
                                       times: CaptureTimes(started: signature.startedAt, completed: signature.completedAt))
        blackHole(svg.count &+ binding.canonicalBytes().count)
    }
    Report.emit(bench, "full_capture_rate", full, "captures/s")

    // Stages.
    let captureOnly = try measureRate(seconds: seconds) {
        signing += 1
        blackHole(try capturer.capture(signer: signers[signing & 15], signing: signing, fieldID: "sig1").isoRecord.count)
    }
    let isoRate = try measureRate(seconds: seconds) {
        blackHole(try ISOSignatureRecord(samples: probe.samples, characteristics: probe.characteristics).encoded().count)
    }
    let svgRate = measureRate(seconds: seconds) { blackHole(probe.svgBytes().count) }
    let bindingRate = measureRate(seconds: seconds) {
        blackHole(SignatureBinding(document: [], iso: probe.isoRecord, fieldID: probe.fieldID, signer: probe.signerID,
                                   times: CaptureTimes(started: probe.startedAt, completed: probe.completedAt)).canonicalBytes().count)
    }
    let readRate = try measureRate(seconds: seconds) { blackHole(try ISOSignatureRecord(bytes: probe.isoRecord).sampleCount) }
    let pngRate = try measureRate(seconds: seconds / 2) { blackHole(try probe.png().count) }

    let isoMicros = 1e6 / isoRate
    Report.emit(bench, "stage_synthesis_us", 1e6 / captureOnly - isoMicros, "us")
    Report.emit(bench, "stage_iso_encode_us", isoMicros, "us")
    Report.emit(bench, "stage_svg_us", 1e6 / svgRate, "us")
    Report.emit(bench, "stage_binding_hash_us", 1e6 / bindingRate, "us")
    Report.emit(bench, "full_capture_us", 1e6 / full, "us")
    Report.emit(bench, "extra_iso_read_us", 1e6 / readRate, "us")
    Report.emit(bench, "extra_png_us", 1e6 / pngRate, "us")
}
