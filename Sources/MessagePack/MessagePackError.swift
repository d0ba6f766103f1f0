/// An error thrown while encoding or decoding MessagePack.
///
/// Errors carry an opaque ``Code`` (compare it with the static members such as
/// ``Code/truncated``), the coding path of the value at fault, the byte offset
/// in the input when it is known, and a human-readable message.
///
/// ```swift
/// do { _ = try MessagePackDecoder().decode(Push.self, from: bytes) }
/// catch let error as MessagePackError where error.code == .truncated { ... }
/// ```
///
/// `description` renders as
/// `typeMismatch at body.items[3].seq (byte 57): expected unsigned integer, found str`.
public struct MessagePackError: Error, CustomStringConvertible, Sendable {
    /// What kind of problem was found. Opaque so new codes can be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The input ended in the middle of a value.
        public static let truncated = Code("truncated")
        /// A complete value was followed by more bytes.
        public static let trailingBytes = Code("trailingBytes")
        /// The value has a different MessagePack type than the Swift type asks for.
        public static let typeMismatch = Code("typeMismatch")
        /// A `str` value is not valid UTF-8.
        public static let invalidUTF8 = Code("invalidUTF8")
        /// A length or element count is larger than the bytes left in the input.
        public static let lengthExceedsInput = Code("lengthExceedsInput")
        /// Containers are nested deeper than ``MessagePackLimits/maxDepth``.
        public static let depthLimitExceeded = Code("depthLimitExceeded")
        /// A container has more elements than ``MessagePackLimits/maxCollectionCount``.
        public static let collectionLimitExceeded = Code("collectionLimitExceeded")
        /// A str, bin or ext payload, or the whole input, is larger than its limit.
        public static let sizeLimitExceeded = Code("sizeLimitExceeded")
        /// A map lacks a key the Swift type requires.
        public static let keyNotFound = Code("keyNotFound")
        /// An array has fewer elements than the Swift type reads.
        public static let valueNotFound = Code("valueNotFound")
        /// A number does not fit the Swift type asked for.
        public static let valueOutOfRange = Code("valueOutOfRange")
        /// A timestamp extension (type -1) has a bad size or nanoseconds ≥ 10⁹,
        /// or a `Date` cannot be represented as a timestamp.
        public static let invalidTimestamp = Code("invalidTimestamp")
        /// The bytes are not MessagePack (for example the never-used byte 0xc1),
        /// or a Swift type rejected a decoded value.
        public static let invalidInput = Code("invalidInput")
        /// The encoder was used in a way Codable does not allow (for example
        /// writing to a container after its parent moved on).
        public static let invalidEncoderUse = Code("invalidEncoderUse")
    }

    /// What kind of problem was found.
    public var code: Code
    /// The path to the value at fault: keys as they are, array indices as `[n]`.
    public var codingPath: [String]
    /// Byte offset in the input where the problem was found, when known.
    public var offset: Int?
    /// What was wrong, for people.
    public var message: String

    /// Creates an error.
    public init(code: Code, codingPath: [String] = [], offset: Int? = nil, message: String) {
        self.code = code
        self.codingPath = codingPath
        self.offset = offset
        self.message = message
    }

    /// The coding path rendered as `body.items[3].seq`; `<root>` for the top level.
    public var path: String {
        if codingPath.isEmpty { return "<root>" }
        var out = ""
        for component in codingPath {
            if component.hasPrefix("[") || out.isEmpty {
                out += component
            } else {
                out += "." + component
            }
        }
        return out
    }

    public var description: String {
        var out = "\(code) at \(path)"
        if let offset { out += " (byte \(offset))" }
        return out + ": " + message
    }
}

extension MessagePackError {
    /// Renders Codable keys the way ``codingPath`` stores them.
    static func render(_ keys: [any CodingKey]) -> [String] {
        keys.map { key in
            if key is IndexKey, let index = key.intValue { return "[\(index)]" }
            return key.stringValue
        }
    }
}

/// The coding key used for array elements.
struct IndexKey: CodingKey {
    var intValue: Int?
    var stringValue: String { "\(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) {
        guard let value = Int(stringValue) else { return nil }
        intValue = value
    }
}
