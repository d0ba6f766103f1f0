/// Hexadecimal text to bytes, checked: what a `User-Id` key and a key an operator pastes are.
public enum Hex {
    /// The bytes `digits` spell, two digits a byte; nil for an odd count or any other character.
    /// With `lowercaseOnly`, `A`–`F` are refused too (a `User-Id` is written lower-case).
    public static func decode(_ digits: some Collection<UInt8>, lowercaseOnly: Bool = false) -> [UInt8]? {
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var high: UInt8?
        for digit in digits {
            guard let value = value(of: digit, lowercaseOnly: lowercaseOnly) else { return nil }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }

    private static func value(of digit: UInt8, lowercaseOnly: Bool) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F") where !lowercaseOnly: digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
