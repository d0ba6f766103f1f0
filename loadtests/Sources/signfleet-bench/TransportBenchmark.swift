// `signfleet-bench transport [seconds]`: DEALER -> ROUTER echo round trips over TCP loopback.
//
// The client is an AsyncSocket driven from a Task through a ZMQIOLoop (the path devices use).
// Against the same raw-libzmq echo server thread as reference/zmq_echo.c, the ratio to that
// program isolates what the async bridge costs; the "async-both" figures also run the server
// through its own ZMQIOLoop, as a coordinator process would; the "idle500" figures run the
// client's round trips while its loop also holds 500 idle monitored DEALERs (a node process).
import Foundation
import ZeroMQ

func transportBenchmark(_ arguments: [String]) async throws {
    let seconds = arguments.first.flatMap(Double.init) ?? 2.0
    // Room for the idle sockets below (each DEALER and its monitor: two sockets, several fds).
    OpenFileLimit.raiseToHardLimit()
    let context = try ZMQContext(maxSockets: 2048)

    // Raw echo server on its own thread: the Socket is created, used and closed there.
    let endpoint = try await withCheckedThrowingContinuation { (ready: CheckedContinuation<String, Error>) in
        let thread = Thread { rawEchoServer(context: context, ready: ready) }
        thread.name = "raw-echo"
        thread.start()
    }
    let loop = try ZMQIOLoop(context: context, label: "bench-client")
    let dealer = try await loop.makeSocket(.dealer)
    try await dealer.connect(endpoint)
    for (size, label) in [(64, "64B"), (6 * 1024, "6KB")] {
        // The client task on the cooperative pool: every reply hops I/O thread -> pool thread.
        let (perSecond, meanMicros) = try await roundTrips(dealer, payloadSize: size, seconds: seconds)
        Report.emit("transport", "swift.rtt.\(label).per_s", perSecond, "rt/s")
        Report.emit("transport", "swift.rtt.\(label).mean_us", meanMicros, "us")
        // The client task on the I/O loop's executor: no hop.
        let (loopPerSecond, loopMeanMicros) = try await Task(executorPreference: loop) {
            try await roundTrips(dealer, payloadSize: size, seconds: seconds)
        }.value
        Report.emit("transport", "swift.loop-executor.rtt.\(label).per_s", loopPerSecond, "rt/s")
        Report.emit("transport", "swift.loop-executor.rtt.\(label).mean_us", loopMeanMicros, "us")
    }

    // The same loop also holding 500 idle DEALERs with monitors, connected to a ROUTER that never
    // speaks: a node process's 250 devices. A wake-up of the loop must not cost per idle socket.
    let idleRouter = try await loop.makeSocket(.router)
    let idleEndpoint = try await idleRouter.bind("tcp://127.0.0.1:*")
    var idle: [AsyncSocket] = []
    var monitored = SocketOptions()
    monitored.monitor = true
    for _ in 0..<500 {
        let socket = try await loop.makeSocket(.dealer, options: monitored)
        try await socket.connect(idleEndpoint)
        idle.append(socket)
    }
    for (size, label) in [(64, "64B"), (6 * 1024, "6KB")] {
        let (perSecond, meanMicros) = try await roundTrips(dealer, payloadSize: size, seconds: seconds)
        Report.emit("transport", "swift.idle500.rtt.\(label).per_s", perSecond, "rt/s")
        Report.emit("transport", "swift.idle500.rtt.\(label).mean_us", meanMicros, "us")
    }
    for socket in idle { await socket.close() }
    await idleRouter.close()

    try await dealer.send([Array("stop".utf8)])
    await dealer.close()

    // Both ends bridged, as a device and the coordinator are: the echo server is an
    // AsyncSocket on a second I/O loop. First with both tasks on the cooperative pool, then
    // with each task on its loop's executor.
    let serverLoop = try ZMQIOLoop(context: context, label: "bench-server")
    for onLoops in [false, true] {
        let router = try await serverLoop.makeSocket(.router)
        let asyncEndpoint = try await router.bind("tcp://127.0.0.1:*")
        let echo: @Sendable () async throws -> Void = {
            for try await message in router.messages { try await router.send(message) }
        }
        let server = onLoops ? Task(executorPreference: serverLoop, operation: echo) : Task(operation: echo)
        let client = try await loop.makeSocket(.dealer)
        try await client.connect(asyncEndpoint)
        let variant = onLoops ? "async-both-on-loops" : "async-both"
        for (size, label) in [(64, "64B"), (6 * 1024, "6KB")] {
            let measure: @Sendable () async throws -> (Double, Double) = {
                try await roundTrips(client, payloadSize: size, seconds: seconds)
            }
            let (perSecond, meanMicros) = onLoops
                ? try await Task(executorPreference: loop, operation: measure).value
                : try await measure()
            Report.emit("transport", "swift.\(variant).rtt.\(label).per_s", perSecond, "rt/s")
            Report.emit("transport", "swift.\(variant).rtt.\(label).mean_us", meanMicros, "us")
        }
        await client.close()
        await router.close()
        _ = await server.result
    }
    await loop.shutdown()
    await serverLoop.shutdown()
    context.shutdown()
}

/// Sequential request/reply round trips for `seconds` after a 200 ms warm-up.
private func roundTrips(_ socket: AsyncSocket, payloadSize: Int, seconds: Double) async throws -> (Double, Double) {
    let payload = [UInt8](repeating: 0x78, count: payloadSize)
    let clock = ContinuousClock()
    func trip() async throws {
        try await socket.send([payload])
        guard let reply = try await socket.receive(), reply.count == 1, reply[0].count == payloadSize else {
            throw BenchmarkFailure(message: "bad or missing echo")
        }
    }
    let warmUpEnd = clock.now.advanced(by: .milliseconds(200))
    while clock.now < warmUpEnd { try await trip() }
    var trips = 0
    let start = clock.now
    let end = start.advanced(by: .milliseconds(Int64(seconds * 1000)))
    repeat {
        for _ in 0..<64 { try await trip() }
        trips += 64
    } while clock.now < end
    let (wholeSeconds, attoseconds) = start.duration(to: clock.now).components
    let elapsed = Double(wholeSeconds) + Double(attoseconds) / 1e18
    return (Double(trips) / elapsed, elapsed / Double(trips) * 1e6)
}

private struct BenchmarkFailure: Error { var message: String }

/// Echoes every message until a one-frame "stop", then closes its socket (raw libzmq, one thread).
private func rawEchoServer(context: ZMQContext, ready: CheckedContinuation<String, Error>) {
    let router: Socket
    do {
        router = try Socket(context: context, type: .router)
        try router.bind("tcp://127.0.0.1:*")
        ready.resume(returning: try router.lastEndpoint)
    } catch {
        ready.resume(throwing: error)
        return
    }
    defer { router.close() }
    do {
        while let message = try router.receive() {
            if message.count == 2, message[1] == Array("stop".utf8) { return }
            try router.send(frames: message)
        }
    } catch {
        print("raw echo server failed: \(error)")
    }
}

