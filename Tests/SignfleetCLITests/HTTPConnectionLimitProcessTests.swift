import FleetTesting
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Raw TCP to an HTTP listener, with bounded waits (SO_RCVTIMEO), for tests that need more
/// connections than a client library would open.
enum RawHTTP {
    /// A connected socket, or -1.
    static func connectSocket(port: UInt16) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var peer = sockaddr_in()
        peer.sin_family = sa_family_t(AF_INET)
        peer.sin_port = port.bigEndian
        peer.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &peer) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            return -1
        }
        return fd
    }

    static func send(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// The status code of `GET path` on a new connection (nil: no answer within 10 s).
    static func status(port: UInt16, path: String) -> Int? {
        let fd = connectSocket(port: port)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        send(fd, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        var buffer = [UInt8](repeating: 0, count: 512)
        let read = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard read > 12 else { return nil }
        // "HTTP/1.1 503 …"
        return Int(String(decoding: buffer[9..<12], as: UTF8.self))
    }
}

/// The HTTP listener can never take the file descriptors sync needs (issue #14 part 3): with the
/// coordinator's open-file limit lowered to 192, more idle HTTP connections than that limit leave
/// devices syncing; past the connection limit requests get a clear `503` while `/health` answers.
@Suite(.serialized) struct HTTPConnectionLimitProcessTests {
    @Test(.timeLimit(.minutes(3))) func idleHTTPConnectionsBeyondTheFileLimitNeverStopSync() async throws {
        let binary = try signfleetBinary()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("http-limit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("coordinator.sqlite").path
        // 192 open files: the default connection limit is then 48, and no more than 80 are accepted.
        let coordinator = try ChildProcess.launch(
            "/bin/sh",
            [
                "-c",
                "ulimit -n 192 && exec \"$0\" coordinator --bind 'tcp://127.0.0.1:*' --store \"$1\" --seed-demo --heartbeat-ms 200 --probe-http 127.0.0.1:0",
                binary, store,
            ],
            name: "coordinator")
        defer { Task { await coordinator.terminate() } }
        let endpoint = String(
            try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("listening ") }.dropFirst("listening ".count))
        let key = try await curvePublicKey(of: coordinator)
        let http = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("http ") }
        let port = try #require(http.split(separator: ":").last.flatMap { UInt16($0) })
        let probe = try await coordinator.waitForLine(in: .standardOutput, timeout: .seconds(30)) { $0.hasPrefix("http-probe ") }
        let probePort = try #require(probe.split(separator: ":").last.flatMap { UInt16($0) })

        // 60 connections that send half a request and stop: past the limit (48), within what is accepted.
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        func openIdle(_ count: Int) {
            for _ in 0..<count {
                let fd = RawHTTP.connectSocket(port: port)
                if fd >= 0 {
                    RawHTTP.send(fd, "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    idle.append(fd)
                }
            }
        }
        openIdle(60)
        #expect(idle.count == 60)
        try await waitUntil(within: .seconds(20), "a request past the limit is refused with 503") {
            RawHTTP.status(port: port, path: "/status") == 503
        }
        #expect(RawHTTP.status(port: port, path: "/health") == 200, "probes are still answered")

        // 200 more: 260 in all, more than the coordinator's whole file limit (those past 80 wait in
        // the listen backlog of 256; more than that would make connect() itself wait for SYN retries).
        openIdle(200)
        #expect(idle.count == 260)
        // The main listener accepts no more (the probe above waits in its accept queue, and an
        // orchestrator would restart a healthy coordinator); the probe listener answers.
        #expect(RawHTTP.status(port: probePort, path: "/health") == 200, "the probe listener answers past the main listener's limit")
        #expect(RawHTTP.status(port: probePort, path: "/metrics") == 200)
        #expect(RawHTTP.status(port: probePort, path: "/status") == 404, "the probe listener serves probes only")
        let node = try ChildProcess.launch(
            binary,
            [
                "node", "--connect", endpoint, "--server-key=\(key)", "--devices", "2", "--envelopes", "3", "--interval-ms", "50",
                "--data-dir", directory.appendingPathComponent("devices").path, "--seed", "7",
            ],
            name: "node")
        defer { Task { await node.terminate() } }
        // Within 20 s, before the 30 s idle timeout could free a descriptor: without the limit the node
        // could not even connect until then (measured: 46 s for this node, all of it waiting).
        #expect(try await node.waitForExit(timeout: .seconds(20)) == 0, "\(node.output)\n\(coordinator.output)")
        #expect(node.count { $0.contains("] drained") && $0.contains("signed=3") } == 2, "\(node.output)")

        // Once the idle connections go, HTTP serves again.
        for fd in idle { close(fd) }
        idle = []
        try await waitUntil(within: .seconds(30), "the listener serves /status again once the connections closed") {
            RawHTTP.status(port: port, path: "/status") == 200
        }
    }

    /// Re-checks `condition`, a blocking request to the server (on a background thread), until it
    /// holds or `timeout` passes.
    func waitUntil(within timeout: Duration, _ what: String, _ condition: @escaping @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        // Each probe waits for the server's answer to a new request (up to 10 s): the loop is paced
        // by the server, not by a sleep.
        while ContinuousClock.now < deadline {
            if await Task.detached(operation: condition).value { return }
        }
        Issue.record("timed out: \(what)")
        throw CancellationError()
    }
}
