import FleetTesting
import Foundation
import MessagePack
import Synchronization
import Testing
import ZeroMQ

@testable import FleetProtocol

/// Many peers at once (docs/coordinator.md): strangers' requests share a bounded part of the
/// capacity, and memory freed by peers that left is given back to the system.
@Suite(.serialized) struct ManyPeersTests {
    let context: ZMQContext
    let loop: ZMQIOLoop
    let codec = WireCodec()

    init() throws {
        context = try ZMQContext()
        loop = try ZMQIOLoop(context: context, label: "many-peers-tests")
    }

    func shutdown() async {
        await loop.shutdown()
        context.shutdown()
    }

    /// A raw DEALER: CURVE with a fresh key against `serverKey`, or plain TCP named `name`.
    func peer(_ endpoint: String, serverKey: [UInt8]? = nil, name: String = "") async throws -> AsyncSocket {
        var options = SocketOptions()
        if let serverKey {
            options.curve = .client(serverKey: serverKey, keys: try CurveKeyPair.generate())
        } else {
            options.routingID = Array(name.utf8)
        }
        options.linger = 0
        let socket = try await loop.makeSocket(.dealer, options: options)
        try await socket.connect(endpoint)
        return socket
    }

    func send(_ socket: AsyncSocket, _ token: String, id: UInt64) async throws {
        try await socket.send(try codec.encode(UserInfoRequest(accessToken: token), header: MessageHeader(type: UserInfoRequest.messageType, id: id)))
    }

    /// The reply to request `id` on `socket`: its header and body frames.
    func reply(on socket: AsyncSocket, to id: UInt64) async throws -> (MessageHeader, [UInt8]) {
        let frames = try await first(socket.messages, within: .seconds(120), "the reply to \(id)") { frames in
            (try? MessagePackDecoder().decode(MessageHeader.self, from: frames[0]).replyTo) == id
        }
        return (try MessagePackDecoder().decode(MessageHeader.self, from: frames[0]), frames[1])
    }

