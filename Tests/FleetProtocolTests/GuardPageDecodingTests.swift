import Foundation
import FleetProtocol
import FleetTesting
import MessagePack
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Decoders must never read outside the bytes they are given (docs/messagepack.md). On an
/// ordinary heap buffer a read just past the end usually lands in mapped memory and goes
/// unnoticed; here every input ends exactly at (or starts right after) an inaccessible page,
/// so any such read faults at once and kills the test process.
@Suite("Decoding next to guard pages")
struct GuardPageDecodingTests {
    /// [guard page][data pages][guard page], mapped once and reused for every input.
    final class GuardedRegion {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let base: UnsafeMutableRawPointer
        let size: Int

        init(dataPages: Int) throws {
            size = (dataPages + 2) * page
            let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
            guard let mapped, mapped != MAP_FAILED else { throw POSIXError(.ENOMEM) }
            base = mapped
            guard mprotect(base, page, PROT_NONE) == 0, mprotect(base + size - page, page, PROT_NONE) == 0 else {
                munmap(base, size)
                throw POSIXError(.EPERM)
            }
        }

        deinit { munmap(base, size) }

        var capacity: Int { size - 2 * page }

        /// `bytes` copied so that their last byte is the last readable one.
        func atEnd(_ bytes: [UInt8]) -> UnsafeRawBufferPointer { place(bytes, at: base + size - page - bytes.count) }

        /// `bytes` copied so that their first byte is the first readable one.
        func atStart(_ bytes: [UInt8]) -> UnsafeRawBufferPointer { place(bytes, at: base + page) }

        private func place(_ bytes: [UInt8], at start: UnsafeMutableRawPointer) -> UnsafeRawBufferPointer {
            bytes.withUnsafeBytes { if let source = $0.baseAddress { memcpy(start, source, bytes.count) } }
            return UnsafeRawBufferPointer(start: start, count: bytes.count)
        }
    }

    static func corpus() throws -> [[UInt8]] {
        let encoder = MessagePackEncoder()
        let items = (0..<3).map { i in
            SyncItem(sequence: UInt64(i) << 20, transactionID: "txn-\(i)-é", payload: Array(repeating: UInt8(i), count: 20 + i), signature: [1, 2])
        }
        let at = Date(timeIntervalSince1970: 1_700_000_000.25)
        return [
            try encoder.encode(SyncPush(deviceID: "device-7", items: items)),
            try encoder.encode(SyncAck(status: .gap, lastApplied: 70_000, expectedSequence: 70_001, results: [
                SyncItemResult(sequence: 1, outcome: .applied, envelopeID: "srv-1"),
                SyncItemResult(sequence: 1 << 40, outcome: .rejected, reason: "bad signature"),
            ])),
            try encoder.encode(MessageHeader(type: "sync.push", id: 42, replyTo: 7, sentAt: at, rateLimit: RateLimitStatus(remaining: 3, resetAt: at))),
            try encoder.encode(FleetError(.rateLimited, "slow down", retryable: true, retryAfterMs: 250)),
            try encoder.encode(HeartbeatReply(serverInstance: "srv-α")),
        ]
    }

    /// Every decoder on `buffer`; only a fault can fail this (errors are expected).
    static func decodeEverywhere(_ buffer: UnsafeRawBufferPointer) {
        var codable = MessagePackDecoder()
        codable.usesFastPath = false
        for decoder in [MessagePackDecoder(), codable] {
            _ = try? decoder.decode(SyncPush.self, from: buffer)
            _ = try? decoder.decode(SyncAck.self, from: buffer)
            _ = try? decoder.decode(MessageHeader.self, from: buffer)
            _ = try? decoder.decode(FleetError.self, from: buffer)
            _ = try? decoder.decode(Heartbeat.self, from: buffer)
            _ = try? decoder.decode(HeartbeatReply.self, from: buffer)
        }
        _ = try? MessagePackValue.decode(buffer)
    }

    @Test("every prefix and seeded mutations decode without reading past either end")
    func noReadOutsideTheInput() throws {
        let region = try GuardedRegion(dataPages: 4)
        let corpus = try Self.corpus()
        var inputs = 0
        for bytes in corpus {
            for length in 0...bytes.count {
                let prefix = Array(bytes[..<length])
                Self.decodeEverywhere(region.atEnd(prefix))
                Self.decodeEverywhere(region.atStart(prefix))
                inputs += 1
            }
        }
        let seed = testSeed("GuardPageDecodingTests")
        print("guard page decoding: SIGNFLEET_SEED=\(seed)")
        var generator = SeededGenerator(seed: seed)
        for round in 0..<2_000 {
            let original = corpus[round % corpus.count]
            // Byte mutations (lengths, markers, truncations) and value mutations (deep nesting, huge values).
            let input = round % 3 == 0
                ? FuzzMessagePack.mutate(bytes: original, using: &generator) ?? original
                : FuzzMutator.mutate(original, corpus: corpus, using: &generator)
            guard input.count <= region.capacity else { continue }
            Self.decodeEverywhere(region.atEnd(input))
            Self.decodeEverywhere(region.atStart(input))
            inputs += 1
        }
        #expect(inputs > 2_000)
    }
}

