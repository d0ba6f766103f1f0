import MessagePack
import Testing

@testable import FleetProtocol

@Suite struct LivenessTests {
    let start = ContinuousClock.now

    @Test func peerBecomesAliveThenLostAfterTheTimeout() {
        var peer = PeerLiveness(interval: .milliseconds(100), liveness: 3)
        #expect(peer.state == .unknown)
        #expect(peer.check(at: start) == nil, "an unknown peer is never lost")
        #expect(peer.heard(at: start) == .alive)
        #expect(peer.heard(at: start + .milliseconds(50)) == nil, "no change while alive")
        #expect(peer.check(at: start + .milliseconds(350)) == nil, "300 ms timeout counts from the last message")
        #expect(peer.check(at: start + .milliseconds(351)) == .lost)
        #expect(peer.check(at: start + .seconds(5)) == nil, "lost is reported once")
        #expect(peer.heard(at: start + .seconds(6)) == .alive)
    }

    @Test func tableReportsLostPeersOnceAndForgetsThem() {
        var table = LivenessTable<String>(interval: .milliseconds(100), liveness: 2)
        #expect(table.heard("a", at: start) == .alive)
        #expect(table.heard("b", at: start + .milliseconds(150)) == .alive)
        #expect(table.sweep(at: start + .milliseconds(201)) == ["a"])
        #expect(table.sweep(at: start + .milliseconds(202)).isEmpty)
        #expect(table.state(of: "a") == .unknown)
        #expect(table.alivePeers == ["b"])
        #expect(table.sweep(at: start + .milliseconds(400)) == ["b"])
    }

    /// A client whose replies are known to take seconds waits at least that long (twice its reply
    /// timeout) before it declares the server lost, even when the heartbeats' timeout is shorter.
    @Test func aLongerMinimumSilenceIsHonoured() {
        var peer = PeerLiveness(interval: .seconds(1), liveness: 3)
        _ = peer.heard(at: start)
        var plain = peer
        #expect(plain.check(at: start + .milliseconds(3_500)) == .lost, "3 s by the heartbeats alone")
        #expect(peer.check(at: start + .milliseconds(3_500), atLeast: .seconds(4)) == nil)
        #expect(peer.check(at: start + .milliseconds(4_001), atLeast: .seconds(4)) == .lost)
        var short = PeerLiveness(interval: .seconds(1), liveness: 3)
        _ = short.heard(at: start)
        #expect(short.check(at: start + .milliseconds(2_999), atLeast: .seconds(1)) == nil, "a shorter minimum changes nothing")
        #expect(short.check(at: start + .milliseconds(3_001), atLeast: .seconds(1)) == .lost)
    }

    /// A client starved of CPU for 12 s (its node process at nice 19 on a full machine) wakes to
    /// find its server's replies unread: silence alone would declare the server lost and hand it a
    /// reconnection. With probes asked for, the server is lost only once `liveness` probes, an
    /// interval apart, went unanswered; a burst of sends counts once.
    @Test func silenceWithoutUnansweredProbesIsNotLoss() {
        var starved = PeerLiveness(interval: .seconds(1), liveness: 3)
        _ = starved.heard(at: start)
        starved.probed(at: start + .seconds(1))
        starved.probed(at: start + .milliseconds(1_200))
        #expect(starved.unansweredProbes == 1, "sends within an interval are one probe")
        #expect(starved.check(at: start + .seconds(12), probes: 3) == nil, "12 s silent, but only one probe sent")
        starved.probed(at: start + .seconds(12))
        #expect(starved.check(at: start + .milliseconds(12_500), probes: 3) == nil)
        #expect(starved.heard(at: start + .milliseconds(12_600)) == nil, "still alive: its reply was read")
        #expect(starved.unansweredProbes == 0)

        var dead = PeerLiveness(interval: .seconds(1), liveness: 3)
        _ = dead.heard(at: start)
        for second in 1...3 { dead.probed(at: start + .seconds(second)) }
        #expect(dead.check(at: start + .milliseconds(2_999), probes: 3) == nil, "three probes, but not yet the timeout")
        #expect(dead.check(at: start + .milliseconds(3_500), probes: 3) == .lost)
        var withoutProbes = PeerLiveness(interval: .seconds(1), liveness: 3)
        _ = withoutProbes.heard(at: start)
        #expect(withoutProbes.check(at: start + .milliseconds(3_500)) == .lost, "a listener that asks no probes: silence alone")
    }

