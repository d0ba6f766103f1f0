/// A channel of an ISO/IEC 19794-7 signature time series, identified by its bit in the
/// 2-byte channel inclusion field (bit 15 X … bit 0 R).
public struct ISOChannel: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The bit position in the channel inclusion field (15 = X, most significant).
    public let bit: Int

    init(bit: Int) { self.bit = bit }

    /// X coordinate (signed).
    public static let x = ISOChannel(bit: 15)
    /// Y coordinate (signed).
    public static let y = ISOChannel(bit: 14)
    /// Z coordinate (height above the surface).
    public static let z = ISOChannel(bit: 13)
    /// X velocity (signed).
    public static let vx = ISOChannel(bit: 12)
    /// Y velocity (signed).
    public static let vy = ISOChannel(bit: 11)
    /// X acceleration (signed).
    public static let ax = ISOChannel(bit: 10)
    /// Y acceleration (signed).
    public static let ay = ISOChannel(bit: 9)
    /// Time since the first sample.
    public static let t = ISOChannel(bit: 8)
    /// Time since the previous sample.
    public static let dt = ISOChannel(bit: 7)
    /// Tip force (pressure).
    public static let f = ISOChannel(bit: 6)
    /// Tip switch (1 = touching).
    public static let s = ISOChannel(bit: 5)
    /// Tilt along X (signed).
    public static let tx = ISOChannel(bit: 4)
    /// Tilt along Y (signed).
    public static let ty = ISOChannel(bit: 3)
    /// Azimuth.
    public static let az = ISOChannel(bit: 2)
    /// Elevation (altitude).
    public static let el = ISOChannel(bit: 1)
    /// Rotation.
    public static let r = ISOChannel(bit: 0)

    /// All channels in inclusion (record) order: X first, R last.
    public static let all: [ISOChannel] = (0...15).reversed().map { ISOChannel(bit: $0) }

    /// Whether sample values are signed 16-bit integers (X, Y, VX, VY, AX, AY, TX, TY) rather than unsigned.
    public var isSigned: Bool {
        switch bit {
        case 15, 14, 12, 11, 10, 9, 4, 3: return true
        default: return false
        }
    }

    /// The range a 2-byte sample value of this channel can hold.
    public var valueRange: ClosedRange<Int32> { isSigned ? -32768...32767 : 0...65535 }

    /// Record order: X < Y < … < R.
    public static func < (a: ISOChannel, b: ISOChannel) -> Bool { a.bit > b.bit }

    public var description: String {
        ["R", "EL", "AZ", "TY", "TX", "S", "F", "DT", "T", "AY", "AX", "VY", "VX", "Z", "Y", "X"][bit]
    }
}

/// A channel scaling value: a 5-bit exponent stored with a +16 bias and an 11-bit fraction,
/// meaning `2^exponent × (1 + fraction / 2048)`. Physical value = sample value / scaling value.
public struct ISOScalingValue: Hashable, Sendable {
    /// The exponent, −16…15.
    public var exponent: Int
    /// The fraction, 0…2047.
    public var fraction: Int

    /// Creates a scaling value from its parts, or nil when a part is out of range.
    public init?(exponent: Int, fraction: Int) {
        guard (-16...15).contains(exponent), (0...2047).contains(fraction) else { return nil }
        self.exponent = exponent
        self.fraction = fraction
    }

    /// The nearest representable scaling value to `value`, or nil when out of range.
    public init?(approximating value: Double) {
        guard value > 0, value.isFinite else { return nil }
        var e = Int(value.exponent)
        var f = Int(((value.significand - 1) * 2048).rounded())
        if f == 2048 {
            e += 1
            f = 0
        }
        self.init(exponent: e, fraction: f)
    }

    /// Decodes the 2-byte field.
    public init(encoded: UInt16) {
        exponent = Int(encoded >> 11) - 16
        fraction = Int(encoded & 0x7FF)
    }

    /// The 2-byte field: `(exponent + 16) << 11 | fraction`.
    public var encoded: UInt16 { UInt16((exponent + 16) << 11 | fraction) }

    /// The value this represents.
    public var value: Double { Double(sign: .plus, exponent: exponent, significand: 1 + Double(fraction) / 2048) }
}

