import Foundation
import Synchronization
import FleetTesting
import Testing
import CZeroMQ
@testable import ZeroMQ

@Suite("ZeroMQ")
struct ZeroMQTests {
    // MARK: Low-level Socket and Poller

    @Test func socketAndPollerOnOneThread() throws {
        let context = try ZMQContext()
        defer { context.shutdown() }
        let a = try Socket(context: context, type: .pair)
        let b = try Socket(context: context, type: .pair)
        defer { a.close(); b.close() }
        try a.bind("inproc://poller-test")
        try b.connect("inproc://poller-test")
        #expect(try a.lastEndpoint == "inproc://poller-test")

        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }

        let poller = Poller()
        let socketIndex = poller.register(b, events: .readable)
        let fdIndex = poller.register(fd: fds[0], events: .readable)
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)
        #expect(try b.receive(dontWait: true) == nil)

        #expect(try a.send(frames: [bytes("one"), [], bytes("three")], dontWait: true))
        var byte: UInt8 = 1
        #expect(write(fds[1], &byte, 1) == 1)
        #expect(try poller.poll(timeoutMilliseconds: 5000) == 2)
        #expect(poller.returnedEvents(at: socketIndex).contains(.readable))
        #expect(poller.returnedEvents(at: fdIndex).contains(.readable))
        #expect(try b.receive() == [bytes("one"), [], bytes("three")])

        try b.setOption(ZMQ_SNDHWM, Int32(7))
        #expect(try b.int32Option(ZMQ_SNDHWM) == 7)
        a.close()
        a.close()  // idempotent
        #expect(throws: ZMQError.self) { try a.send(frames: [bytes("x")]) }
    }

    @Test func optionsAreAppliedWithTheirUnits() throws {
        let context = try ZMQContext()
        defer { context.shutdown() }
        let socket = try Socket(context: context, type: .router)
        defer { socket.close() }
        var options = SocketOptions()
        options.sendHighWaterMark = 11
        options.receiveHighWaterMark = 12
        options.linger = 0
        options.immediate = true
        options.routerMandatory = true
        options.routerHandover = true
        options.maxMessageSize = 1 << 20
        options.reconnectInterval = .milliseconds(150)
        options.reconnectIntervalMax = .seconds(2)
        options.heartbeatInterval = .seconds(1)
        options.heartbeatTimeout = .milliseconds(3500)
        options.heartbeatTTL = .seconds(5)
        options.routingID = bytes("coordinator")
        try socket.apply(options)
        #expect(try socket.int32Option(ZMQ_SNDHWM) == 11)
        #expect(try socket.int32Option(ZMQ_RCVHWM) == 12)
        #expect(try socket.int32Option(ZMQ_LINGER) == 0)
        #expect(try socket.int32Option(ZMQ_IMMEDIATE) == 1)
        #expect(try socket.int64Option(ZMQ_MAXMSGSIZE) == 1 << 20)
        #expect(try socket.int32Option(ZMQ_RECONNECT_IVL) == 150)
        #expect(try socket.int32Option(ZMQ_RECONNECT_IVL_MAX) == 2000)
        #expect(try socket.int32Option(ZMQ_HEARTBEAT_IVL) == 1000)
        #expect(try socket.int32Option(ZMQ_HEARTBEAT_TIMEOUT) == 3500)
        #expect(try socket.int32Option(ZMQ_HEARTBEAT_TTL) == 5000)
        #expect(try socket.bytesOption(ZMQ_ROUTING_ID) == bytes("coordinator"))
        #expect(SocketOptions().effectiveSendWindow(for: .dealer) == 128)
        #expect(options.effectiveSendWindow(for: .router) == 0)
    }

    @Test func monitorEventFramesAreParsed() throws {
        var head = [UInt8](repeating: 0, count: 6)
        head.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt16(ZMQ_EVENT_DISCONNECTED), toByteOffset: 0, as: UInt16.self)
            raw.storeBytes(of: UInt32(bitPattern: 42), toByteOffset: 2, as: UInt32.self)
        }
        let event = try #require(MonitorEvent(frames: [head, bytes("tcp://127.0.0.1:5555")]))
        #expect(event == MonitorEvent(kind: .disconnected, endpoint: "tcp://127.0.0.1:5555", value: 42))
        #expect(MonitorEvent(frames: [[1, 2]]) == nil)
        #expect(MonitorEvent.Kind(rawValue: UInt16(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) == .handshakeFailedAuth)
        #expect(MonitorEvent.Kind(rawValue: 0x8000) == .other(0x8000))
    }

    // MARK: Async ROUTER / DEALER

    @Test func routerDealerRoundTripWithRoutingIDs() async throws {
        try await withLoop { _, loop in
            let router = try await loop.makeSocket(.router)
            let endpoint = try await router.bind("tcp://127.0.0.1:*")
            #expect(endpoint.hasPrefix("tcp://127.0.0.1:") && !endpoint.hasSuffix(":*"))

            var options = SocketOptions()
            options.routingID = bytes("device-1")
            let dealer = try await loop.makeSocket(.dealer, options: options)
            try await dealer.connect(endpoint)

            try await dealer.send([bytes("hello"), [], bytes("world")])
            let request = try #require(try await router.receive())
            #expect(request == [bytes("device-1"), bytes("hello"), [], bytes("world")])
            try await router.send([request[0], bytes("reply"), bytes("2")])
            #expect(try await dealer.receive() == [bytes("reply"), bytes("2")])

            // Many messages, in order, both directions, with sends not awaited one by one.
            let count = 2000
            let sender = Task {
                for index in 0..<count { try await dealer.send([bytes("\(index)")]) }
            }
            var index = 0
            for try await message in router.messages {
                #expect(message == [bytes("device-1"), bytes("\(index)")])
                try await router.send(message)
                index += 1
                if index == count { break }
            }
            try await sender.value
            for expected in 0..<count {
                let echoed = try #require(try await dealer.receive())
                #expect(echoed == [bytes("\(expected)")])
            }
        }
    }

    @Test func oneLoopServesManyDealers() async throws {
        try await withLoop { _, loop in
            let router = try await loop.makeSocket(.router)
            let endpoint = try await router.bind("tcp://127.0.0.1:*")
            let echo = Task {
                for try await message in router.messages { try await router.send(message) }
            }
            let dealers = 100
            let requests = 5
            let replies = try await withThrowingTaskGroup(of: Int.self) { group in
                for device in 0..<dealers {
                    group.addTask {
                        var options = SocketOptions()
                        options.routingID = bytes("device-\(device)")
                        let dealer = try await loop.makeSocket(.dealer, options: options)
                        try await dealer.connect(endpoint)
                        var good = 0
                        for request in 0..<requests {
                            try await dealer.send([bytes("\(device)/\(request)")])
                            if try await dealer.receive() == [bytes("\(device)/\(request)")] { good += 1 }
                        }
                        await dealer.close()
                        return good
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(replies == dealers * requests)
            await router.close()
            _ = await echo.result
        }
    }

    @Test func routerMandatoryRejectsUnknownPeer() async throws {
        try await withLoop { _, loop in
            var options = SocketOptions()
            options.routerMandatory = true
            let router = try await loop.makeSocket(.router, options: options)
            _ = try await router.bind("tcp://127.0.0.1:*")
            let error = try await #require(throws: ZMQError.self) {
                try await router.send([bytes("nobody"), bytes("hello")])
            }
            #expect(error.errno == EHOSTUNREACH)
            #expect(error.message == String(cString: zmq_strerror(EHOSTUNREACH)))
            // The socket keeps working after the error.
            let error2 = try await #require(throws: ZMQError.self) {
                try await router.send([bytes("nobody-else"), bytes("hello")])
            }
            #expect(error2.errno == EHOSTUNREACH)
        }
    }

    /// `sendOrDrop(_:outcome:)` returns before the I/O thread has tried the send; the outcome
    /// reports what the waiting form returns or throws: sent, dropped (a peer over its high-water
    /// mark) or refused (an unknown peer).
    @Test func sendOrDropWithoutWaitingReportsEachOutcome() async throws {
        try await withLoop { _, loop in
            var routerOptions = SocketOptions()
            routerOptions.routerMandatory = true
            routerOptions.sendHighWaterMark = 1
            let router = try await loop.makeSocket(.router, options: routerOptions)
            let endpoint = try await router.bind("tcp://127.0.0.1:*")
            var options = SocketOptions()
            options.routingID = bytes("reader")
            options.receiveHighWaterMark = 1
            options.receiveBufferLimit = 1
            let dealer = try await loop.makeSocket(.dealer, options: options)
            try await dealer.connect(endpoint)
            try await dealer.send([bytes("hi")])
            _ = try #require(try await router.receive())

            let outcomes = AsyncStream.makeStream(of: Result<Bool, ZMQError>.self)
            router.sendOrDrop([bytes("nobody"), bytes("x")]) { outcomes.continuation.yield($0) }
            var iterator = outcomes.stream.makeAsyncIterator()
            guard case .failure(let refused) = await iterator.next() else {
                Issue.record("a send to an unknown peer must fail")
                return
            }
            #expect(refused.errno == EHOSTUNREACH)

            router.sendOrDrop([bytes("reader"), bytes("first")]) { outcomes.continuation.yield($0) }
            #expect(try (await iterator.next())?.get() == true)
            #expect(try await dealer.receive() == [bytes("first")])

            // The dealer stops reading: its queues fill, and further replies are dropped, not queued.
            var dropped = 0
            for index in 0..<10_000 where dropped == 0 {
                router.sendOrDrop([bytes("reader"), bytes("\(index)")]) { outcomes.continuation.yield($0) }
                if try (await iterator.next())?.get() == false { dropped += 1 }
            }
            #expect(dropped == 1, "a reader that does not read must lose replies, not hold them")

            await router.close()
            router.sendOrDrop([bytes("reader"), bytes("late")]) { outcomes.continuation.yield($0) }
            guard case .failure = await iterator.next() else {
                Issue.record("a send on a closed socket must fail")
                return
            }
            await dealer.close()
        }
    }

    @Test func malformedEndpointThrowsErrnoAndText() async throws {
        try await withLoop { _, loop in
            let dealer = try await loop.makeSocket(.dealer)
            let error = try await #require(throws: ZMQError.self) { try await dealer.connect("not an endpoint") }
            #expect(error.errno == EINVAL)
            #expect(error.message == "Invalid argument")
            #expect(error.operation.contains("not an endpoint"))
            #expect(error.description.contains("Invalid argument"))
            let protocolError = try await #require(throws: ZMQError.self) { try await dealer.connect("bogus://x:1") }
            #expect(protocolError.errno == EPROTONOSUPPORT)
            #expect(!protocolError.message.isEmpty)
        }
    }

    @Test func closeIsIdempotentAndLaterCommandsFail() async throws {
        try await withLoop { _, loop in
            let dealer = try await loop.makeSocket(.dealer)
            await dealer.close()
            await dealer.close()
            let error = try await #require(throws: ZMQError.self) { try await dealer.send([bytes("x")]) }
            #expect(error.errno == ENOTSOCK)
            #expect(try await dealer.receive() == nil)  // the stream has finished
            #expect(loop.statistics.socketsClosed == 1)
        }
    }

    @Test func tasksCanRunOnTheIOThread() async throws {
        try await withLoop { _, loop in
            let (router, dealer, echo) = try await echoPair(on: loop)
            #expect(!loop.isCurrentThread)
            let (onLoop, replies) = try await Task(executorPreference: loop) { () -> (Bool, Int) in
                var replies = 0
                for index in 0..<100 {
                    try await dealer.send([bytes("\(index)")])
                    if try await dealer.receive() == [bytes("\(index)")] { replies += 1 }
                }
                return (loop.isCurrentThread, replies)
            }.value
            #expect(onLoop)
            #expect(replies == 100)
            await router.close()
            _ = await echo.result
        }
    }

    @Test func jobsEnqueuedAfterShutdownStillRun() async throws {
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "zmq-late-jobs")
        await loop.shutdown()
        let value = try await withDeadline(.seconds(120), "a task preferring a stopped loop") {
            await Task(executorPreference: loop) { () -> Int in
                await Task.yield()
                return 42
            }.value
        }
        #expect(value == 42)
        context.shutdown()
    }

    // MARK: Two processes

    @Test func messagesCrossToAnotherProcess() async throws {
        let peer = try await cPeer.value
        try await withLoop { _, loop in
            let router = try await loop.makeSocket(.router)
            let endpoint = try await router.bind("tcp://127.0.0.1:*")
            let count = 200
            let child = try ChildProcess.launch(peer, ["dealer", endpoint, "c-device", "\(count)"], name: "zmq_peer")
            var received = 0
            for try await message in router.messages {
                #expect(message == [bytes("c-device"), bytes("\(received)"), bytes("from-c")])
                try await router.send(message)
                received += 1
                if received == count { break }
            }
            #expect(try await child.waitForExit(timeout: .seconds(120)) == 0, "the C dealer got every echo back")
        }
    }

    @Test func dealerReconnectsAfterPeerProcessRestarts() async throws {
        let peer = try await cPeer.value
        try await withLoop { _, loop in
            let first = try ChildProcess.launch(peer, ["router", "tcp://127.0.0.1:*"], name: "zmq_peer")
            let endpoint = try await first.waitForLine(in: .standardOutput, timeout: .seconds(120)) { _ in true }
            #expect(endpoint.hasPrefix("tcp://127.0.0.1:"))

            var options = SocketOptions()
            options.monitor = true
            options.routingID = bytes("swift-device")
            options.reconnectInterval = .milliseconds(20)
            options.reconnectIntervalMax = .milliseconds(200)
            let dealer = try await loop.makeSocket(.dealer, options: options)
            var events = dealer.monitorEvents.makeAsyncIterator()
            try await dealer.connect(endpoint)
            _ = try await waitForEvent(.connected, on: &events)
            try await dealer.send([bytes("before")])
            #expect(try await dealer.receive() == [bytes("before")])

            first.signal(SIGKILL)
            #expect(try await first.waitForExit(timeout: .seconds(120)) != 0)
            let disconnected = try await waitForEvent(.disconnected, on: &events)
            #expect(disconnected.endpoint == endpoint)

            let second = try ChildProcess.launch(peer, ["router", endpoint], name: "zmq_peer")
            #expect(try await second.waitForLine(in: .standardOutput, timeout: .seconds(120)) { _ in true } == endpoint)
            _ = try await waitForEvent(.connected, on: &events)
            try await dealer.send([bytes("after")])
            #expect(try await dealer.receive() == [bytes("after")])
            second.signal(SIGKILL)
            _ = try await second.waitForExit(timeout: .seconds(120))
        }
    }

    @Test func dealerReconnectsAfterRouterIsClosedAndRebound() async throws {
        try await withLoop { _, loop in
            let router = try await loop.makeSocket(.router)
            // A port above the kernel's ephemeral range (32768–60999 here): between the close and
            // the rebind below, another test binding port 0 cannot be given this one.
            var endpoint = ""
            for port in 61_000...65_000 where endpoint.isEmpty {
                endpoint = (try? await router.bind("tcp://127.0.0.1:\(port)")) ?? ""
            }
            try #require(!endpoint.isEmpty, "no free port in 61000…65000")
            var options = SocketOptions()
            options.monitor = true
            options.routingID = bytes("d")
            options.reconnectInterval = .milliseconds(20)
            let dealer = try await loop.makeSocket(.dealer, options: options)
            var events = dealer.monitorEvents.makeAsyncIterator()
            try await dealer.connect(endpoint)
            try await dealer.send([bytes("1")])
            #expect(try await router.receive() == [bytes("d"), bytes("1")])

            await router.close()
            _ = try await waitForEvent(.disconnected, on: &events)
            // zmq_close is asynchronous: libzmq's reaper thread closes the listener after the
            // dealer saw its connection go, so the port can still be taken for a moment (seen on a
            // busy machine: EADDRINUSE). Bind again until it is free; the deadline only guards a hang.
            let rebound = try await loop.makeSocket(.router)
            let deadline = ContinuousClock.now + .seconds(60)
            var bound: String?
            while bound == nil {
                bound = try? await rebound.bind(endpoint)
                if bound == nil {
                    try #require(ContinuousClock.now < deadline, "\(endpoint) was never free again after the router closed")
                    await Task.yield()
                }
            }
            #expect(bound == endpoint)
            _ = try await waitForEvent(.connected, on: &events)
            try await dealer.send([bytes("2")])
            #expect(try await rebound.receive() == [bytes("d"), bytes("2")])
        }
    }

    // MARK: Scale

    /// A node process holds hundreds of device sockets on one loop; a round trip on one of them
    /// must not make the loop look at the others (zmq_poll over every socket did, 500 items per
    /// wake-up). Every idle socket's monitor still reports its handshake.
    @Test func idleSocketsAreNotAskedOnEveryWakeUp() async throws {
        try await withLoop { _, loop in
            let idleRouter = try await loop.makeSocket(.router)
            let idleEndpoint = try await idleRouter.bind("tcp://127.0.0.1:*")
            var monitored = SocketOptions()
            monitored.monitor = true
            var idle: [AsyncSocket] = []
            for _ in 0..<300 {
                let socket = try await loop.makeSocket(.dealer, options: monitored)
                try await socket.connect(idleEndpoint)
                idle.append(socket)
            }
            for socket in idle {
                var events = socket.monitorEvents.makeAsyncIterator()
                _ = try await waitForEvent(.handshakeSucceeded, on: &events)
            }

            let (router, dealer, echo) = try await echoPair(on: loop)
            try await dealer.send([bytes("warm-up")])
            #expect(try await dealer.receive() == [bytes("warm-up")])

            let before = loop.statistics.eventChecks
            let trips = 200
            for trip in 0..<trips {
                try await dealer.send([bytes("\(trip)")])
                #expect(try await dealer.receive() == [bytes("\(trip)")])
            }
            let checks = loop.statistics.eventChecks - before
            // A look at every socket per wake-up would be at least 300 x 200 = 60,000 checks; a
            // round trip wakes the loop a few times and touches two sockets.
            #expect(checks > 0 && checks <= trips * 20, "\(checks) ZMQ_EVENTS checks for \(trips) round trips")

            echo.cancel()
            for socket in idle { await socket.close() }
            await dealer.close()
            await router.close()
            await idleRouter.close()
            _ = await echo.result
        }
    }

    // MARK: Limits

    @Test func oversizedMessageDisconnectsOnlyThatPeer() async throws {
        try await withLoop { _, loop in
            var routerOptions = SocketOptions()
            routerOptions.maxMessageSize = 1024
            routerOptions.monitor = true
            let router = try await loop.makeSocket(.router, options: routerOptions)
            var events = router.monitorEvents.makeAsyncIterator()
            let endpoint = try await router.bind("tcp://127.0.0.1:*")

            var good = SocketOptions()
            good.routingID = bytes("good")
            let goodDealer = try await loop.makeSocket(.dealer, options: good)
            try await goodDealer.connect(endpoint)
            try await goodDealer.send([bytes("hi")])
            #expect(try await router.receive() == [bytes("good"), bytes("hi")])

            var bad = SocketOptions()
            bad.routingID = bytes("bad")
            let badDealer = try await loop.makeSocket(.dealer, options: bad)
            try await badDealer.connect(endpoint)
            try await badDealer.send([[UInt8](repeating: 7, count: 4096)])
            _ = try await waitForEvent(.disconnected, on: &events)

            try await goodDealer.send([bytes("still there?")])
            #expect(try await router.receive() == [bytes("good"), bytes("still there?")])
            try await router.send([bytes("good"), bytes("yes")])
            #expect(try await goodDealer.receive() == [bytes("yes")])
            #expect(router.bufferedMessageCount == 0, "the oversized message never arrived")
        }
    }

    @Test func slowConsumerKeepsTheBufferBounded() async throws {
        try await withLoop { _, loop in
            let limit = 16
            var receiverOptions = SocketOptions()
            receiverOptions.receiveBufferLimit = limit
            receiverOptions.receiveHighWaterMark = 8
            let receiver = try await loop.makeSocket(.router, options: receiverOptions)
            let endpoint = try await receiver.bind("tcp://127.0.0.1:*")

            var senderOptions = SocketOptions()
            senderOptions.sendHighWaterMark = 8
            let sender = try await loop.makeSocket(.dealer, options: senderOptions)
            try await sender.connect(endpoint)
            // 600 × 16 KB: more than the receive limit, the high-water marks and the loopback
            // kernel buffers hold together, so the receiver pauses and resumes many times. (Each
            // message hops from the I/O thread to the cooperative pool, which the rest of the
            // suite keeps busy: 3,000 of them took 20–47 s there, 0.1 s alone.)
            let count = 600
            let payload = [UInt8](repeating: 1, count: 16 * 1024)
            let producer = Task {
                for index in 0..<count { try await sender.send([bytes("\(index)"), payload]) }
            }

            await receiver.inbox.waitUntilPaused()
            #expect(receiver.bufferedMessageCount <= limit)
            var index = 0
            for try await message in receiver.messages {
                #expect(message.count == 3 && message[1] == bytes("\(index)"))
                #expect(receiver.bufferedMessageCount <= limit)
                index += 1
                if index % 100 == 0 { await Task.yield() }  // a consumer slower than the wire
                if index == count { break }
            }
            try await producer.value
            #expect(receiver.peakBufferedMessageCount <= limit)
            #expect(receiver.inbox.pauses >= 1)
        }
    }

    // MARK: Shutdown

    @Test func shutdownWithPendingSendsCompletes() async throws {
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "zmq-shutdown-test")

        // A dead endpoint: a port held and never listened on (a port bound and released could be
        // taken by another test's socket, which would then accept these sends).
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        let deadEndpoint = "tcp://\(refusing.address)"

        var options = SocketOptions()
        options.sendHighWaterMark = 2
        options.sendWindow = 0  // every send waits until libzmq has it
        let connected = try await loop.makeSocket(.dealer, options: options)
        try await connected.connect(deadEndpoint)
        options.sendWindow = 3  // three sends return at once, then they wait
        let unconnected = try await loop.makeSocket(.dealer, options: options)
        _ = try await loop.makeSocket(.router)  // an idle open socket

        let (progress, progressContinuation) = AsyncStream.makeStream(of: Int.self)
        let producers = [connected, unconnected].map { socket in
            Task { () -> Int in
                var sent = 0
                do {
                    for index in 0..<100 {
                        try await socket.send([bytes("queued \(index)")])
                        sent += 1
                        if socket === connected { progressContinuation.yield(sent) }
                    }
                } catch {
                    #expect(error is ZMQError)
                }
                return sent
            }
        }
        // The connected DEALER queues up to its HWM in libzmq, then its sends wait.
        try await withDeadline(.seconds(120), "the first sends") {
            for await sent in progress where sent >= 2 { return }
        }

        try await withDeadline(.seconds(120), "I/O loop shutdown") { await loop.shutdown() }
        let sent = try await withDeadline(.seconds(120), "pending sends failing") {
            var counts: [Int] = []
            for producer in producers { counts.append(await producer.value) }
            return counts
        }
        #expect(sent[0] >= 2 && sent[0] < 100)
        #expect(sent[1] == 3, "the send window bounds sends nobody waited for")
        try await withDeadline(.seconds(120), "context termination") { await onOwnThread { context.shutdown() } }
        await connected.close()  // after shutdown: a no-op, not a second zmq_close
        let statistics = loop.statistics
        // Two dealers and the idle router (the dead endpoint is a plain socket, not ZeroMQ's).
        #expect(statistics.socketsOpened == 3)
        #expect(statistics.socketsClosed == 3)
        let error = try await #require(throws: ZMQError.self) { try await loop.makeSocket(.dealer) }
        #expect(error.errno == ETERM)
        await loop.shutdown()  // idempotent
    }

    @Test func contextTerminationStopsALoopWithOpenSockets() async throws {
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "zmq-term-test")
        let router = try await loop.makeSocket(.router)
        _ = try await router.bind("tcp://127.0.0.1:*")
        let dealer = try await loop.makeSocket(.dealer)
        let waiting = Task { try await dealer.receive() }
        // zmq_ctx_term waits for the sockets; the loop sees ETERM and closes them.
        try await withDeadline(.seconds(120), "context termination with open sockets") {
            await onOwnThread { context.shutdown() }
        }
        #expect(try await withDeadline(.seconds(120)) { try await waiting.value } == nil)
        try await withDeadline(.seconds(120), "I/O loop shutdown") { await loop.shutdown() }
        #expect(loop.statistics.socketsClosed == 2)
    }
}
