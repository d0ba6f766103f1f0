import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Runs blocking socket calls on their own thread (never on the cooperative pool).
func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.start()
    }
}

struct SocketFailure: Error, CustomStringConvertible {
    var call: String
    var code: Int32
    var description: String { "\(call) failed: \(String(cString: strerror(code))) (errno \(code))" }
}

/// A plain blocking TCP client: what a test sees is exactly what the kernel says (data, end of
/// stream, ECONNRESET, ECONNREFUSED), and every wait has a deadline (poll), never a sleep.
final class RawClient: Sendable {
    enum Read: Equatable {
        case data([UInt8])
        case end
        case failed(Int32)
        case timedOut
    }

    let descriptor: Int32

    private init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    deinit { Glibc.close(descriptor) }

    static func connect(port: Int) async throws -> RawClient {
        let result: Result<Int32, SocketFailure> = await onThread {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard descriptor >= 0 else { return .failure(SocketFailure(call: "socket", code: errno)) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard status == 0 else {
                let code = errno
                Glibc.close(descriptor)
                return .failure(SocketFailure(call: "connect", code: code))
            }
            return .success(descriptor)
        }
        return RawClient(descriptor: try result.get())
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw SocketFailure(call: "send", code: errno) }
            offset += sent
        }
    }

    /// One read, waiting at most `timeout` for something to arrive.
    func read(timeout: Duration, max: Int = 64 * 1024) async -> Read {
        let descriptor = self.descriptor
        return await onThread { Self.blockingRead(descriptor, timeout: timeout, max: max) }
    }

    private static func blockingRead(_ descriptor: Int32, timeout: Duration, max: Int) -> Read {
        var pollDescriptor = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let ready = poll(&pollDescriptor, 1, Swift.max(0, milliseconds))
        if ready == 0 { return .timedOut }
        if ready < 0 { return .failed(errno) }
        var buffer = [UInt8](repeating: 0, count: max)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        if count > 0 { return .data(Array(buffer[..<count])) }
        if count == 0 { return .end }
        return .failed(errno)
    }

    /// Reads until `count` bytes arrived, the stream ended or failed, or the deadline passed, all
    /// on one thread (so reads follow each other closely). Returns the bytes, the reads it took
    /// and how the last read ended (`nil` when `count` was reached).
    func read(
        _ count: Int, within timeout: Duration = .seconds(10)
    ) async -> (bytes: [UInt8], reads: Int, stop: Read?) {
        let descriptor = self.descriptor
        let (bytes, reads, stop): ([UInt8], Int, Read?) = await onThread {
            let deadline = ContinuousClock.now + timeout
            var bytes: [UInt8] = []
            var reads = 0
            while bytes.count < count {
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { return (bytes, reads, .timedOut) }
                let result = RawClient.blockingRead(descriptor, timeout: left, max: 64 * 1024)
                guard case .data(let chunk) = result else { return (bytes, reads, result) }
                bytes += chunk
                reads += 1
            }
            return (bytes, reads, nil)
        }
        return (bytes, reads, stop)
    }

    /// Reads until the stream ends or fails (or the deadline passes); returns everything read and how it stopped.
    func readToEnd(within timeout: Duration = .seconds(10)) async -> (bytes: [UInt8], stop: Read) {
        let (bytes, _, stop) = await read(Int.max, within: timeout)
        return (bytes, stop ?? .timedOut)
    }
}

/// An upstream TCP server for the proxy to point at (NIO, port 0).
final class TestUpstream: Sendable {
    enum Mode: Sendable {
        /// Writes back what it reads.
        case echo
        /// Writes back the first chunk it reads, then closes.
        case replyAndClose
    }

    let channel: Channel
    var port: Int { channel.localAddress?.port ?? 0 }
    var address: String { "127.0.0.1:\(port)" }

    init(_ mode: Mode = .echo) async throws {
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(UpstreamHandler(mode: mode))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
    }

    func close() async {
        try? await channel.close()
    }
}

private final class UpstreamHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    let mode: TestUpstream.Mode

    init(mode: TestUpstream.Mode) { self.mode = mode }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let write = context.writeAndFlush(data)
        if case .replyAndClose = mode {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            write.whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// Random bytes from a seeded generator (failures replay).
func testBytes(_ count: Int, seed: UInt64 = 1) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}
