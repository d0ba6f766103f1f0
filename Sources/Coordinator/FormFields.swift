/// Reads an `application/x-www-form-urlencoded` body of flat fields into a dictionary without
/// Hummingbird's `URLEncodedFormDecoder`, which builds a node tree and replaces `+` with a
/// substring search: with the signing page's percent-encoded drawing it was about 9% of the
/// coordinator's CPU at 10,000 devices (docs/performance.md).
///
/// It reads only what it can read exactly as that decoder does: an ASCII body of `name=value`
/// pairs split at `&` (a pair without `=` is skipped, as there), names percent-decoded, values
/// with `+` read as a space and then percent-decoded (invalid UTF-8 becomes U+FFFD, as there).
/// Anything else — a non-ASCII byte, an empty name, a name with brackets (a nested key there), a
/// repeated name, a `%` not followed by two hex digits — gives `nil`, and the caller uses the
/// decoder, which reads it or says what is wrong (`CoordinatorFuzzTests` compares the two).
enum FormFields {
    static func parse(_ body: String) -> [String: String]? {
        var body = body
        return body.withUTF8 { bytes -> [String: String]? in
            guard !bytes.contains(where: { $0 >= 0x80 }) else { return nil }
            var fields: [String: String] = [:]
            var start = 0
            while start <= bytes.count {
                var end = start
                while end < bytes.count, bytes[end] != UInt8(ascii: "&") { end += 1 }
                if let equals = bytes[start..<end].firstIndex(of: UInt8(ascii: "=")) {
                    guard let name = decode(UnsafeBufferPointer(rebasing: bytes[start..<equals]), plusIsSpace: false),
                          !name.isEmpty, !name.contains("["), !name.contains("]"),
                          let value = decode(UnsafeBufferPointer(rebasing: bytes[(equals + 1)..<end]), plusIsSpace: true),
                          fields.updateValue(value, forKey: name) == nil
                    else { return nil }
                }
                start = end + 1
            }
            return fields
        }
    }

    /// Percent-decoding; `nil` for a `%` without two hex digits after it.
    static func decode(_ bytes: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool) -> String? {
        guard bytes.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) else {
            return String(decoding: bytes, as: UTF8.self)
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = hex(bytes[index + 1]), let low = hex(bytes[index + 2]) else { return nil }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
