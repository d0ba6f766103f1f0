import Testing

@testable import FleetProtocol
@testable import FleetZeroMQTransport

@Suite struct RetransmissionTimeoutTests {
    @Test func startsAtTheFloorAndDoublesPerTimeoutUpToTheCeiling() {
        var timer = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(8))
        #expect(timer.current == .seconds(1), "before any reply: the configured request timeout")
        var waits: [Duration] = []
        for _ in 0..<5 {
            timer.timedOut()
            waits.append(timer.current)
        }
        #expect(waits == [.seconds(2), .seconds(4), .seconds(8), .seconds(8), .seconds(8)])
    }

    @Test func aReplyEndsTheBackOffAndFastRepliesNeverGoBelowTheFloor() {
        var timer = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(8))
        timer.timedOut()
        timer.timedOut()
        #expect(timer.current == .seconds(4))
        for _ in 0..<20 { timer.record(roundTrip: .milliseconds(5)) }
        #expect(timer.current == .seconds(1), "an idle coordinator's timeouts are exactly the configured ones")
    }

    @Test func slowRepliesRaiseTheWaitAboveTheirRoundTrip() {
        var timer = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(30))
        // The first sample: srtt = 3 s, rttvar = 1.5 s, so srtt + 4 × rttvar = 9 s.
        timer.record(roundTrip: .seconds(3))
        #expect(timer.current == .seconds(9))
        // Steady 3 s replies: the variation decays, the wait approaches 3 s from above.
        for _ in 0..<40 { timer.record(roundTrip: .seconds(3)) }
        #expect(timer.current > .seconds(3) && timer.current < .milliseconds(3_100), "\(timer.current)")
        // A timeout after that doubles what the estimate gave.
        let before = timer.current
        timer.timedOut()
        #expect(timer.current == before * 2)
    }

    @Test func theObservedDelayIsTheEstimateWithoutTheFloor() throws {
        var timer = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(30))
        #expect(timer.observedDelay == nil, "no reply timed yet")
        timer.timedOut()
        #expect(timer.observedDelay == nil, "a timeout is no sample: a configured timeout says nothing about the server")
        timer.record(roundTrip: .seconds(3))
        #expect(timer.observedDelay == .seconds(9))
        var prompt = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(8))
        for _ in 0..<20 { prompt.record(roundTrip: .milliseconds(5)) }
        let delay = try #require(prompt.observedDelay)
        #expect(delay < .milliseconds(50), "a prompt server's delay is its own, not the 1 s floor: \(delay)")
        var huge = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(8))
        huge.record(roundTrip: .seconds(1_000))
        #expect(huge.observedDelay == .seconds(8), "at most the ceiling")
    }

    @Test func boundsAreOrderedAndHugeSamplesStayAtTheCeiling() {
        let inverted = RetransmissionTimeout(floor: .seconds(5), ceiling: .seconds(1))
        #expect(inverted.ceiling == .seconds(5), "a ceiling below the floor is raised to it")
        var timer = RetransmissionTimeout(floor: .milliseconds(100), ceiling: .seconds(10))
        timer.record(roundTrip: .seconds(Int64.max / 4))
        #expect(timer.current == .seconds(10))
        var zero = RetransmissionTimeout(floor: .zero, ceiling: .zero)
        #expect(zero.current == .milliseconds(1), "a zero floor would never wait")
        zero.timedOut()
        #expect(zero.current == .milliseconds(1))
    }
}

/// RFC 9040's sharing: a new timer starts from the estimate of the others, keeps its own bounds,
/// and takes none of their back-off.
@Suite struct RoundTripMemoryTests {
    @Test func aSeededTimerStartsFromTheSharedEstimateWithinItsOwnBounds() {
        let memory = RoundTripMemory()
        let fresh = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(60))
        #expect(memory.seeded(fresh).current == .seconds(1), "nothing recorded: the floor")
        #expect(memory.observedDelay == nil)
        memory.record(roundTrip: .seconds(2))  // srtt 2 s, rttvar 1 s
        #expect(memory.seeded(fresh).current == .seconds(6))
        #expect(memory.seeded(RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(4))).current == .seconds(4), "its own ceiling")
        #expect(memory.seeded(RetransmissionTimeout(floor: .seconds(10), ceiling: .seconds(60))).current == .seconds(10), "its own floor")
        memory.record(roundTrip: .seconds(2))  // rttvar ¾ · 1 = 0.75 s
        #expect(memory.seeded(fresh).current == .seconds(5))
    }

    @Test func backOffIsNotShared() {
        var backedOff = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(60))
        backedOff.timedOut()
        backedOff.timedOut()
        #expect(backedOff.current == .seconds(4))
        var adopting = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(60))
        adopting.adopt(estimateOf: backedOff)
        #expect(adopting.current == .seconds(1), "a timer with no sample has no estimate to give")
        backedOff.record(roundTrip: .seconds(3))
        backedOff.timedOut()
        var other = RetransmissionTimeout(floor: .seconds(1), ceiling: .seconds(60))
        other.timedOut()
        other.adopt(estimateOf: backedOff)
        #expect(other.current == .milliseconds(9_000), "srtt 3 + 4 × 1.5 s; the adopter's own back-off ends too")
    }
}

@Suite struct AnnouncedHeartbeatIntervalTests {
    @Test func anAnnouncedIntervalIsKeptBetweenTenMillisecondsAndAMinute() {
        #expect(FleetClient.heartbeatInterval(announced: 0) == .milliseconds(10), "0 would make the keep-alive loop spin")
        #expect(FleetClient.heartbeatInterval(announced: 1_500) == .milliseconds(1_500))
        #expect(FleetClient.heartbeatInterval(announced: .max) == .seconds(60))
    }
}
