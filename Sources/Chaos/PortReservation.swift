#if canImport(Glibc)
import Glibc
#endif
import NIOCore

/// Holds a proxy's port while the proxy is down: a TCP socket bound to the listener's exact
/// address and never listening, so a connection to the port is refused (as with no listener) but
/// the port is not free. A free port may be taken at any moment as the local port of an outgoing
/// connection on the machine, and the proxy's rebind would then fail with `EADDRINUSE`.
///
/// The reservation sets `SO_REUSEPORT`, and so does a listener rebound on a reserved port (the
/// same user may bind a port twice): the listener is rebound before the reservation closes, and a
/// rebound listener's next reservation is bound before the listener closes, so the port is never
/// free in between (only a proxy's first stop has a moment between its close and the
/// reservation's bind). The kernel does not pick an explicitly bound port for an outgoing
/// connection.
final class PortReservation: Sendable {
    private let descriptor: Int32

    /// Binds a reservation on `address` (the listener's bound address, its real port).
    /// - Throws: ``FaultProxyError/cannotListen(_:_:)`` when the socket cannot be made or bound.
    init(_ address: SocketAddress) throws {
        let family: Int32
        switch address {
        case .v4: family = AF_INET
        case .v6: family = AF_INET6
        case .unixDomainSocket: throw FaultProxyError.cannotListen("\(address)", ReservationError(operation: "reserve a Unix socket", code: EINVAL))
        }
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw FaultProxyError.cannotListen("\(address)", ReservationError(operation: "socket", code: errno)) }
        var on: Int32 = 1
        let bound = address.withSockAddr { pointer, length in
            setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size)) == 0
                && setsockopt(descriptor, SOL_SOCKET, SO_REUSEPORT, &on, socklen_t(MemoryLayout<Int32>.size)) == 0
                && bind(descriptor, pointer, socklen_t(length)) == 0
        }
        guard bound else {
            let code = errno
            close(descriptor)
            throw FaultProxyError.cannotListen("\(address)", ReservationError(operation: "bind", code: code))
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }
}

/// Why a port could not be reserved: the call and its `errno`.
struct ReservationError: Error, CustomStringConvertible {
    var operation: String
    var code: Int32
    var description: String { "\(operation): \(String(cString: strerror(code)))" }
}