/// The description of one included channel: a preamble and the values it flags as present.
public struct ISOChannelDescription: Hashable, Sendable {
    /// The channel described.
    public var channel: ISOChannel
    /// Units per physical unit (X/Y: per millimetre; T: per second; angles: per degree).
    public var scaling: ISOScalingValue?
    /// Smallest value a sample may take.
    public var minimum: Int32?
    /// Largest value a sample may take.
    public var maximum: Int32?
    /// Mean of the channel's values.
    public var mean: Int32?
    /// Standard deviation of the channel's values (always unsigned).
    public var standardDeviation: Int32?
    /// The is-constant flag.
    public var isConstant: Bool
    /// The linear-component-removed flag.
    public var linearComponentRemoved: Bool

    /// Creates a description.
    public init(channel: ISOChannel, scaling: ISOScalingValue? = nil, minimum: Int32? = nil, maximum: Int32? = nil,
                mean: Int32? = nil, standardDeviation: Int32? = nil, isConstant: Bool = false,
                linearComponentRemoved: Bool = false) {
        self.channel = channel
        self.scaling = scaling
        self.minimum = minimum
        self.maximum = maximum
        self.mean = mean
        self.standardDeviation = standardDeviation
        self.isConstant = isConstant
        self.linearComponentRemoved = linearComponentRemoved
    }

    /// The preamble byte: bit 7 scaling, 6 min, 5 max, 4 mean, 3 std, 2 constant, 1 linear component removed, 0 reserved.
    public var preamble: UInt8 {
        (scaling != nil ? 0x80 : 0) | (minimum != nil ? 0x40 : 0) | (maximum != nil ? 0x20 : 0)
            | (mean != nil ? 0x10 : 0) | (standardDeviation != nil ? 0x08 : 0)
            | (isConstant ? 0x04 : 0) | (linearComponentRemoved ? 0x02 : 0)
    }
}

/// An ISO/IEC 19794-7:2007 full-format signature record: writer and validating reader.
///
/// Layout (see docs/signature-format.md): "SDI\0", " 10\0", 2-byte channel inclusion,
/// one description per included channel, a reserved byte, then the body: a flags byte,
/// a 3-byte sample count, and the samples, each channel's value as 2 big-endian bytes in inclusion order.
///
/// ```swift
/// let record = try ISOSignatureRecord(bytes: signature.isoRecord)   // validates
/// let xs = record.column(.x)
/// ```
public struct ISOSignatureRecord: Hashable, Sendable {
    /// Format identifier "SDI\0".
    public static let magic: [UInt8] = [0x53, 0x44, 0x49, 0x00]
    /// Version " 10\0".
    public static let version: [UInt8] = [0x20, 0x31, 0x30, 0x00]
    /// Body flag: extended data follows the samples (to the end of the record).
    public static let extendedDataFlag: UInt8 = 0x80

    /// Channel descriptions in inclusion order.
    public private(set) var descriptions: [ISOChannelDescription]
    /// Sample values, sample-major: `values[sample * channels.count + channelIndex]`.
    public private(set) var values: [Int32]
    /// Extended data after the samples, when present.
    public private(set) var extendedData: [UInt8]?

    /// The included channels in inclusion order.
    public var channels: [ISOChannel] { descriptions.map(\.channel) }
    /// Number of samples.
    public var sampleCount: Int { descriptions.isEmpty ? 0 : values.count / descriptions.count }

    /// Creates a record from descriptions and values, validating it as the reader would.
    /// - Throws: ``ISORecordError`` (offset −1) when the record would be invalid.
    public init(descriptions: [ISOChannelDescription], values: [Int32], extendedData: [UInt8]? = nil) throws {
        self.descriptions = descriptions
        self.values = values
        self.extendedData = extendedData
        try validateHeader(offset: -1)
        guard values.count % descriptions.count == 0 else {
            throw ISORecordError(code: .invalidLayout, offset: -1, message: "\(values.count) values do not fill whole samples of \(descriptions.count) channels")
        }
        guard sampleCount <= 0xFF_FFFF else {
            throw ISORecordError(code: .sampleCountMismatch, offset: -1, message: "\(sampleCount) samples exceed the 3-byte count")
        }
        try validateValues(offset: -1)
    }

    /// The values of one channel, or nil when it is not included.
    public func column(_ channel: ISOChannel) -> [Int32]? {
        guard let index = descriptions.firstIndex(where: { $0.channel == channel }) else { return nil }
        let stride = descriptions.count
        return (0..<sampleCount).map { values[$0 * stride + index] }
    }

    /// The description of a channel, or nil when it is not included.
    public func description(of channel: ISOChannel) -> ISOChannelDescription? {
        descriptions.first { $0.channel == channel }
    }

    // MARK: Writing

