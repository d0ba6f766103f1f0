import Chaos
import FleetTesting
import Foundation
import Logging
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The proxy over real sockets: bytes pass unchanged, and each toxic does what it says.
/// Timing checks are lower bounds only (a toxic must delay at least this much), never speed.
@Suite struct FaultProxyTests {
    @Test func bytesPassUnchangedBothWays() async throws {
        let rig = try await ProxyRig()
        let payload = testBytes(1_000_000, seed: 7)
        let client = try await RawClient.connect(port: rig.port)
        // A megabyte in both directions at once: more than the socket buffers, so backpressure works.
        async let sent: Void = onThread { try? client.send(payload) }
        let (echoed, _, stop) = await client.read(payload.count, within: .seconds(30))
        await sent
        #expect(stop == nil)
        #expect(echoed == payload)
        await rig.stop()
    }

    @Test func latencyDelaysAtLeastTheConfiguredTime() async throws {
        let rig = try await ProxyRig()
        let client = try await RawClient.connect(port: rig.port)
        try client.send([1])
        #expect(await client.read(1).bytes == [1])
        // Added to the open connection: toxics reach live connections, as in Toxiproxy.
        try await rig.server.addToxic(Toxic(name: "slow", kind: .latency(latency: 250, jitter: 20)), to: "p")
        let start = ContinuousClock.now
        try client.send([2, 3])
        let (bytes, _, stop) = await client.read(2)
        let elapsed = start.duration(to: .now)
        #expect(stop == nil && bytes == [2, 3])
        #expect(elapsed >= .milliseconds(230), "latency 250 ± 20 ms, measured \(elapsed)")
        await rig.stop()
    }

    @Test func bandwidthLimitsTheRate() async throws {
        let rig = try await ProxyRig(toxics: [Toxic(stream: .upstream, kind: .bandwidth(rate: 20))])
        let client = try await RawClient.connect(port: rig.port)
        let payload = testBytes(10_000)
        let start = ContinuousClock.now
        try client.send(payload)
        let (bytes, _, stop) = await client.read(payload.count)
        let elapsed = start.duration(to: .now)
        #expect(stop == nil && bytes == payload)
        // 10 000 bytes at 20 KB/s take half a second.
        #expect(elapsed >= .milliseconds(450), "measured \(elapsed)")
        await rig.stop()
    }

    @Test func slowCloseDelaysTheClose() async throws {
        let rig = try await ProxyRig(upstream: .replyAndClose, toxics: [Toxic(kind: .slowClose(delay: 300))])
        let client = try await RawClient.connect(port: rig.port)
        let start = ContinuousClock.now
        try client.send([9, 9])
        let (bytes, stop) = await client.readToEnd()
        let elapsed = start.duration(to: .now)
        #expect(bytes == [9, 9])
        #expect(stop == .end)
        #expect(elapsed >= .milliseconds(300), "measured \(elapsed)")
        await rig.stop()
    }

    @Test func timeoutZeroBlackholesUntilRemoved() async throws {
        let rig = try await ProxyRig(toxics: [Toxic(name: "hole", stream: .upstream, kind: .timeout(timeout: 0))])
        let client = try await RawClient.connect(port: rig.port)
        try client.send([1, 2, 3])
        // Nothing comes back and the connection stays open (a deadline, not a sleep).
        #expect(await client.read(timeout: .milliseconds(400)) == .timedOut)
        try await rig.server.removeToxic("hole", from: "p")
        try client.send([4])
        // Bytes the proxy read while the toxic was there are gone (timeoutClosesAfterTheTimeout
        // shows that on its own); bytes a very busy machine had not let it read yet may still
        // pass, as with Toxiproxy. Either way the connection lives on and new bytes pass.
        var bytes: [UInt8] = []
        while bytes.last != 4 {
            let (chunk, _, stop) = await client.read(1)
            #expect(stop == nil, "got \(bytes + chunk), \(String(describing: stop))")
            guard stop == nil else { break }
            bytes += chunk
        }
        #expect(bytes == [4] || bytes == [1, 2, 3, 4], "\(bytes)")
        await rig.stop()
    }

