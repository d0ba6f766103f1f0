import FleetTesting
import Testing
@testable import SignatureCapture

@Suite struct ISORecordTests {
    /// Three pad samples: two pen-down, one hover.
    static let padLike = PenCharacteristics(sampleRate: 200, pressureLevels: 1024, reportsHover: true)
    static let samples = [
        PenSample(x: 10.00, y: 20.00, pressure: 0.5, tick: 0, isDown: true),
        PenSample(x: 10.50, y: 19.75, pressure: 1.0, tick: 1, isDown: true),
        PenSample(x: 11.00, y: 19.50, pressure: 0.0, tick: 2, isDown: false),
    ]
    /// Written out by hand from the layout in docs/signature-format.md.
    static let expected: [UInt8] = [
        0x53, 0x44, 0x49, 0x00,             // "SDI\0"
        0x20, 0x31, 0x30, 0x00,             // " 10\0"
        0xC1, 0x60,                         // X(15) Y(14) T(8) F(6) S(5)
        0xE0, 0xB4, 0x80, 0x03, 0xE8, 0x04, 0x4C,  // X: scale 100/mm (E=6+16, F=1152), min 1000, max 1100
        0xE0, 0xB4, 0x80, 0x07, 0x9E, 0x07, 0xD0,  // Y: scale 100/mm, min 1950, max 2000
        0x80, 0xBC, 0x80,                   // T: scale 200/s (E=7+16, F=1152)
        0x60, 0x00, 0x00, 0x03, 0xFF,       // F: min 0, max 1023
        0x60, 0x00, 0x00, 0x00, 0x01,       // S: min 0, max 1
        0x00,                               // reserved
        0x00,                               // body flags
        0x00, 0x00, 0x03,                   // 3 samples
        0x03, 0xE8, 0x07, 0xD0, 0x00, 0x00, 0x02, 0x00, 0x00, 0x01,
        0x04, 0x1A, 0x07, 0xB7, 0x00, 0x01, 0x03, 0xFF, 0x00, 0x01,
        0x04, 0x4C, 0x07, 0x9E, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
    ]

    @Test func writerMatchesHandWrittenBytes() throws {
        let record = try ISOSignatureRecord(samples: Self.samples, characteristics: Self.padLike)
        #expect(record.encoded() == Self.expected)
    }

    @Test func readerReadsHandWrittenBytesBack() throws {
        let record = try ISOSignatureRecord(bytes: Self.expected)
        #expect(record.channels == [.x, .y, .t, .f, .s])
        #expect(record.sampleCount == 3)
        #expect(record.column(.x) == [1000, 1050, 1100])
        #expect(record.column(.y) == [2000, 1975, 1950])
        #expect(record.column(.t) == [0, 1, 2])
        #expect(record.column(.f) == [512, 1023, 0])
        #expect(record.column(.s) == [1, 1, 0])
        #expect(record.description(of: .x)?.scaling?.value == 100)
        #expect(record.description(of: .t)?.scaling?.value == 200)
        #expect(record.encoded() == Self.expected)
    }

    @Test func scalingValues() {
        #expect(ISOScalingValue(approximating: 100)?.encoded == 0xB480)
        #expect(ISOScalingValue(approximating: 240)?.encoded == 0xBF00)
        #expect(ISOScalingValue(approximating: 1)?.encoded == 0x8000)
        #expect(ISOScalingValue(approximating: 0.5)?.exponent == -1)
        #expect(ISOScalingValue(approximating: 70_000) == nil)
        #expect(ISOScalingValue(encoded: 0xBC80).value == 200)
    }

    private func expectError(_ code: ISORecordError.Code, _ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            _ = try ISOSignatureRecord(bytes: bytes)
            Issue.record("expected \(code), the record was accepted", sourceLocation: sourceLocation)
        } catch let error as ISORecordError {
            #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func rejectsBadMagic() {
        var bytes = Self.expected
        bytes[0] = 0x58
        expectError(.badMagic, bytes)
        expectError(.badMagic, Array("PNG\0 10\0".utf8))
    }

    @Test func rejectsWrongVersion() {
        var bytes = Self.expected
        bytes[5] = 0x32
        expectError(.unsupportedVersion, bytes)
    }

    @Test func rejectsWrongCounts() {
        var fewer = Self.expected
        fewer[41] = 2   // count says 2, body holds 3
        expectError(.sampleCountMismatch, fewer)
        var more = Self.expected
        more[41] = 4    // count says 4, body holds 3 whole samples
        expectError(.sampleCountMismatch, more)
        var zero = Self.expected
        zero[41] = 0
        expectError(.noSamples, zero)
        expectError(.sampleCountMismatch, Self.expected + [0x00, 0x01])   // trailing bytes without the extended-data flag
    }

