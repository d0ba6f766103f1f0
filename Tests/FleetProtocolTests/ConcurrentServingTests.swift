import FleetTesting
import Foundation
import Logging
import MessagePack
import Synchronization
import Testing
import ZeroMQ

@testable import FleetProtocol

/// Opens once; every waiter, earlier or later, passes.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    var isOpen: Bool { state.withLock { $0.open } }

    func wait() async {
        await withCheckedContinuation { continuation in
            let passed = state.withLock { state in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if passed { continuation.resume() }
        }
    }
}

/// Every call a handler saw, in order, also as a stream to wait on.
final class CallLog: Sendable {
    let entries: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    private let all = Mutex<[String]>([])

    init() {
        (entries, continuation) = AsyncStream.makeStream()
    }

    func append(_ entry: String) {
        all.withLock { $0.append(entry) }
        continuation.yield(entry)
    }

    var calls: [String] { all.withLock { $0 } }
}

/// How many requests of each peer are in a handler now, and the most ever seen at once.
final class PeerConcurrency: Sendable {
    private let state = Mutex<(now: [String: Int], most: Int)>(([:], 0))

    func enter(_ peer: String) {
        state.withLock { state in
            state.now[peer, default: 0] += 1
            state.most = max(state.most, state.now[peer]!)
        }
    }

    func leave(_ peer: String) { state.withLock { $0.now[peer, default: 0] -= 1 } }

    var mostAtOnceForOnePeer: Int { state.withLock { $0.most } }
}

/// A router whose `auth.userinfo` handler acts on the token: `hold` waits for `gate`,
/// `open` opens it, anything else answers at once; every call is logged in order.
func gatedRouter(gate: Gate, log: CallLog, concurrency: PeerConcurrency = PeerConcurrency()) -> RequestRouter {
    var router = RequestRouter()
    router.on(UserInfoRequest.self) { request, context in
        let peer = context.peerName
        concurrency.enter(peer)
        log.append("\(peer):\(request.accessToken)")
        switch request.accessToken {
        case "hold": await gate.wait()
        case "open": gate.open()
        default:
            // Give other requests of this peer every chance to start alongside (they must not).
            for _ in 0..<5 { await Task.yield() }
        }
        concurrency.leave(peer)
        return UserInfoReply(
            accountID: "acc", accountName: "A", userID: peer, userName: "U", email: request.accessToken, host: "h",
            offlineSigningEnabled: gate.isOpen)
    }
    return router
}

@Suite(.serialized) struct ConcurrentServingTests {
    let context: ZMQContext
    let loop: ZMQIOLoop

