/// A bounded DEFLATE (RFC 1951) decoder for the zlib streams (RFC 1950) in PDFs.
///
/// The page tree of most modern PDFs sits in compressed object streams, so reading the page count
/// needs inflate. The module has no dependencies, hence this small decoder; it stops (returning
/// `nil`) on malformed input or when the output would pass `maxOutput`.
struct Inflater {
    private let input: [UInt8]
    private var pos: Int
    private var bitBuffer = 0
    private var bitCount = 0
    private var output: [UInt8] = []
    private let maxOutput: Int

    private struct Huffman {
        var counts = [Int](repeating: 0, count: 16)
        var symbols: [Int] = []

        /// Builds a canonical Huffman table; `nil` when the lengths over-subscribe the code space.
        init?(lengths: [Int]) {
            for length in lengths { counts[length] += 1 }
            counts[0] = 0
            var left = 1
            for length in 1..<16 {
                left <<= 1
                left -= counts[length]
                if left < 0 { return nil }
            }
            var offsets = [Int](repeating: 0, count: 16)
            for length in 1..<15 { offsets[length + 1] = offsets[length] + counts[length] }
            symbols = [Int](repeating: 0, count: lengths.count)
            for (symbol, length) in lengths.enumerated() where length != 0 {
                symbols[offsets[length]] = symbol
                offsets[length] += 1
            }
        }
    }

    private static let lengthBase = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258]
    private static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    private static let distanceBase = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577]
    private static let distanceExtra = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]
    private static let codeLengthOrder = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]

    private init(input: [UInt8], start: Int, maxOutput: Int) {
        self.input = input
        self.pos = start
        self.maxOutput = maxOutput
    }

    /// Inflates a zlib stream (2-byte header, DEFLATE data, checksum ignored).
    static func inflateZlib(_ data: [UInt8], maxOutput: Int) -> [UInt8]? {
        guard data.count >= 2, data[0] & 0x0F == 8, (Int(data[0]) << 8 | Int(data[1])) % 31 == 0,
              data[1] & 0x20 == 0
        else { return nil }
        var inflater = Inflater(input: data, start: 2, maxOutput: maxOutput)
        return inflater.run() ? inflater.output : nil
    }

    private mutating func bits(_ n: Int) -> Int? {
        while bitCount < n {
            guard pos < input.count else { return nil }
            bitBuffer |= Int(input[pos]) << bitCount
            pos += 1
            bitCount += 8
        }
        let value = bitBuffer & ((1 << n) - 1)
        bitBuffer >>= n
        bitCount -= n
        return value
    }

    private mutating func decode(_ table: Huffman) -> Int? {
        var code = 0, first = 0, index = 0
        for length in 1..<16 {
            guard let bit = bits(1) else { return nil }
            code |= bit
            let count = table.counts[length]
            if code - first < count { return table.symbols[index + code - first] }
            index += count
            first += count
            first <<= 1
            code <<= 1
        }
        return nil
    }

    private mutating func run() -> Bool {
        while true {
            guard let last = bits(1), let type = bits(2) else { return false }
            let ok: Bool
            switch type {
            case 0: ok = stored()
            case 1: ok = fixed()
            case 2: ok = dynamic()
            default: return false
            }
            guard ok else { return false }
            if last == 1 { return true }
        }
    }

    private mutating func stored() -> Bool {
        bitBuffer = 0
        bitCount = 0
        guard pos + 4 <= input.count else { return false }
        let length = Int(input[pos]) | Int(input[pos + 1]) << 8
        let complement = Int(input[pos + 2]) | Int(input[pos + 3]) << 8
        pos += 4
        guard length == ~complement & 0xFFFF, pos + length <= input.count, output.count + length <= maxOutput else { return false }
        output.append(contentsOf: input[pos..<(pos + length)])
        pos += length
        return true
    }

    private mutating func fixed() -> Bool {
        var lengths = [Int](repeating: 8, count: 288)
        for i in 144..<256 { lengths[i] = 9 }
        for i in 256..<280 { lengths[i] = 7 }
        guard let literals = Huffman(lengths: lengths),
              let distances = Huffman(lengths: [Int](repeating: 5, count: 30))
        else { return false }
        return codes(literals, distances)
    }

    private mutating func dynamic() -> Bool {
        guard let hlit = bits(5), let hdist = bits(5), let hclen = bits(4) else { return false }
        let literalCount = hlit + 257, distanceCount = hdist + 1
        guard literalCount <= 286, distanceCount <= 30 else { return false }
        var codeLengths = [Int](repeating: 0, count: 19)
        for i in 0..<(hclen + 4) {
            guard let length = bits(3) else { return false }
            codeLengths[Self.codeLengthOrder[i]] = length
        }
        guard let lengthTable = Huffman(lengths: codeLengths) else { return false }
        var lengths: [Int] = []
        while lengths.count < literalCount + distanceCount {
            guard let symbol = decode(lengthTable) else { return false }
            var repeatValue = 0, repeatCount = 0
            switch symbol {
            case 0..<16:
                lengths.append(symbol)
                continue
            case 16:
                guard let previous = lengths.last, let extra = bits(2) else { return false }
                (repeatValue, repeatCount) = (previous, 3 + extra)
            case 17:
                guard let extra = bits(3) else { return false }
                repeatCount = 3 + extra
            default:
                guard let extra = bits(7) else { return false }
                repeatCount = 11 + extra
            }
            guard lengths.count + repeatCount <= literalCount + distanceCount else { return false }
            lengths.append(contentsOf: repeatElement(repeatValue, count: repeatCount))
        }
        guard lengths[256] != 0,
              let literals = Huffman(lengths: Array(lengths[0..<literalCount])),
              let distances = Huffman(lengths: Array(lengths[literalCount...]))
        else { return false }
        return codes(literals, distances)
    }

    private mutating func codes(_ literals: Huffman, _ distances: Huffman) -> Bool {
        while true {
            guard let symbol = decode(literals) else { return false }
            if symbol < 256 {
                guard output.count < maxOutput else { return false }
                output.append(UInt8(symbol))
            } else if symbol == 256 {
                return true
            } else {
                let index = symbol - 257
                guard index < Self.lengthBase.count, let extra = bits(Self.lengthExtra[index]),
                      let distanceSymbol = decode(distances), distanceSymbol < Self.distanceBase.count,
                      let distanceExtra = bits(Self.distanceExtra[distanceSymbol])
                else { return false }
                let length = Self.lengthBase[index] + extra
                let distance = Self.distanceBase[distanceSymbol] + distanceExtra
                guard distance <= output.count, output.count + length <= maxOutput else { return false }
                let start = output.count - distance
                for i in 0..<length { output.append(output[start + i]) }
            }
        }
    }
}