    @Test func rejectsTruncation() {
        // Every proper prefix is rejected; inside the header or a sample the error is `truncated`.
        for length in 0..<Self.expected.count {
            do {
                _ = try ISOSignatureRecord(bytes: Array(Self.expected.prefix(length)))
                Issue.record("prefix of \(length) bytes accepted")
            } catch let error as ISORecordError {
                let bodyStart = 42
                if length < bodyStart || (length - bodyStart) % 10 != 0 {
                    #expect(error.code == .truncated, "prefix \(length): \(error)")
                } else {
                    #expect(error.code == .sampleCountMismatch, "prefix \(length): \(error)")
                }
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
        expectError(.truncated, Array(Self.expected.dropLast()))
    }

    @Test func rejectsBothTAndDT() {
        var bytes = Self.expected
        bytes[9] |= 0x80            // include DT (bit 7) as well as T (bit 8)
        bytes.insert(0x00, at: 27)  // DT's description (empty preamble) after T's
        expectError(.conflictingTimeChannels, bytes)
        var neither = Self.expected
        neither[8] &= ~0x01         // drop T
        neither.removeSubrange(24..<27)
        expectError(.conflictingTimeChannels, neither)
    }

    @Test func rejectsMissingXAndBadDescriptions() {
        var noX = Self.expected
        noX[8] &= ~0x80
        noX.removeSubrange(10..<17)
        expectError(.missingRequiredChannel, noX)
        var noScale = Self.expected
        noScale[10] = 0x60          // X without scaling value
        noScale.removeSubrange(11..<13)
        expectError(.invalidChannelDescription, noScale)
        var reserved = Self.expected
        reserved[24] |= 0x01
        expectError(.invalidChannelDescription, reserved)
    }

    @Test func rejectsValuesOutsideDeclaredRange() {
        var bytes = Self.expected
        bytes[42] = 0x05            // first X = 0x05E8 = 1512 > max 1100
        expectError(.invalidSampleValue, bytes)
        var backwards = Self.expected
        backwards[57] = 0x05        // second T = 5, third T = 2
        expectError(.invalidSampleValue, backwards)
    }

    @Test func extendedDataIsCarrierDelimited() throws {
        var bytes = Self.expected
        bytes[38] = ISOSignatureRecord.extendedDataFlag
        bytes += [0xAA, 0xBB, 0xCC]
        let record = try ISOSignatureRecord(bytes: bytes)
        #expect(record.extendedData == [0xAA, 0xBB, 0xCC])
        #expect(record.encoded() == bytes)
    }

    @Test func writerValidatesLikeTheReader() {
        #expect(throws: ISORecordError.self) {
            try ISOSignatureRecord(descriptions: [ISOChannelDescription(channel: .x)], values: [1])
        }
    }

    @Test func capturedRecordsReadBack() throws {
        for pen in PenKind.allKinds {
            let signature = try sampleCapture(pen: pen)
            let record = try ISOSignatureRecord(bytes: signature.isoRecord)
            #expect(record.sampleCount == signature.samples.count)
            #expect(record.channels.contains(.f) == signature.characteristics.reportsPressure)
            #expect(record.channels.contains(.s) == signature.characteristics.reportsHover)
            #expect(record.channels.contains(.az) == signature.characteristics.reportsTilt)
            let xs = record.column(.x) ?? []
            #expect(xs.first == Int32((signature.samples[0].x * 100).rounded()))
        }
    }

    @Test func randomCorruptionsNeverCrashTheReader() throws {
        let seed = testSeed("randomCorruptionsNeverCrashTheReader")
        var random = SeededRandom(seed: seed)
        let base = try sampleCapture(pen: .finger).isoRecord
        var accepted = 0, rejected = 0
        let iterations = 12_000
        for i in 0..<iterations {
            var bytes = i % 10 == 0 ? Self.expected : base
            switch random.int(in: 0...5) {
            case 0:  // flip bits in a few random bytes
                for _ in 0..<random.int(in: 1...4) {
                    let at = random.int(in: 0...(bytes.count - 1))
                    bytes[at] ^= UInt8(truncatingIfNeeded: random.int(in: 1...255))
                }
            case 1:  // truncate
                bytes = Array(bytes.prefix(random.int(in: 0...bytes.count)))
            case 2:  // header corruption
                let at = random.int(in: 0...min(60, bytes.count - 1))
                bytes[at] = UInt8(truncatingIfNeeded: random.next())
            case 3:  // insert random bytes
                let at = random.int(in: 0...bytes.count)
                bytes.insert(contentsOf: (0..<random.int(in: 1...8)).map { _ in UInt8(truncatingIfNeeded: random.next()) }, at: at)
            case 4:  // delete a range
                let at = random.int(in: 0...(bytes.count - 1))
                bytes.removeSubrange(at..<min(bytes.count, at + random.int(in: 1...16)))
            default:  // entirely random short buffer with the right magic
                bytes = Array(Self.expected.prefix(8)) + (0..<random.int(in: 0...64)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            }
            do {
                _ = try ISOSignatureRecord(bytes: bytes)
                accepted += 1
            } catch is ISORecordError {
                rejected += 1
            } catch {
                Issue.record("iteration \(i): unexpected error type \(error) (seed \(seed))")
            }
        }
        #expect(accepted + rejected == iterations)
        #expect(rejected > iterations / 2, "most corruptions should be detected (seed \(seed))")
    }
}
