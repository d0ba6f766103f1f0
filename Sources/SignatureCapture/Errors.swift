/// An error raised while capturing a signature.
///
/// Errors carry an opaque ``Code`` (compare against the static members) and a message that says
/// what happened and what to do.
///
/// ```swift
/// do { _ = try capturer.capture(signer: signer, signing: 1, fieldID: "sig1") }
/// catch let error as CaptureError where error.code == .noUsableStrategy { … }
/// ```
public struct CaptureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An opaque error code. New codes may be added; do not switch exhaustively.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// No configured capture strategy is usable right now (for example only pen strategies and no pen).
        public static let noUsableStrategy = Code(name: "noUsableStrategy")
        /// The signer was asked to retry more times than ``CaptureConfiguration/maximumAttempts`` allows
        /// (palm restarts, border alerts, pen drops).
        public static let tooManyAttempts = Code(name: "tooManyAttempts")
        /// The configuration is invalid (empty signing area, area outside the screen, bad pen size …).
        public static let invalidConfiguration = Code(name: "invalidConfiguration")
        /// The signer cancelled the capture dialog.
        public static let aborted = Code(name: "aborted")
        /// The capture produced no pen-down sample inside the screen.
        public static let emptySignature = Code(name: "emptySignature")
        /// The signature is too long for the ISO record's 16-bit time channel or 24-bit sample count.
        public static let signatureTooLong = Code(name: "signatureTooLong")
        /// Rendering the PNG failed in zlib.
        public static let compressionFailed = Code(name: "compressionFailed")
        public var description: String { name }
    }

    /// What kind of error this is.
    public var code: Code
    /// A human-readable explanation with what to do about it.
    public var message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "CaptureError(\(code)): \(message)" }
}

/// An error raised when an ISO/IEC 19794-7 record is malformed.
///
/// ``offset`` is the byte offset where the reader found the problem.
public struct ISORecordError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An opaque error code. New codes may be added; do not switch exhaustively.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// The record does not start with "SDI\0".
        public static let badMagic = Code(name: "badMagic")
        /// The version is not " 10\0".
        public static let unsupportedVersion = Code(name: "unsupportedVersion")
        /// The record ended before a field was complete.
        public static let truncated = Code(name: "truncated")
        /// X or Y is missing from the channel inclusion field.
        public static let missingRequiredChannel = Code(name: "missingRequiredChannel")
        /// Both T and DT are included, or neither.
        public static let conflictingTimeChannels = Code(name: "conflictingTimeChannels")
        /// A channel description lacks a required value (X and Y need scaling, min and max) or sets the reserved bit.
        public static let invalidChannelDescription = Code(name: "invalidChannelDescription")
        /// Channels are out of order or repeated, or the values do not fill whole samples.
        public static let invalidLayout = Code(name: "invalidLayout")
        /// The sample count does not match the bytes in the body.
        public static let sampleCountMismatch = Code(name: "sampleCountMismatch")
        /// A sample value lies outside the channel's declared min/max, or time goes backwards.
        public static let invalidSampleValue = Code(name: "invalidSampleValue")
        /// The record has zero samples.
        public static let noSamples = Code(name: "noSamples")
        public var description: String { name }
    }

    /// What kind of error this is.
    public var code: Code
    /// Byte offset in the record where the problem was found.
    public var offset: Int
    /// A human-readable explanation.
    public var message: String

    /// Creates an error.
    public init(code: Code, offset: Int, message: String) {
        self.code = code
        self.offset = offset
        self.message = message
    }

    public var description: String { "ISORecordError(\(code) at byte \(offset)): \(message)" }
}