    init() throws {
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "concurrent-serving-tests")
    }

    func shutdown() async {
        await loop.shutdown()
        context.shutdown()
    }

    /// A server on a clock nobody advances: no request it queues ages past `maxQueueDelay`, and no
    /// device is declared lost, however slowly the machine runs the test.
    func startServer(
        router: RequestRouter, maxConcurrentRequests: Int = 256, heartbeatInterval: Duration = .milliseconds(100)
    ) async throws -> RunningServer {
        try await RunningServer(
            loop: loop, router: router, maxConcurrentRequests: maxConcurrentRequests, heartbeatInterval: heartbeatInterval, clock: ManualClock())
    }

    /// A serial server would deadlock here: device A's request waits for device B's, which is
    /// only handled while A's is still in progress.
    @Test func oneDevicesSlowRequestDoesNotHoldUpAnother() async throws {
        let gate = Gate()
        let server = try await startServer(
            router: gatedRouter(gate: gate, log: CallLog()))
        let a = makeClient(server.endpoint, loop: loop, device: "dev-a", timeout: .seconds(10), attempts: 1)
        let b = makeClient(server.endpoint, loop: loop, device: "dev-b", timeout: .seconds(10), attempts: 1)
        let connections = [Task { await a.run() }, Task { await b.run() }]
        let held = Task { try await a.request(UserInfoRequest(accessToken: "hold")) }
        let opened = try await b.request(UserInfoRequest(accessToken: "open"))
        #expect(opened.email == "open")
        let released = try await held.value
        #expect(released.email == "hold")
        #expect(released.offlineSigningEnabled)  // answered only after the gate opened
        for connection in connections { connection.cancel() }
        for connection in connections { await connection.value }
        await server.stop()
        await shutdown()
    }

    /// Requests a device sends without waiting for replies are handled one at a time, in order.
    @Test func oneDevicesRequestsAreHandledInArrivalOrder() async throws {
        let log = CallLog()
        let concurrency = PeerConcurrency()
        let server = try await startServer(
            router: gatedRouter(gate: Gate(), log: log, concurrency: concurrency))
        let codec = WireCodec()
        var sockets: [AsyncSocket] = []
        for name in ["raw-1", "raw-2"] {
            var options = SocketOptions()
            options.routingID = Array(name.utf8)
            let socket = try await loop.makeSocket(.dealer, options: options)
            try await socket.connect(server.endpoint)
            sockets.append(socket)
        }
        let count = 30
        for id in 1...count {
            for socket in sockets {
                try await socket.send(
                    try codec.encode(UserInfoRequest(accessToken: "r\(id)"), header: MessageHeader(type: UserInfoRequest.messageType, id: UInt64(id))))
            }
        }
        for socket in sockets {
            var replyTo: [UInt64] = []
            for try await frames in socket.messages {
                replyTo.append(try MessagePackDecoder().decode(MessageHeader.self, from: frames[0]).replyTo ?? 0)
                if replyTo.count == count { break }
            }
            #expect(replyTo == Array(1...UInt64(count)))
        }
        let handled = log.calls
        for name in ["raw-1", "raw-2"] {
            let own = handled.filter { $0.hasPrefix("\(name):") }
            #expect(own == (1...count).map { "\(name):r\($0)" })
        }
        #expect(concurrency.mostAtOnceForOnePeer == 1)
        for socket in sockets { await socket.close() }
        await server.stop()
        await shutdown()
    }

    /// A request that waited behind its connection's earlier one longer than `maxQueueDelay` (1 s)
    /// is answered `busy` without being worked on: its client has resent it or given up. One that
    /// waited less is worked on. The server's clock is the test's, so "longer" is exact.
    @Test(arguments: [(Duration.milliseconds(1_500), true), (Duration.milliseconds(500), false)])
    func aRequestThatWaitedTooLongIsShedNotWorkedOn(waited: Duration, shed: Bool) async throws {
        let gate = Gate()
        let log = CallLog()
        let clock = ManualClock()
        let server = try await RunningServer(loop: loop, router: gatedRouter(gate: gate, log: log), heartbeatInterval: .seconds(10), clock: clock,
            maxQueueDelay: .seconds(1))
        let codec = WireCodec()
        var options = SocketOptions()
        options.routingID = Array("raw-queue".utf8)
        let socket = try await loop.makeSocket(.dealer, options: options)
        try await socket.connect(server.endpoint)
        try await socket.send(try codec.encode(UserInfoRequest(accessToken: "hold"), header: MessageHeader(type: UserInfoRequest.messageType, id: 1)))
        _ = try await first(log.entries, within: .seconds(120), "the held request handled") { $0 == "raw-queue:hold" }
        try await socket.send(try codec.encode(UserInfoRequest(accessToken: "queued"), header: MessageHeader(type: UserInfoRequest.messageType, id: 2)))
        // The heartbeat is read after the queued request (one connection keeps its order): its
        // reply says the request is in the queue, stamped with the clock's time before the advance.
        try await socket.send(try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: 3)))
        let heartbeat = try await first(socket.messages, within: .seconds(120), "the heartbeat's reply") { _ in true }
        #expect(try MessagePackDecoder().decode(MessageHeader.self, from: heartbeat[0]).replyTo == 3)
        await clock.advance(by: waited)
        gate.open()
        var replies: [UInt64: [[UInt8]]] = [:]
        for try await frames in socket.messages {
            replies[try MessagePackDecoder().decode(MessageHeader.self, from: frames[0]).replyTo ?? 0] = frames
            if replies.count == 2 { break }
        }
        let held = try #require(replies[1])
        #expect(try MessagePackDecoder().decode(MessageHeader.self, from: held[0]).type == UserInfoReply.messageType)
        let queued = try #require(replies[2])
        let header = try MessagePackDecoder().decode(MessageHeader.self, from: queued[0])
        if shed {
            #expect(header.type == FleetError.messageType)
            let error = try MessagePackDecoder().decode(FleetError.self, from: queued[1])
            #expect(error.code == .busy && error.retryable && error.retryAfterMs == 200)
            #expect(log.calls == ["raw-queue:hold"], "the shed request's handler never ran")
        } else {
            #expect(header.type == UserInfoReply.messageType)
            #expect(log.calls == ["raw-queue:hold", "raw-queue:queued"])
        }
        await socket.close()
        await server.stop()
        await shutdown()
    }

    /// A heartbeat is answered while the same device's earlier request is still in progress
    /// (liveness never waits behind a slow push).
    @Test func aDevicesHeartbeatIsAnsweredWhileItsEarlierRequestIsInProgress() async throws {
        let gate = Gate()
        let log = CallLog()
        let server = try await startServer(router: gatedRouter(gate: gate, log: log))
        let codec = WireCodec()
        var options = SocketOptions()
        options.routingID = Array("raw-hb".utf8)
        let socket = try await loop.makeSocket(.dealer, options: options)
        try await socket.connect(server.endpoint)
        try await socket.send(
            try codec.encode(UserInfoRequest(accessToken: "hold"), header: MessageHeader(type: UserInfoRequest.messageType, id: 1)))
        _ = try await first(log.entries, within: .seconds(10), "the held request handled") { $0 == "raw-hb:hold" }
        try await socket.send(try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: 2)))
        let heartbeatReply = try await first(socket.messages, within: .seconds(10), "the heartbeat's reply") { _ in true }
        let header = try MessagePackDecoder().decode(MessageHeader.self, from: heartbeatReply[0])
        #expect(header.replyTo == 2 && header.type == HeartbeatReply.messageType)
        gate.open()
        let heldReply = try await first(socket.messages, within: .seconds(10), "the held request's reply") { _ in true }
        #expect(try MessagePackDecoder().decode(MessageHeader.self, from: heldReply[0]).replyTo == 1)
        await socket.close()
        await server.stop()
        await shutdown()
    }

    /// With room for one request at a time, the next device's request is answered `busy` and is
    /// served once the first finishes (the client waits out `retryAfterMs` and sends it again).
    /// The exact call log holds only while no client reconnects: a reconnection resends the
    /// unanswered request (at least once, as the protocol says), so the server's liveness here is
    /// 3 s, not the 300 ms of the other tests, which a loaded CI machine once outlasted.
    @Test func atCapacityTheNextRequestWaitsAndIsThenServed() async throws {
        let gate = Gate()
        let log = CallLog()
        let server = try await startServer(
            router: gatedRouter(gate: gate, log: log), maxConcurrentRequests: 1, heartbeatInterval: .seconds(1))
        let a = makeClient(server.endpoint, loop: loop, device: "dev-a", timeout: .seconds(10), attempts: 1)
        let b = makeClient(server.endpoint, loop: loop, device: "dev-b", timeout: .seconds(10), attempts: 1)
        let connections = [Task { await a.run() }, Task { await b.run() }]
        let held = Task { try await a.request(UserInfoRequest(accessToken: "hold")) }
        _ = try await first(log.entries, within: .seconds(10), "the held request handled") { $0 == "dev-a:hold" }
        let waiting = Task { try await b.request(UserInfoRequest(accessToken: "after")) }
        gate.open()
        #expect(try await held.value.email == "hold")
        let after = try await waiting.value
        #expect(after.email == "after")
        #expect(log.calls == ["dev-a:hold", "dev-b:after"])
        for connection in connections { connection.cancel() }
        for connection in connections { await connection.value }
        await server.stop()
        await shutdown()
    }
}

