import CZlib

/// Why a zlib stream could not be inflated.
public struct InflateError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was wrong, for people.
    public var message: String
    /// True when the stream was readable but its output would pass the bound.
    public var outputLimitExceeded: Bool

    public var description: String { message }
}

/// Bounded inflate of the zlib streams (RFC 1950) in PDFs, through zlib itself.
///
/// The page tree of most modern PDFs sits in compressed object streams, so reading the page
/// count needs inflate. zlib never produces more than `maxOutput + 1` bytes here (the output
/// buffer is never larger), so a small "bomb" costs at most that much memory and work. The
/// two-byte header is checked here and the DEFLATE data is inflated raw: the Adler-32 checksum
/// at the end is not required (PDF writers get it wrong often enough, and it proves nothing the
/// page-tree checks do not).
enum Inflater {
    /// Inflates a zlib stream to at most `maxOutput` bytes.
    /// - Throws: ``InflateError`` for a bad header, malformed or truncated DEFLATE data, or output
    ///   that would pass `maxOutput` (`outputLimitExceeded`).
    static func inflate(_ data: [UInt8], maxOutput: Int) throws(InflateError) -> [UInt8] {
        func failure(_ message: String) -> InflateError { InflateError(message: message, outputLimitExceeded: false) }
        guard maxOutput >= 0 else { throw failure("the output bound \(maxOutput) is negative") }
        guard data.count >= 2 else { throw failure("a zlib stream needs a 2-byte header; got \(data.count) bytes") }
        guard data[0] & 0x0F == 8, data[0] >> 4 <= 7 else {
            throw failure("the zlib header does not announce DEFLATE with a window of at most 32 KiB (CMF 0x\(String(data[0], radix: 16)))")
        }
        guard (UInt(data[0]) << 8 | UInt(data[1])) % 31 == 0 else { throw failure("the zlib header check bits are wrong") }
        guard data[1] & 0x20 == 0 else { throw failure("the zlib stream needs a preset dictionary, which PDFs never use") }
        guard data.count - 2 <= Int(UInt32.max) else { throw failure("the zlib stream is larger than 4 GiB") }

        var stream = z_stream()
        guard inflateInit2_(&stream, -MAX_WBITS, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw failure("zlib could not start inflating (out of memory)")
        }
        defer { inflateEnd(&stream) }

        var output: [UInt8] = []
        // One byte more than allowed: producing it proves the output passes the bound.
        var chunk = [UInt8](repeating: 0, count: min(maxOutput + 1, 64 * 1024))
        return try data.withUnsafeBufferPointer { (input) throws(InflateError) -> [UInt8] in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress! + 2)
            stream.avail_in = UInt32(input.count - 2)
            while true {
                let room = min(chunk.count, maxOutput + 1 - output.count)
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { buffer in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = UInt32(room)
                    let status = CZlib.inflate(&stream, Z_NO_FLUSH)
                    return (status, room - Int(stream.avail_out))
                }
                guard output.count + produced <= maxOutput else {
                    throw InflateError(
                        message: "the stream inflates to more than \(maxOutput) bytes", outputLimitExceeded: true)
                }
                output.append(contentsOf: chunk[0..<produced])
                switch status {
                case Z_STREAM_END:
                    return output
                case Z_OK:
                    continue
                case Z_BUF_ERROR where stream.avail_in == 0:
                    throw failure("the stream is truncated: its data ends before the final block")
                case Z_DATA_ERROR:
                    let reason = stream.msg.map { String(cString: $0) } ?? "invalid DEFLATE data"
                    throw failure("the stream is not valid DEFLATE data: \(reason)")
                case Z_MEM_ERROR:
                    throw failure("zlib ran out of memory")
                default:
                    throw failure("zlib stopped with status \(status)")
                }
            }
        }
    }

    /// ``inflate(_:maxOutput:)``, or `nil` for any failure.
    static func inflateZlib(_ data: [UInt8], maxOutput: Int) -> [UInt8]? {
        try? inflate(data, maxOutput: maxOutput)
    }
}
