import FleetTesting
import Foundation
import Synchronization
@testable import SignatureCapture


/// A clock whose sleeps return at once and move its time forward: discovery runs in virtual time.
final class ImmediateClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    private let current = Mutex(Instant(offset: .zero))
    var now: Instant { current.withLock { $0 } }
    var minimumResolution: Duration { .nanoseconds(1) }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        try Task.checkCancellation()
        current.withLock { if $0 < deadline { $0 = deadline } }
    }
}


/// A record-capturing event sink.
final class EventLog: Sendable {
    private let storage = Mutex<[CaptureEvent]>([])
    var events: [CaptureEvent] { storage.withLock { $0 } }
    func append(_ event: CaptureEvent) { storage.withLock { $0.append(event) } }
    /// Events other than points.
    var milestones: [CaptureEvent] {
        events.filter { if case .point = $0 { return false } else { return true } }
    }
}

/// A standard capture for tests.
func sampleCapture(pen: PenKind = .applePencil, signer: UInt64 = 42, signing: Int = 1,
                   area: SigningArea = .standard, border: BorderStrategy = .bestData) throws -> CapturedSignature {
    try SignatureCapturer(pen: pen, area: area, border: border)
        .capture(signer: SignerProfile(seed: signer), signing: signing, fieldID: "sig1",
                 startedAt: CaptureTimestamp(nanosecondsSinceEpoch: 1_700_000_000_000_000_000))
}

/// CRC-32 (IEEE) written independently of zlib, for checking PNG chunks.
func referenceCRC32(_ bytes: some Sequence<UInt8>) -> UInt32 {
    var table = [UInt32](repeating: 0, count: 256)
    for i in 0..<256 {
        var c = UInt32(i)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        table[i] = c
    }
    var crc: UInt32 = 0xFFFF_FFFF
    for b in bytes { crc = table[Int((crc ^ UInt32(b)) & 0xFF)] ^ (crc >> 8) }
    return crc ^ 0xFFFF_FFFF
}

/// Finds an executable on PATH.
func findExecutable(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for dir in path.split(separator: ":") {
        let candidate = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

/// Runs a process to completion (tests only) and returns its exit status and output.
func run(_ executable: String, _ arguments: [String], stdin: Data? = nil) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    let input = Pipe()
    if stdin != nil { process.standardInput = input }
    try process.run()
    if let stdin {
        input.fileHandleForWriting.write(stdin)
        try input.fileHandleForWriting.close()
    }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