    /// The record's bytes.
    public func encoded() -> [UInt8] {
        let capacity = 15 + descriptions.count * 11 + values.count * 2 + (extendedData?.count ?? 0)
        return [UInt8].writing(capacity: capacity) { out in
            out.bytes(ISOSignatureRecord.magic)
            out.bytes(ISOSignatureRecord.version)
            var inclusion: UInt16 = 0
            for d in descriptions { inclusion |= 1 << UInt16(d.channel.bit) }
            out.uint16(inclusion)
            for d in descriptions {
                out.byte(d.preamble)
                if let s = d.scaling { out.uint16(s.encoded) }
                if let v = d.minimum { out.uint16(UInt16(truncatingIfNeeded: v)) }
                if let v = d.maximum { out.uint16(UInt16(truncatingIfNeeded: v)) }
                if let v = d.mean { out.uint16(UInt16(truncatingIfNeeded: v)) }
                if let v = d.standardDeviation { out.uint16(UInt16(truncatingIfNeeded: v)) }
            }
            out.byte(0)  // reserved
            out.byte(extendedData == nil ? 0 : ISOSignatureRecord.extendedDataFlag)
            let n = sampleCount
            out.byte(UInt8(truncatingIfNeeded: n >> 16))
            out.byte(UInt8(truncatingIfNeeded: n >> 8))
            out.byte(UInt8(truncatingIfNeeded: n))
            values.withUnsafeBufferPointer { values in
                for v in values { out.uint16(UInt16(truncatingIfNeeded: v)) }
            }
            if let extendedData { out.bytes(extendedData) }
        }
    }

    // MARK: Reading

    /// Reads and validates a record.
    /// - Parameter bytes: the whole record (it ends where the buffer ends).
    /// - Throws: ``ISORecordError`` naming what is wrong and where.
    public init(bytes: [UInt8]) throws {
        var reader = ByteReader(bytes: bytes)
        let magic = try reader.take(4)
        guard magic.elementsEqual(ISOSignatureRecord.magic) else {
            throw ISORecordError(code: .badMagic, offset: 0, message: "format identifier is not \"SDI\\0\"")
        }
        let version = try reader.take(4)
        guard version.elementsEqual(ISOSignatureRecord.version) else {
            throw ISORecordError(code: .unsupportedVersion, offset: 4, message: "version is not \" 10\\0\" (ISO/IEC 19794-7:2007)")
        }
        let inclusion = try reader.uint16()
        var descriptions: [ISOChannelDescription] = []
        for channel in ISOChannel.all where inclusion & (1 << UInt16(channel.bit)) != 0 {
            let at = reader.offset
            let preamble = try reader.byte()
            guard preamble & 0x01 == 0 else {
                throw ISORecordError(code: .invalidChannelDescription, offset: at, message: "channel \(channel): reserved preamble bit is set")
            }
            var d = ISOChannelDescription(channel: channel)
            if preamble & 0x80 != 0 { d.scaling = ISOScalingValue(encoded: try reader.uint16()) }
            func value() throws -> Int32 {
                let raw = try reader.uint16()
                return channel.isSigned ? Int32(Int16(bitPattern: raw)) : Int32(raw)
            }
            if preamble & 0x40 != 0 { d.minimum = try value() }
            if preamble & 0x20 != 0 { d.maximum = try value() }
            if preamble & 0x10 != 0 { d.mean = try value() }
            if preamble & 0x08 != 0 { d.standardDeviation = Int32(try reader.uint16()) }
            d.isConstant = preamble & 0x04 != 0
            d.linearComponentRemoved = preamble & 0x02 != 0
            descriptions.append(d)
        }
        self.descriptions = descriptions
        self.values = []
        self.extendedData = nil
        try validateHeader(offset: 8)
        _ = try reader.byte()  // reserved
        let flags = try reader.byte()
        let countOffset = reader.offset
        let count = Int(try reader.byte()) << 16 | Int(try reader.byte()) << 8 | Int(try reader.byte())
        guard count > 0 else {
            throw ISORecordError(code: .noSamples, offset: countOffset, message: "the record holds no samples")
        }
        let sampleBytes = count * descriptions.count * 2
        let remaining = bytes.count - reader.offset
        let hasExtended = flags & ISOSignatureRecord.extendedDataFlag != 0
        let sampleSize = descriptions.count * 2
        if remaining < sampleBytes && remaining % sampleSize != 0 {
            throw ISORecordError(code: .truncated, offset: bytes.count, message:
                "the record ends inside a sample: \(remaining) body bytes are not whole samples of \(sampleSize) bytes (count says \(count))")
        }
        guard remaining >= sampleBytes, hasExtended || remaining == sampleBytes else {
            throw ISORecordError(code: .sampleCountMismatch, offset: countOffset, message:
                "sample count \(count) × \(descriptions.count) channels needs \(sampleBytes) bytes, the body has \(remaining)")
        }
        var values = [Int32](repeating: 0, count: count * descriptions.count)
        let signed = descriptions.map(\.channel.isSigned)
        var i = 0
        bytes.withUnsafeBufferPointer { buffer in
            var p = reader.offset
            for _ in 0..<count {
                for isSigned in signed {
                    let raw = UInt16(buffer[p]) << 8 | UInt16(buffer[p + 1])
                    values[i] = isSigned ? Int32(Int16(bitPattern: raw)) : Int32(raw)
                    i += 1
                    p += 2
                }
            }
        }
        let bodyStart = reader.offset
        self.values = values
        if hasExtended { extendedData = Array(bytes[(bodyStart + sampleBytes)...]) }
        try validateValues(offset: bodyStart)
    }

