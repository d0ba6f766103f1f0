import FleetProtocol
import ArgumentParser
import Foundation
import SignatureCapture

/// `signfleet sign`: captures one synthetic signature and writes its ISO record, SVG and PNG.
struct SignCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Capture one synthetic signature and write ISO, SVG and PNG files.",
        discussion: "The signer's seed fixes their signature; --seed picks one signing act (its natural variation). The same options always give the same bytes.")

    @Option(help: "The signer's seed: the same signer always has the same signature.")
    var signer: UInt64 = 42

    @Option(help: "The pen: pencil, wacom, pad or finger.")
    var pen: String = "pencil"

    @Option(help: "Seed of this signing act (default: random, printed).")
    var seed: UInt64?

    @Option(help: "Border strategy: bestData, alert or trim.")
    var border: String = "bestData"

    @Option(help: "Signing area size in millimetres, WIDTHxHEIGHT, centred on an iPad Pro screen.")
    var area: String = "140x60"

    @Option(help: "Signature field id.")
    var field: String = "sig1"

    @Option(help: "Output directory (created if missing).")
    var out: String = "."

    func run() async throws {
        guard let penKind = PenKind(name: pen) else {
            throw ValidationError("unknown pen '\(pen)': use pencil, wacom, pad or finger")
        }
        let borderStrategy: BorderStrategy
        switch border.lowercased() {
        case "bestdata", "best-data", "best": borderStrategy = .bestData
        case "alert": borderStrategy = .alert
        case "trim": borderStrategy = .trim
        default: throw ValidationError("unknown border strategy '\(border)': use bestData, alert or trim")
        }
        let size = area.lowercased().split(separator: "x").compactMap { Double($0) }
        guard size.count == 2, size[0] > 0, size[1] > 0, size[0] <= DeviceScreen.iPadPro.width, size[1] <= DeviceScreen.iPadPro.height else {
            throw ValidationError("--area must be WIDTHxHEIGHT in millimetres within \(DeviceScreen.iPadPro.width)x\(DeviceScreen.iPadPro.height), got '\(area)'")
        }
        let signingSeed = seed ?? UInt64.random(in: 1...999_999)
        let capturer = SignatureCapturer(
            pen: penKind, area: .centered(on: .iPadPro, width: size[0], height: size[1]), border: borderStrategy)
        let start = CaptureTimestamp(nanosecondsSinceEpoch: Int64(WallClock.system.secondsSince1970 * 1e9))
        let signature = try capturer.capture(
            signer: SignerProfile(seed: signer), signing: Int(truncatingIfNeeded: signingSeed), fieldID: field, startedAt: start)

        let directory = URL(fileURLWithPath: out, isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let base = "signer\(signer)-\(penKind.identifier)-seed\(signingSeed)"
        let iso = directory.appendingPathComponent(base + ".iso")
        let svg = directory.appendingPathComponent(base + ".svg")
        let png = directory.appendingPathComponent(base + ".png")
        try Data(signature.isoRecord).write(to: iso)
        try Data(signature.svgBytes()).write(to: svg)
        try Data(try signature.png()).write(to: png)

        print("seed: \(signingSeed) (signer \(signer), pen \(penKind.identifier), strategy \(signature.strategy), border \(borderStrategy))")
        print("samples: \(signature.samples.count) over \(String(format: "%.3f", signature.duration)) s at \(signature.characteristics.sampleRate) Hz, attempts \(signature.attempts)")
        print("iso: \(iso.path) (\(signature.isoRecord.count) bytes)")
        print("svg: \(svg.path)")
        print("png: \(png.path)")
    }
}