    @Test func timeoutClosesAfterTheTimeout() async throws {
        let rig = try await ProxyRig(toxics: [Toxic(kind: .timeout(timeout: 200))])
        let start = ContinuousClock.now
        let client = try await RawClient.connect(port: rig.port)
        try client.send([1])
        let (bytes, stop) = await client.readToEnd()
        #expect(bytes.isEmpty, "the echo of the byte is dropped")
        // A close while the kernel still holds unread bytes goes out as a reset.
        #expect(stop == .end || stop == .failed(ECONNRESET), "got \(stop)")
        #expect(start.duration(to: .now) >= .milliseconds(200))
        await rig.stop()
    }

    @Test func resetPeerGivesConnectionReset() async throws {
        let rig = try await ProxyRig(toxics: [Toxic(stream: .upstream, kind: .resetPeer(timeout: 0))])
        let client = try await RawClient.connect(port: rig.port)
        try client.send([1, 2, 3])
        let (bytes, stop) = await client.readToEnd()
        #expect(bytes.isEmpty)
        #expect(stop == .failed(ECONNRESET), "got \(stop)")
        await rig.stop()
    }

    @Test func slicerDeliversInSeveralReads() async throws {
        let rig = try await ProxyRig(toxics: [Toxic(kind: .slicer(averageSize: 100, sizeVariation: 10, delay: 200_000))])
        let client = try await RawClient.connect(port: rig.port)
        let payload = testBytes(400)
        let start = ContinuousClock.now
        try client.send(payload)
        let (bytes, reads, stop) = await client.read(payload.count)
        #expect(stop == nil && bytes == payload)
        // About 4 slices 200 ms apart: more than one read (unsliced, 400 bytes come in one), and
        // at least the gaps' time.
        #expect(reads >= 2, "400 bytes in slices of about 100, 200 ms apart, came in \(reads) reads")
        #expect(start.duration(to: .now) >= .milliseconds(400))
        await rig.stop()
    }

    @Test func limitDataClosesAfterTheLimit() async throws {
        let rig = try await ProxyRig(toxics: [Toxic(kind: .limitData(bytes: 10))])
        let client = try await RawClient.connect(port: rig.port)
        let payload = testBytes(30)
        try client.send(payload)
        let (bytes, stop) = await client.readToEnd()
        #expect(bytes == Array(payload.prefix(10)))
        #expect(stop == .end)
        await rig.stop()
    }

    @Test func disabledProxyClosesConnectionsAndRefusesNewOnes() async throws {
        let rig = try await ProxyRig()
        let client = try await RawClient.connect(port: rig.port)
        try client.send([5])
        #expect(await client.read(1).bytes == [5])

        _ = try await rig.server.setEnabled("p", false)
        let (_, stop) = await client.readToEnd()
        #expect(stop == .end || stop == .failed(ECONNRESET), "got \(stop)")
        await #expect(throws: SocketFailure.self) { _ = try await RawClient.connect(port: rig.port) }
        do {
            _ = try await RawClient.connect(port: rig.port)
        } catch let failure as SocketFailure {
            #expect(failure.code == ECONNREFUSED)
        }

        let enabled = try await rig.server.setEnabled("p", true)
        #expect(enabled.listen == rig.proxy.listen, "back on the same port")
        let again = try await RawClient.connect(port: rig.port)
        try again.send([6])
        #expect(await again.read(1).bytes == [6])
        await rig.stop()
    }

    /// A down proxy keeps its port: nothing else on the machine (an outgoing connection's local
    /// port, another listener) can take it meanwhile and make the proxy's way back fail. No
    /// connection is made first, so no TIME_WAIT socket holds the port instead.
    @Test func aDownProxyHoldsItsPortUntilItIsBack() async throws {
        let rig = try await ProxyRig()
        _ = try await rig.server.setEnabled("p", false)
        #expect(Self.bindErrno(port: rig.port) == EADDRINUSE, "a down proxy keeps its port")
        _ = try await rig.server.setEnabled("p", true)
        _ = try await rig.server.setEnabled("p", false)
        #expect(Self.bindErrno(port: rig.port) == EADDRINUSE, "a rebound proxy keeps its port too")
        await #expect(throws: SocketFailure.self, "down: refused") { _ = try await RawClient.connect(port: rig.port) }
        let enabled = try await rig.server.setEnabled("p", true)
        #expect(enabled.listen == rig.proxy.listen, "back on the same port")
        let client = try await RawClient.connect(port: rig.port)
        try client.send([7])
        #expect(await client.read(1).bytes == [7])
        await rig.stop()
    }