    private func validateHeader(offset: Int) throws {
        let set = Set(descriptions.map(\.channel))
        guard set.count == descriptions.count, descriptions.map(\.channel) == descriptions.map(\.channel).sorted() else {
            throw ISORecordError(code: .invalidLayout, offset: offset, message: "channels must be unique and in inclusion order (X first)")
        }
        guard set.contains(.x), set.contains(.y) else {
            throw ISORecordError(code: .missingRequiredChannel, offset: offset, message: "X and Y channels are required")
        }
        guard set.contains(.t) != set.contains(.dt) else {
            throw ISORecordError(code: .conflictingTimeChannels, offset: offset, message:
                set.contains(.t) ? "both T and DT are included; include exactly one" : "neither T nor DT is included; include exactly one")
        }
        for d in descriptions where d.channel == .x || d.channel == .y {
            guard d.scaling != nil, let lo = d.minimum, let hi = d.maximum, lo <= hi else {
                throw ISORecordError(code: .invalidChannelDescription, offset: offset, message:
                    "channel \(d.channel) needs a scaling value, a minimum and a maximum (minimum ≤ maximum)")
            }
        }
        for d in descriptions {
            for v in [d.minimum, d.maximum, d.mean].compactMap({ $0 }) where !d.channel.valueRange.contains(v) {
                throw ISORecordError(code: .invalidChannelDescription, offset: offset, message: "channel \(d.channel): value \(v) does not fit 16 bits")
            }
        }
    }

    private func validateValues(offset: Int) throws {
        let stride = descriptions.count
        for (index, d) in descriptions.enumerated() {
            let lo = max(d.minimum ?? Int32.min, d.channel.valueRange.lowerBound)
            let hi = min(d.maximum ?? Int32.max, d.channel.valueRange.upperBound)
            var previous = Int32.min
            var i = index
            while i < values.count {
                let v = values[i]
                guard v >= lo, v <= hi else {
                    throw ISORecordError(code: .invalidSampleValue, offset: offset < 0 ? -1 : offset + i * 2, message:
                        "sample \(i / stride) channel \(d.channel): \(v) is outside \(lo)…\(hi)")
                }
                if d.channel == .t {
                    guard v >= previous else {
                        throw ISORecordError(code: .invalidSampleValue, offset: offset < 0 ? -1 : offset + i * 2, message:
                            "sample \(i / stride): time goes backwards")
                    }
                    previous = v
                }
                i += stride
            }
        }
    }
}

extension ISOSignatureRecord {
    /// X/Y resolution written by this library: 100 units per millimetre (0.01 mm, the 2540 lpi of signature pads).
    public static let positionUnitsPerMillimetre = 100.0
    /// Angle resolution written by this library: 100 units per degree.
    public static let angleUnitsPerDegree = 100.0

