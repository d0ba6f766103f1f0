import Foundation
import Testing

@testable import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// `Socket.cutConnection(descriptor:)` shuts down a connection, and nothing else: the descriptor it
/// is given may have been closed by libzmq and reused by the time it runs.
@Suite struct CutConnectionTests {
    /// A listening loopback TCP socket on port 0, and its port.
    static func listener() throws -> (descriptor: Int32, port: UInt16) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, 8) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        try #require(ok)
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }

    static func connect(to port: UInt16) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        if !connected { close(descriptor); return -1 }
        return descriptor
    }

    @Test func aListenerGivenAsTheDescriptorKeepsListening() throws {
        let (listener, port) = try Self.listener()
        defer { close(listener) }
        #expect(!Socket.isConnectedStream(listener))
        Socket.cutConnection(descriptor: listener)
        // A shut-down listener would refuse this connection (and libzmq's accept would fail with EINVAL).
        let client = Self.connect(to: port)
        #expect(client >= 0, "the listener still takes connections")
        let accepted = accept(listener, nil, nil)
        #expect(accepted >= 0)
        close(client)
        close(accepted)
    }

    @Test func aConnectionIsShutDown() throws {
        let (listener, port) = try Self.listener()
        defer { close(listener) }
        let client = Self.connect(to: port)
        try #require(client >= 0)
        let accepted = accept(listener, nil, nil)
        try #require(accepted >= 0)
        #expect(Socket.isConnectedStream(accepted))
        Socket.cutConnection(descriptor: accepted)
        var byte: UInt8 = 0
        #expect(recv(client, &byte, 1, 0) == 0, "the peer sees the connection end")
        close(client)
        close(accepted)
        // A closed descriptor (or any number not a socket) is left alone.
        #expect(!Socket.isConnectedStream(accepted))
    }
}