    /// The errno of binding a plain socket (no address or port reuse) to 127.0.0.1:`port`; 0 when it binds.
    static func bindErrno(port: Int) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return errno }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return result == 0 ? 0 : errno
    }

    @Test func toxicityZeroNeverApplies() async throws {
        let rig = try await ProxyRig(toxics: [Toxic(toxicity: 0, kind: .limitData(bytes: 0))])
        for round in 0..<8 {
            let client = try await RawClient.connect(port: rig.port)
            try client.send([UInt8(round), 1])
            let (bytes, _, stop) = await client.read(2)
            #expect(stop == nil && bytes == [UInt8(round), 1], "connection \(round)")
        }
        await rig.stop()
    }

    /// Which of 16 sequential connections a 50% `limit_data` cut.
    func cutPattern(seed: UInt64) async throws -> [Bool] {
        let rig = try await ProxyRig(seed: seed, toxics: [Toxic(name: "cut", toxicity: 0.5, kind: .limitData(bytes: 1))])
        var pattern: [Bool] = []
        for _ in 0..<16 {
            let client = try await RawClient.connect(port: rig.port)
            try client.send([7, 8])
            // A generous deadline, a guard only: a correct proxy answers in milliseconds.
            let (bytes, _, stop) = await client.read(2, within: .seconds(120))
            // Cut: the connection ended before both bytes came back. How it ends depends on timing,
            // not on the decision: a FIN after the one byte, or a reset (with the byte lost) when the
            // proxy closed while the client's second byte was still unread in its socket.
            #expect(stop != .timedOut, "connection \(pattern.count + 1) neither answered nor ended")
            #expect(stop == nil ? bytes == [7, 8] : bytes.count <= 1, "\(bytes) \(String(describing: stop))")
            pattern.append(stop != nil)
        }
        await rig.stop()
        return pattern
    }

    @Test func sameSeedSameToxicityDecisions() async throws {
        let first = try await cutPattern(seed: 1234)
        let second = try await cutPattern(seed: 1234)
        #expect(first == second)
        #expect(first.contains(true) && first.contains(false), "\(first)")
        let predicted = (1...16).map {
            ToxicityDraw.applies(seed: 1234, proxy: "p", connection: UInt64($0), toxic: "cut", revision: 1, toxicity: 0.5)
        }
        #expect(first == predicted)
        let other = (1...16).map {
            ToxicityDraw.applies(seed: 99, proxy: "p", connection: UInt64($0), toxic: "cut", revision: 1, toxicity: 0.5)
        }
        #expect(other != predicted, "another seed draws differently")
    }

    @Test func movingTheUpstreamSendsNewConnectionsThere() async throws {
        let rig = try await ProxyRig()
        let other = try await TestUpstream(.replyAndClose)
        // A connection open before the move, proven through by an echo.
        let before = try await RawClient.connect(port: rig.port)
        try before.send([1, 2])
        #expect(await before.read(2).bytes == [1, 2])

        let moved = try await rig.server.update("p", ProxyUpdate(upstream: other.address))
        #expect(moved.upstream == other.address && moved.listen == rig.proxy.listen)
        let (rest, ended) = await before.readToEnd()
        #expect(rest.isEmpty && ended == .end, "the move closes the connections it had")
        let client = try await RawClient.connect(port: rig.port)
        try client.send([3])
        let (bytes, stop) = await client.readToEnd()
        #expect(bytes == [3] && stop == .end, "the new upstream answers once and closes")
        await other.close()
        await rig.stop()
    }

    @Test func unreachableUpstreamClosesTheClient() async throws {
        let refusing = try RefusingPort()
        let address = refusing.address
        var logger = Logger(label: "chaos-tests")
        logger.logLevel = .critical
        let server = FaultProxyServer(seed: 1, logger: logger)
        let proxy = try await server.create(ProxyDefinition(name: "dead", upstream: address))
        let port = Int(proxy.listen.split(separator: ":").last ?? "") ?? 0
        let client = try await RawClient.connect(port: port)
        let (bytes, stop) = await client.readToEnd()
        #expect(bytes.isEmpty && stop == .end)
        await server.shutdown()
        withExtendedLifetime(refusing) {}
    }
}
