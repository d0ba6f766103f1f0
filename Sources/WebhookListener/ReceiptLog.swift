import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The receipts file: one JSON object per line (``WebhookReceipt``), appended. A listener started
/// again on the same file appends to it; a line cut short by a kill is the last one, and readers
/// skip it.
final class ReceiptLog: Sendable {
    private let descriptor: Int32
    /// Set after a short write: the next line first ends the cut one.
    private let cut = Mutex(false)
    private let encoder: JSONEncoder

    init(path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw WebhookListenerError("cannot open the receipts file \(path): \(String(cString: strerror(errno)))") }
        descriptor = fd
        // A listener killed mid-write left a last line without its newline: end it, so this
        // start's first receipt is a line of its own (readers skip the cut one).
        if let last = Self.lastByte(path: path), last != 0x0A {
            var newline: UInt8 = 0x0A
            guard write(fd, &newline, 1) == 1 else {
                close(fd)
                throw WebhookListenerError("cannot append to the receipts file \(path): \(String(cString: strerror(errno)))")
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.encoder = encoder
    }

    deinit { close(descriptor) }

    private static func lastByte(path: String) -> UInt8? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let end = try? handle.seekToEnd(), end > 0 else { return nil }
        try? handle.seek(toOffset: end - 1)
        return (try? handle.read(upToCount: 1))?.first
    }

    /// Appends one line with one `write` (O_APPEND: whole lines even across processes).
    func append(_ receipt: WebhookReceipt) throws {
        var line = try encoder.encode(receipt)
        line.append(0x0A)
        try cut.withLock { cut in
            if cut { line.insert(0x0A, at: 0) }
            let written = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written == line.count else {
                // A full disk, say: whatever part went out is a cut line the next write ends
                // (nothing written leaves it as it was).
                if written > 0 { cut = true }
                throw WebhookListenerError("cannot append to the receipts file: \(written < 0 ? String(cString: strerror(errno)) : "short write")")
            }
            cut = false
        }
    }
}

/// What went wrong, said plainly.
public struct WebhookListenerError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