    /// A server stopped for 10 s (SIGSTOP) excuses that time: its devices, silent only because it
    /// was not reading, are not lost on its waking; one silent beyond the excused time still is.
    @Test func timeTheServerDidNotRunIsNotHeldAgainstItsPeers() {
        var table = LivenessTable<String>(interval: .seconds(1), liveness: 3)
        #expect(table.heard("a", at: start) == .alive)
        #expect(table.heard("b", at: start + .seconds(2)) == .alive)
        let woke = start + .seconds(12)
        var unexcused = table
        #expect(Set(unexcused.sweep(at: woke)) == ["a", "b"], "without the excuse both are lost")
        table.excuse(.seconds(10), now: woke)
        #expect(table.sweep(at: woke).isEmpty, "a: 2 s of silence counted, b: none")
        #expect(table.sweep(at: woke + .milliseconds(1_001)) == ["a"], "a: 3 s and 1 ms")
        #expect(table.alivePeers == ["b"])
        table.excuse(.zero, now: woke)
        table.excuse(.seconds(-5), now: woke)
        #expect(table.sweep(at: woke + .milliseconds(2_999)).isEmpty, "no excuse of nothing or less: b still has its 3 s")
        #expect(table.sweep(at: woke + .milliseconds(3_001)) == ["b"])
        // Never into the future: a peer heard after the server woke keeps that time.
        var fresh = LivenessTable<String>(interval: .seconds(1), liveness: 3)
        _ = fresh.heard("c", at: woke)
        fresh.excuse(.seconds(10), now: woke)
        #expect(fresh.sweep(at: woke + .milliseconds(3_001)) == ["c"])
    }
}

@Suite struct BackoffTests {
    @Test func doublesUpToTheCapAndResets() {
        var backoff = Backoff(initial: .milliseconds(250), maximum: .seconds(2))
        let delays = (0..<6).map { _ in backoff.next() }
        #expect(delays == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2)])
        backoff.reset()
        #expect(backoff.next() == .milliseconds(250))
    }

    @Test func maximumBelowInitialIsRaisedToInitial() {
        var backoff = Backoff(initial: .seconds(1), maximum: .milliseconds(10))
        #expect(backoff.next() == .seconds(1))
        #expect(backoff.next() == .seconds(1))
    }
}

@Suite struct RequestRouterTests {
    func context(_ type: MessageType) -> RequestContext {
        RequestContext(peer: Array("d-1".utf8), header: MessageHeader(type: type, id: 1), receivedAt: .now)
    }

    func message<Body: FleetMessageBody>(_ body: Body) throws -> InboundMessage {
        let codec = WireCodec()
        return try codec.decode(try codec.encode(body, header: MessageHeader(type: Body.messageType, id: 1)))
    }

    @Test func routesToTheTypedHandlerAndEncodesItsReply() async throws {
        var router = RequestRouter()
        router.on(UserInfoRequest.self) { request, context in
            UserInfoReply(
                accountID: "acc", accountName: "A", userID: context.peerName, userName: "U", email: request.accessToken,
                host: "h", offlineSigningEnabled: true)
        }
        let result = await router.route(try message(UserInfoRequest(accessToken: "tok")), context: context(UserInfoRequest.messageType))
        let reply = try result.get()
        #expect(reply.type == UserInfoReply.messageType)
        let decoded = try MessagePackDecoder().decode(UserInfoReply.self, from: reply.body)
        #expect(decoded.email == "tok")
        #expect(decoded.userID == "d-1")
    }

    @Test func handlerErrorsBecomeTypedFailures() async throws {
        var router = RequestRouter()
        router.on(UserInfoRequest.self) { _, _ throws(FleetError) in throw FleetError(.tokenExpired, "expired") }
        let result = await router.route(try message(UserInfoRequest(accessToken: "tok")), context: context(UserInfoRequest.messageType))
        #expect(throws: FleetError(.tokenExpired, "expired")) { try result.get() }
    }

    @Test func knownButUnservedTypeIsUnknownMessageType() async throws {
        let router = RequestRouter()
        let result = await router.route(try message(TemplateFetchRequest(accessToken: "t", templateID: "x")), context: context(TemplateFetchRequest.messageType))
        guard case .failure(let error) = result else {
            Issue.record("expected a failure")
            return
        }
        #expect(error.code == .unknownMessageType)
        #expect(error.message.contains("not served"))
    }
}