    /// With a share of two: a stranger's second request, while its first is in progress, is
    /// answered `busy` (one at a time per stranger); with two strangers' requests in progress a
    /// third stranger is answered `busy`; neither handler runs; a key that once succeeded is served
    /// at once; once the held requests finish, the third stranger is served.
    @Test func strangersShareABoundedPartOfTheCapacityProvenKeysDoNot() async throws {
        let gate = Gate()
        let log = CallLog()
        let keys = try CurveKeyPair.generate()
        let server = try await RunningServer(
            loop: loop, router: gatedRouter(gate: gate, log: log), heartbeatInterval: .seconds(10), clock: ManualClock(),
            configure: { configuration in
                configuration.security = .curve(keys)
                configuration.maxStrangerRequests = 2
            })
        let known = try await peer(server.endpoint, serverKey: keys.publicKey)
        let holders = [try await peer(server.endpoint, serverKey: keys.publicKey), try await peer(server.endpoint, serverKey: keys.publicKey)]
        let stranger = try await peer(server.endpoint, serverKey: keys.publicKey)
        func isBusy(_ socket: AsyncSocket, _ id: UInt64) async throws -> Bool {
            let (header, body) = try await reply(on: socket, to: id)
            guard header.type == FleetError.messageType else { return false }
            let error = try MessagePackDecoder().decode(FleetError.self, from: body)
            return error.code == .busy && error.retryable && error.retryAfterMs == 200
        }

        try await send(known, "first", id: 1)
        #expect(try await reply(on: known, to: 1).0.type == UserInfoReply.messageType)  // now proven
        try await send(holders[0], "hold", id: 1)
        _ = try await first(log.entries, within: .seconds(120), "the first held request handled") { $0.hasSuffix(":hold") }
        try await send(holders[0], "second", id: 2)
        #expect(try await isBusy(holders[0], 2), "one request at a time per stranger")
        try await send(holders[1], "hold", id: 1)
        while log.calls.filter({ $0.hasSuffix(":hold") }).count < 2 {
            _ = try await first(log.entries, within: .seconds(120), "the second held request handled") { $0.hasSuffix(":hold") }
        }
        try await send(stranger, "turned-away", id: 1)
        #expect(try await isBusy(stranger, 1), "the strangers' share is taken")
        try await send(known, "served", id: 2)
        #expect(try await reply(on: known, to: 2).0.type == UserInfoReply.messageType)

        gate.open()
        for holder in holders { #expect(try await reply(on: holder, to: 1).0.type == UserInfoReply.messageType) }
        try await send(stranger, "later", id: 2)
        #expect(try await reply(on: stranger, to: 2).0.type == UserInfoReply.messageType)
        #expect(!log.calls.contains { $0.hasSuffix(":turned-away") || $0.hasSuffix(":second") }, "the shed requests' handlers never ran")

        for socket in [known, stranger] + holders { await socket.close() }
        await server.stop()
        await shutdown()
    }

    /// Two peers connect, say hello and leave; once both connections closed, the server returns
    /// freed memory, and nothing is returned before. (When the policy waits for a quiet moment,
    /// the liveness sweep asks again: ``MemoryReturnGateTests``.)
    @Test func memoryIsReturnedOncePeersLeft() async throws {
        let returns = CallLog()
        let server = try await RunningServer(
            loop: loop, heartbeatInterval: .seconds(10), clock: ManualClock(), releaseMemory: { returns.append("returned") },
            configure: { configuration in
                configuration.memoryReturn = MemoryReturnPolicy(minPeersGone: 2, quiet: .zero, minInterval: .zero)
            })
        let peers = [try await peer(server.endpoint, name: "leaver-1"), try await peer(server.endpoint, name: "leaver-2")]
        for (index, socket) in peers.enumerated() {
            try await socket.send(try codec.encode(
                Hello(deviceID: "leaver-\(index + 1)", client: "test"), header: MessageHeader(type: Hello.messageType, id: 1)))
            _ = try await reply(on: socket, to: 1)
        }
        #expect(await server.server.aliveDeviceCount == 2)
        #expect(returns.calls.isEmpty, "nothing is returned while the peers are connected")
        await peers[0].close()
        await peers[1].close()
        _ = try await first(returns.entries, within: .seconds(120), "the memory return") { $0 == "returned" }
        #expect(returns.calls == ["returned"])
        await server.stop()
        await shutdown()
    }

    /// With a quiet period, the return waits for a liveness sweep (on the test's clock) at least
    /// that long after the last close.
    @Test func afterACrowdLeftTheNextQuietSweepReturnsMemory() async throws {
        let clock = ManualClock()
        let returns = CallLog()
        let server = try await RunningServer(
            loop: loop, heartbeatInterval: .seconds(10), clock: clock, releaseMemory: { returns.append("returned") },
            configure: { configuration in
                configuration.memoryReturn = MemoryReturnPolicy(minPeersGone: 2, quiet: .seconds(5), minInterval: .zero)
            })
        let peers = [try await peer(server.endpoint, name: "leaver-1"), try await peer(server.endpoint, name: "leaver-2")]
        for (index, socket) in peers.enumerated() {
            try await socket.send(try codec.encode(
                Hello(deviceID: "leaver-\(index + 1)", client: "test"), header: MessageHeader(type: Hello.messageType, id: 1)))
            _ = try await reply(on: socket, to: 1)
        }
        await peers[0].close()
        await peers[1].close()
        #expect(returns.calls.isEmpty, "not at the close: the policy waits for a quiet sweep")
        // One heartbeat interval at a time, each once the sweep is asleep again (its pass done), until
        // a pass after the closes returns the memory.
        let stepping = Task {
            while !Task.isCancelled {
                await clock.sleeping(atLeast: 1)
                await clock.advance(by: .seconds(10))
            }
        }
        _ = try await first(returns.entries, within: .seconds(120), "the memory return") { $0 == "returned" }
        stepping.cancel()
        #expect(returns.calls == ["returned"])
        await server.stop()
        await shutdown()
    }
}

@Suite struct ProvenKeysTests {
    @Test func remembersUpToItsCapacityForgettingTheLongestProven() {
        var keys = ProvenKeys(capacity: 3)
        for n in 0..<10 { keys.insert([UInt8(n)]) }
        #expect(keys.count == 3)
        #expect((0..<7).allSatisfy { !keys.contains([UInt8($0)]) })
        #expect((7..<10).allSatisfy { keys.contains([UInt8($0)]) })
        keys.insert([7])  // proven again: now the most recent
        keys.insert([10])
        #expect(keys.contains([7]) && !keys.contains([8]) && keys.contains([9]) && keys.contains([10]))
        // A device that keeps succeeding stays while a crowd of new keys passes through.
        for n in 11..<1_000 {
            keys.insert([UInt8(n % 256), UInt8(n / 256)])
            if n % 2 == 0 { keys.insert([7]) }
        }
        #expect(keys.contains([7]) && keys.count == 3)
    }
}

@Suite struct MemoryReturnGateTests {
    /// A fixed origin: the gate is given instants, never the machine's time.
    let start = ManualClock().now

    func at(_ seconds: Int64) -> ContinuousClock.Instant { start + .seconds(seconds) }

    /// Closes a connection at each of `closes` (seconds), then asks whether memory is due at `check`.
    func due(_ gate: inout MemoryReturnGate, closes: [Int64] = [], check: Int64) -> Bool {
        for second in closes { gate.connectionClosed(at: at(second)) }
        return gate.isDue(at: at(check))
    }

    @Test func returnsOnceEnoughLeftAndTheyStoppedLeavingAtMostOncePerInterval() {
        var gate = MemoryReturnGate(policy: MemoryReturnPolicy(minPeersGone: 3, quiet: .seconds(2), minInterval: .seconds(10)))
        let answers = [
            due(&gate, closes: [0, 1], check: 5),  // two gone: too few
            due(&gate, closes: [6], check: 7),  // still leaving (the last one 1 s ago)
            due(&gate, check: 8),
            due(&gate, closes: [9, 9, 9, 9], check: 12),  // 4 s after the last return
            due(&gate, check: 18),
            due(&gate, check: 40),  // nothing closed since
        ]
        #expect(answers == [false, false, true, false, true, false])
        #expect(gate.peersGone == 0)
    }
}
