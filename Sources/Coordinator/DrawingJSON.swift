/// Reads the signing page's drawn signature (`{"pointerType", "width", "height", "points": [[x, y,
/// pressure, timeMs, stroke], …]}`) without `JSONDecoder`, which took about 5% of the
/// coordinator's CPU at 10,000 devices (docs/performance.md).
///
/// It reads only the strict shape the page posts: those four keys once each, in any order, JSON
/// white space, numbers in JSON's grammar that are finite doubles (a non-zero number that rounds
/// to zero is not), a `pointerType` without escapes.
/// Anything else (another key, an escape, a number out of range, bad syntax) gives `nil`, and
/// the caller decodes with `JSONDecoder`, which accepts it or says what is wrong; so where this
/// answers, it answers what `JSONDecoder` would (`theDrawingReaderAgreesWithJSONDecoder` in
/// `CoordinatorFuzzTests` compares them on random and mutated drawings).
enum DrawingJSON {
    struct Drawing: Equatable, Decodable {
        var pointerType: String
        var width: Double
        var height: Double
        var points: [[Double]]
    }

    /// A number token longer than this is left to `JSONDecoder`.
    static let maxNumberLength = 64

    static func parse(_ json: String) -> Drawing? {
        var json = json
        return json.withUTF8 { bytes in
            var reader = Reader(bytes: bytes)
            return reader.drawing()
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        mutating func drawing() -> Drawing? {
            var pointerType: String?, width: Double?, height: Double?, points: [[Double]]?
            guard take(UInt8(ascii: "{")) else { return nil }
            while true {
                guard let key = plainString() else { return nil }
                guard take(UInt8(ascii: ":")) else { return nil }
                // A value that does not read ends the attempt (a later repeat of its key must not
                // count as the first).
                switch key {
                case "pointerType" where pointerType == nil: guard let value = plainString() else { return nil }; pointerType = value
                case "width" where width == nil: guard let value = number() else { return nil }; width = value
                case "height" where height == nil: guard let value = number() else { return nil }; height = value
                case "points" where points == nil: guard let value = pointList() else { return nil }; points = value
                default: return nil
                }
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                break
            }
            skipSpace()
            guard index == bytes.count, let pointerType, let width, let height, let points else { return nil }
            return Drawing(pointerType: pointerType, width: width, height: height, points: points)
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        /// Skips white space, then takes `byte` if it is next.
        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// A string without escapes or control characters.
        mutating func plainString() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    defer { index += 1 }
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                }
                guard byte >= 0x20, byte != UInt8(ascii: "\\") else { return nil }
                index += 1
            }
            return nil
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, as a finite double.
        mutating func number() -> Double? {
            skipSpace()
            let start = index
            func digits(_ reader: inout Reader) -> Int {
                let from = reader.index
                while reader.index < reader.bytes.count, (0x30...0x39).contains(reader.bytes[reader.index]) { reader.index += 1 }
                return reader.index - from
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count else { return nil }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                guard digits(&self) > 0 else { return nil }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { return nil }
            }
            let mantissaEnd = index
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { return nil }
            }
            guard index - start <= DrawingJSON.maxNumberLength else { return nil }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            guard let value = Double(text), value.isFinite else { return nil }
            // JSONDecoder refuses a number that underflows to zero (`1e-400`): left to it.
            if value == 0, bytes[start..<mantissaEnd].contains(where: { (0x31...0x39).contains($0) }) { return nil }
            return value
        }

        /// `[[n, …], …]`
        mutating func pointList() -> [[Double]]? {
            guard take(UInt8(ascii: "[")) else { return nil }
            var points: [[Double]] = []
            if take(UInt8(ascii: "]")) { return points }
            repeat {
                guard take(UInt8(ascii: "[")) else { return nil }
                var point: [Double] = []
                point.reserveCapacity(5)
                if !take(UInt8(ascii: "]")) {
                    repeat {
                        guard let value = number() else { return nil }
                        point.append(value)
                    } while take(UInt8(ascii: ","))
                    guard take(UInt8(ascii: "]")) else { return nil }
                }
                points.append(point)
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "]")) else { return nil }
            return points
        }
    }
}