    /// Builds the record for captured samples: X, Y, T (in ticks of the pen's sample clock),
    /// F when the pen reports pressure, S when it reports hover, AZ and EL when it reports tilt.
    /// - Throws: ``CaptureError`` (``CaptureError/Code/signatureTooLong``) when a value does not fit.
    public init(samples: [PenSample], characteristics pen: PenCharacteristics) throws {
        guard !samples.isEmpty else {
            throw CaptureError(code: .emptySignature, message: "no samples to encode")
        }
        guard samples.count <= 0xFF_FFFF else {
            throw CaptureError(code: .signatureTooLong, message: "\(samples.count) samples exceed the ISO record's 3-byte count")
        }
        let firstTick = samples[0].tick
        guard samples[samples.count - 1].tick - firstTick <= 65535 else {
            throw CaptureError(code: .signatureTooLong, message: "the signature lasts more than 65535 sample periods; the T channel cannot hold it")
        }
        let unit = ISOSignatureRecord.positionUnitsPerMillimetre
        var minX = Int32.max, maxX = Int32.min, minY = Int32.max, maxY = Int32.min
        let stride = 3 + (pen.reportsPressure ? 1 : 0) + (pen.reportsHover ? 1 : 0) + (pen.reportsTilt ? 2 : 0)
        var values = [Int32](repeating: 0, count: samples.count * stride)
        let levels = Double(max(pen.pressureLevels - 1, 1))
        let degrees = ISOSignatureRecord.angleUnitsPerDegree * 180 / Double.pi
        var i = 0
        for sample in samples {
            guard abs(sample.x) < 327, abs(sample.y) < 327 else {
                throw CaptureError(code: .signatureTooLong, message: "position \(sample.x), \(sample.y) mm does not fit 16 bits at 0.01 mm")
            }
            let x = Int32(truncatingIfNeeded: roundToInt(sample.x * unit))
            let y = Int32(truncatingIfNeeded: roundToInt(sample.y * unit))
            minX = min(minX, x); maxX = max(maxX, x); minY = min(minY, y); maxY = max(maxY, y)
            values[i] = x
            values[i + 1] = y
            values[i + 2] = Int32(sample.tick - firstTick)
            i += 3
            if pen.reportsPressure {
                values[i] = Int32(truncatingIfNeeded: roundToInt(sample.pressure * levels))
                i += 1
            }
            if pen.reportsHover {
                values[i] = sample.isDown ? 1 : 0
                i += 1
            }
            if pen.reportsTilt {
                var azimuth = sample.azimuth
                while azimuth < 0 { azimuth += 2 * Double.pi }
                while azimuth >= 2 * Double.pi { azimuth -= 2 * Double.pi }
                values[i] = Int32(truncatingIfNeeded: roundToInt(min(azimuth * degrees, 35999)))
                values[i + 1] = Int32(truncatingIfNeeded: roundToInt(min(max(sample.altitude * degrees, 0), 9000)))
                i += 2
            }
        }
        let scale = ISOScalingValue(approximating: unit)
        let angleScale = ISOScalingValue(approximating: ISOSignatureRecord.angleUnitsPerDegree)
        var descriptions = [
            ISOChannelDescription(channel: .x, scaling: scale, minimum: minX, maximum: maxX),
            ISOChannelDescription(channel: .y, scaling: scale, minimum: minY, maximum: maxY),
            ISOChannelDescription(channel: .t, scaling: ISOScalingValue(approximating: Double(pen.sampleRate))),
        ]
        if pen.reportsPressure {
            descriptions.append(ISOChannelDescription(channel: .f, minimum: 0, maximum: Int32(pen.pressureLevels - 1)))
        }
        if pen.reportsHover { descriptions.append(ISOChannelDescription(channel: .s, minimum: 0, maximum: 1)) }
        if pen.reportsTilt {
            descriptions.append(ISOChannelDescription(channel: .az, scaling: angleScale, minimum: 0, maximum: 35999))
            descriptions.append(ISOChannelDescription(channel: .el, scaling: angleScale, minimum: 0, maximum: 9000))
        }
        self.descriptions = descriptions
        self.values = values
        self.extendedData = nil
    }
}

struct ByteReader {
    let bytes: [UInt8]
    var offset = 0

    mutating func byte() throws -> UInt8 {
        guard offset < bytes.count else {
            throw ISORecordError(code: .truncated, offset: offset, message: "record ends at byte \(bytes.count), a field needs more")
        }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func uint16() throws -> UInt16 {
        UInt16(try byte()) << 8 | UInt16(try byte())
    }

    mutating func take(_ n: Int) throws -> ArraySlice<UInt8> {
        guard bytes.count - offset >= n else {
            throw ISORecordError(code: .truncated, offset: offset, message: "record ends at byte \(bytes.count), a field needs \(n) bytes")
        }
        defer { offset += n }
        return bytes[offset..<offset + n]
    }
}

extension Array where Element == UInt8 {
    @inline(__always) mutating func appendUInt16(_ v: UInt16) {
        append(UInt8(v >> 8))
        append(UInt8(v & 0xFF))
    }

    @inline(__always) mutating func appendUInt32(_ v: UInt32) {
        append(UInt8(v >> 24))
        append(UInt8((v >> 16) & 0xFF))
        append(UInt8((v >> 8) & 0xFF))
        append(UInt8(v & 0xFF))
    }
}
