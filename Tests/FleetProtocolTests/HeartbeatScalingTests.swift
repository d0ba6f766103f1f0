import FleetProtocol
import FleetTesting
import Foundation
import Logging
import MessagePack
import Testing
import ZeroMQ

/// The heartbeat interval a `hello` announces grows with the fleet (FleetServerConfiguration.heartbeatBudget),
/// and the server then judges every device by the longest interval it announced.
@Suite struct HeartbeatScalingTests {
    @Test func theAnnouncedIntervalKeepsTheFleetsHeartbeatsWithinTheBudget() {
        let configuration = FleetServerConfiguration(heartbeatInterval: .seconds(1), heartbeatBudget: 1_000)
        #expect(configuration.announcedHeartbeatInterval(connected: 0) == .seconds(1))
        #expect(configuration.announcedHeartbeatInterval(connected: 1_000) == .seconds(1))
        #expect(configuration.announcedHeartbeatInterval(connected: 2_001) == .milliseconds(2_100), "rounded up to 100 ms")
        #expect(configuration.announcedHeartbeatInterval(connected: 10_000) == .seconds(10))
        #expect(configuration.announcedHeartbeatInterval(connected: 10_000_000) == .seconds(60), "at most 60 s")
        #expect(configuration.announcedHeartbeatInterval(connected: -5) == .seconds(1))
        // A nonsensical budget falls back to the default instead of dividing by zero.
        #expect(FleetServerConfiguration(heartbeatBudget: 0).announcedHeartbeatInterval(connected: 10_000) == .seconds(10))
        #expect(FleetServerConfiguration(heartbeatBudget: .nan).heartbeatBudget == 1_000)
    }

    @Test func aHeartbeatReplyFromAnOlderServerHasNoInterval() throws {
        let codec = WireCodec()
        // An older server's reply: the map has only `serverInstance`.
        let body: [UInt8] = [0x81, 0xae] + Array("serverInstance".utf8) + [0xa3] + Array("old".utf8)
        let old = try codec.decodeBody(
            HeartbeatReply.self, from: InboundMessage(header: MessageHeader(type: HeartbeatReply.messageType, id: 1), body: body))
        #expect(old == HeartbeatReply(serverInstance: "old", heartbeatIntervalMs: nil))
        let frames = try codec.encode(
            HeartbeatReply(serverInstance: "new", heartbeatIntervalMs: 7_000), header: MessageHeader(type: HeartbeatReply.messageType, id: 2))
        let message = try codec.decode(frames[...])
        #expect(try codec.decodeBody(HeartbeatReply.self, from: message).heartbeatIntervalMs == 7_000)
        // The generic decoder reads the same bytes.
        #expect(try MessagePackDecoder().decode(HeartbeatReply.self, from: message.body).heartbeatIntervalMs == 7_000)
    }

    @Test func aPeerIsJudgedByTheTablesCurrentInterval() {
        var table = LivenessTable<String>(interval: .milliseconds(100), liveness: 3)
        let start = ContinuousClock.now
        #expect(table.heard("a", at: start) == .alive)
        #expect(table.aliveCount == 1)
        table.interval = .seconds(10)
        _ = table.heard("a", at: start)
        // Silent for 1 s: lost under the old 300 ms timeout, alive under 30 s.
        #expect(table.sweep(at: start + .seconds(1)).isEmpty)
        #expect(table.sweep(at: start + .seconds(31)) == ["a"])
        #expect(table.aliveCount == 0)
    }

    @Test func helloRepliesAnnounceLongerIntervalsAsDevicesConnect() async throws {
        let context = try ZMQContext()
        let loop = try ZMQIOLoop(context: context, label: "heartbeat-scaling")
        var logger = Logger(label: "heartbeat-scaling")
        logger.logLevel = .warning
        // Half a heartbeat a second for the whole fleet: the n-th device alive is told 2n s, or the
        // configured 5 s while that is longer. (The raw sockets send no heartbeats: the server's
        // clock stands still, so none is lost for its silence however slowly this test runs.)
        let server = FleetServer(
            configuration: FleetServerConfiguration(
                endpoint: "tcp://127.0.0.1:*", heartbeatInterval: .seconds(5), heartbeatLiveness: 3, heartbeatBudget: 0.5),
            router: RequestRouter(), loop: loop, logger: logger, clock: ManualClock())
        let endpoint = try await server.bind()
        let serving = Task { try? await server.run() }
        let codec = WireCodec()
        var intervals: [UInt32] = []
        var sockets: [AsyncSocket] = []
        for index in 1...6 {
            var options = SocketOptions()
            options.routingID = Array("dev-\(index)".utf8)
            let socket = try await loop.makeSocket(.dealer, options: options)
            try await socket.connect(endpoint)
            sockets.append(socket)
            let (header, body) = try await rawExchange(
                socket, try codec.encode(Hello(deviceID: "dev-\(index)", client: "t"), header: MessageHeader(type: Hello.messageType, id: 1)))
            #expect(header.type == HelloReply.messageType)
            intervals.append(try MessagePackDecoder().decode(HelloReply.self, from: body).heartbeatIntervalMs)
        }
        #expect(intervals == [5_000, 5_000, 6_000, 8_000, 10_000, 12_000])
        #expect(await server.aliveDeviceCount == 6)
        // The first device was told 5 s when it was alone; its next heartbeat's reply gives it the
        // interval for the fleet as it is now, six devices: 12 s.
        let (header, body) = try await rawExchange(
            sockets[0], try codec.encode(Heartbeat(), header: MessageHeader(type: Heartbeat.messageType, id: 2)))
        #expect(header.type == HeartbeatReply.messageType)
        #expect(try MessagePackDecoder().decode(HeartbeatReply.self, from: body).heartbeatIntervalMs == 12_000)
        for socket in sockets { await socket.close() }
        serving.cancel()
        await serving.value
        await loop.shutdown()
        context.shutdown()
    }
}