@Suite struct PeerQueuesTests {
    let a = Array("a".utf8)
    let b = Array("b".utf8)

    @Test func firstRequestOfAnIdlePeerStartsAHandlerLaterOnesQueue() {
        var queues = PeerQueues<Int>(capacity: 10)
        let started = [queues.enqueue(1, for: a), queues.enqueue(2, for: a), queues.enqueue(3, for: b)]
        #expect(started == [true, false, true])
        #expect(queues.activePeers == 2)
        let drained = [queues.next(for: a), queues.next(for: a), queues.next(for: a)]
        #expect(drained == [1, 2, nil])
        #expect(queues.activePeers == 1)
        // Idle again: the next request needs a new handler.
        let restarted = queues.enqueue(4, for: a)
        #expect(restarted)
    }

    @Test func capacityCountsRequestsUntilFinished() {
        var queues = PeerQueues<Int>(capacity: 2)
        #expect(queues.hasCapacity)
        _ = queues.enqueue(1, for: a)
        _ = queues.enqueue(2, for: b)
        #expect(!queues.hasCapacity)
        let taken = queues.next(for: a)
        #expect(taken == 1)
        #expect(!queues.hasCapacity)  // taken but not finished
        queues.finished()
        #expect(queues.hasCapacity)
        #expect(queues.outstanding == 1)
    }

    @Test func capacityIsAtLeastOne() {
        let queues = PeerQueues<Int>(capacity: 0)
        #expect(queues.capacity == 1)
        #expect(queues.hasCapacity)
    }
}
