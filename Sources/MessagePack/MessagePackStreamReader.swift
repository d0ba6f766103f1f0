/// Splits a byte stream into complete MessagePack values.
///
/// Bytes may arrive in any pieces (one byte at a time, or many messages in one
/// buffer); ``next()`` returns each value once all of its bytes are there.
/// The same pre-scan and limits as ``MessagePackDecoder`` apply; a value that
/// cannot become valid, or more buffered bytes than `limits.maxInputSize`
/// without completing a value, is an error.
///
/// ```swift
/// var reader = MessagePackStreamReader()
/// reader.append(chunk)
/// while let message = try reader.next() { handle(message) }
/// ```
public struct MessagePackStreamReader: Sendable {
    /// Bounds for each value, and for how much may be buffered.
    public var limits: MessagePackLimits
    private var buffer: [UInt8] = []
    private var start = 0

    /// Creates an empty reader.
    public init(limits: MessagePackLimits = .default) {
        self.limits = limits
    }

    /// Bytes received but not yet returned as part of a value.
    public var bufferedCount: Int { buffer.count - start }

    /// Adds received bytes.
    public mutating func append(_ bytes: [UInt8]) {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The bytes of the next complete value, or `nil` if more input is needed.
    /// - Throws: ``MessagePackError`` when the buffered bytes can never form a valid value.
    public mutating func nextMessage() throws -> [UInt8]? {
        guard bufferedCount > 0 else { return nil }
        var scanLimits = limits
        scanLimits.maxInputSize = .max
        let begin = start
        let result: Result<Scanner.Result, MessagePackError> = buffer.withUnsafeBytes { raw in
            let window = UnsafeRawBufferPointer(rebasing: raw[begin...])
            do throws(MessagePackError) { return .success(try Scanner.scan(window, limits: scanLimits, allowTrailing: true)) }
            catch { return .failure(error) }
        }
        switch result {
        case .success(let scan):
            let message = Array(buffer[begin..<(begin + scan.end)])
            start += scan.end
            return message
        case .failure(let error) where error.code == .truncated || error.code == .lengthExceedsInput:
            if bufferedCount >= limits.maxInputSize {
                throw MessagePackError(code: .sizeLimitExceeded, offset: 0, message: "\(bufferedCount) bytes buffered without a complete value, limit is \(limits.maxInputSize)")
            }
            return nil
        case .failure(let error):
            throw error
        }
    }

    /// The next complete value, or `nil` if more input is needed.
    /// - Throws: ``MessagePackError``.
    public mutating func next() throws -> MessagePackValue? {
        guard let message = try nextMessage() else { return nil }
        return try MessagePackValue.decode(message, limits: limits)
    }

    /// The next complete value decoded as `T`, or `nil` if more input is needed.
    /// - Throws: ``MessagePackError``.
    public mutating func next<T: Decodable>(_ type: T.Type, using decoder: MessagePackDecoder = MessagePackDecoder()) throws -> T? {
        guard let message = try nextMessage() else { return nil }
        return try decoder.decode(type, from: message)
    }
}
