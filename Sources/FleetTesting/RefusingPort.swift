import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Why a ``RefusingPort`` could not be made.
public struct RefusingPortError: Error, CustomStringConvertible {
    public var call: String
    public var code: Int32
    public var description: String { "\(call) failed: \(String(cString: strerror(code))) (errno \(code))" }
}

/// A loopback port that refuses every connection for as long as this lives: a TCP socket bound to
/// it and never listening. (Binding a port and closing it again would leave it free for another
/// test's socket to take, which then answers.)
public final class RefusingPort: Sendable {
    public let port: Int
    private let descriptor: Int32

    public init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw RefusingPortError(call: "socket", code: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(descriptor, pointer, length) == 0 && getsockname(descriptor, pointer, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            Glibc.close(descriptor)
            throw RefusingPortError(call: "bind", code: code)
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// `127.0.0.1:<port>`.
    public var address: String { "127.0.0.1:\(port)" }

    deinit { Glibc.close(descriptor) }
}
