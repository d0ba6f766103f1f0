/// Writes a ``HistoryEvent`` as one JSON line without `JSONEncoder`.
///
/// A node appends a line for every operation of every device it runs; at 10,000 devices
/// `JSONEncoder` (a boxed tree per event) took 3–6% of the rural node processes' CPU
/// (docs/performance.md). The bytes are exactly what `JSONEncoder` with `.sortedKeys` writes
/// (`HistoryTests` compares the two): keys in byte order, absent optionals left out, `/` escaped
/// as `\/`, control characters as `\b \f \n \r \t` or `\u00XX`, other characters as UTF-8, a number
/// as its shortest form without a trailing `.0`. It returns `nil` for what it does not write
/// itself (a time that is not finite), and the caller uses `JSONEncoder`.
enum HistoryLine {
    static func encode(_ event: HistoryEvent) -> [UInt8]? {
        guard event.time.isFinite else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(256)
        var first = true
        func key(_ name: StaticString) {
            out.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
            first = false
            out.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }
        // Sorted: details, device, envelope, error, op, process, sequence, serverEnvelope, time,
        // transaction, type.
        if let details = event.details {
            key("details")
            out.append(UInt8(ascii: "{"))
            for (index, pair) in details.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }).enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                string(pair.key, into: &out)
                out.append(UInt8(ascii: ":"))
                string(pair.value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        if let device = event.device { key("device"); string(device, into: &out) }
        if let envelope = event.envelope { key("envelope"); string(envelope, into: &out) }
        if let error = event.error { key("error"); string(error, into: &out) }
        key("op"); string(event.op.rawValue, into: &out)
        key("process"); string(event.process, into: &out)
        if let sequence = event.sequence { key("sequence"); out.append(contentsOf: String(sequence).utf8) }
        if let server = event.serverEnvelope { key("serverEnvelope"); string(server, into: &out) }
        key("time"); number(event.time, into: &out)
        if let transaction = event.transaction { key("transaction"); string(transaction, into: &out) }
        key("type"); string(event.type.rawValue, into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    static func string(_ value: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "/"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "/")])
            case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The shortest decimal that reads back as `value`, as `JSONEncoder` writes it (`5`, not `5.0`).
    static func number(_ value: Double, into out: inout [UInt8]) {
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        out.append(contentsOf: text.utf8)
    }
}
