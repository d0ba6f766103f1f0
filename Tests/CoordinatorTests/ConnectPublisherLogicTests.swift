import FleetTesting
import Foundation
import Testing

@testable import Coordinator

/// The publisher's bookkeeping without a store or a listener: what it holds between claims and
/// POSTs (``ConnectHold``), the envelopes it keeps for a change's events (``RecentEnvelopes``),
/// and the time format its messages carry.
@Suite struct ConnectPublisherLogicTests {
    static let at = Date(timeIntervalSince1970: 1_800_000_000)

    static func delivery(_ id: Int64, configuration: String, envelope: String = "e", recordedAt: Date = at) -> ConnectDeliveryRecord {
        ConnectDeliveryRecord(
            id: id, configurationID: configuration, accountID: "acme", envelopeID: envelope, event: "envelope-sent", recipientID: nil,
            occurredAt: recordedAt, recordedAt: recordedAt, attempts: 0, nextAttemptAt: recordedAt, claimedUntil: nil, claimToken: "t\(id)",
            deliveredAt: nil, failedAt: nil, lastError: nil)
    }

    static func claimed(_ id: Int64, _ configuration: String) -> ConnectHold.Claimed {
        ConnectHold.Claimed(delivery: delivery(id, configuration: configuration), context: PassContext())
    }

    @Test func theHoldStartsTheOldestClaimedDeliveryItsBoundsAllow() {
        var hold = ConnectHold()
        hold.enqueue([Self.claimed(5, "a"), Self.claimed(1, "b"), Self.claimed(2, "b"), Self.claimed(3, "b"), Self.claimed(4, "a")])
        #expect(hold.held == ["a": 2, "b": 3] && hold.queuedTotal == 5)
        // One slot per listener, three in all: the oldest of each listener, oldest first.
        var started: [Int64] = []
        while let next = hold.start(maxInFlight: 3, perListener: 1) { started.append(next.delivery.id) }
        #expect(started == [1, 5], "b's oldest, then a's; each listener has its one slot taken")
        #expect(hold.postingTotal == 2 && hold.posting == ["a": 1, "b": 1] && hold.held == ["a": 2, "b": 3])
        // b's attempt ends: its slot goes to b's next; the outcome waits for a settling.
        hold.finish(Self.delivery(1, configuration: "b"), .delivered(at: Self.at))
        #expect(hold.outcomes == [ConnectOutcomeRecord(id: 1, token: "t1", .delivered(at: Self.at))])
        #expect(hold.start(maxInFlight: 3, perListener: 1)?.delivery.id == 2)
        #expect(hold.start(maxInFlight: 3, perListener: 1) == nil, "both listeners have their slot taken")
        #expect(hold.start(maxInFlight: 2, perListener: 5) == nil, "no slot free in all")
        // Shutting down: what was never started gives its claim back.
        hold.releaseQueued()
        #expect(hold.queuedTotal == 0 && hold.held == ["a": 1, "b": 1])
        #expect(hold.outcomes.map(\.id).sorted() == [1, 3, 4])
        #expect(hold.outcomes.filter { $0.outcome == .released }.map(\.token).sorted() == ["t3", "t4"])
    }

    @Test func aChangesEventsShareOneReadOfTheEnvelopeAndALaterChangeReadsAgain() throws {
        var recent = RecentEnvelopes(capacity: 4)
        let aggregate = EnvelopeAggregate(envelope: try Self.envelope("e1"), recipients: [])
        let first = Self.delivery(1, configuration: "a", envelope: "e1")
        #expect(recent.entry(for: first) == nil)
        let summary = Self.summary("e1")
        recent.keep(aggregate, summary: summary, include: "recipients", for: first)
        // The same change's next event (same recordedAt) finds it; a later change's does not.
        #expect(recent.entry(for: Self.delivery(2, configuration: "a", envelope: "e1"))?.summaries["recipients"]?.envelopeId == "e1")
        #expect(recent.entry(for: Self.delivery(2, configuration: "a", envelope: "e1"))?.summaries[""] == nil)
        #expect(recent.entry(for: Self.delivery(3, configuration: "a", envelope: "e1", recordedAt: Self.at.addingTimeInterval(1))) == nil)
        // Not for a retry (it shows the envelope at the retry), nor for an event the read does not
        // show (a change stamped in the same millisecond, committed after the read).
        var retry = Self.delivery(4, configuration: "a", envelope: "e1")
        retry.attempts = 1
        #expect(recent.entry(for: retry) == nil)
        var completed = Self.delivery(5, configuration: "a", envelope: "e1")
        completed.event = "envelope-completed"
        #expect(recent.entry(for: completed) == nil, "the read shows `sent`")
        // Bounded: past its capacity the older half goes.
        for index in 2...5 { recent.keep(aggregate, summary: summary, include: "recipients", for: Self.delivery(Int64(index), configuration: "a", envelope: "e\(index)")) }
        #expect(recent.count <= 4)
        #expect(recent.entry(for: first) == nil && recent.entry(for: Self.delivery(9, configuration: "a", envelope: "e5")) != nil)
    }

    /// Pruning's boundary: the first id recorded at or after the cutoff, found in a few probes
    /// whatever the outbox's length, with ids missing (pruned rows) and an empty outbox.
    @Test func thePruneBoundaryIsFoundByBinarySearch() {
        func search(_ times: [Int64: Double], cutoff: Double) -> (boundary: Int64, probes: Int) {
            var search = ConnectPruneBoundary(cutoff: Date(timeIntervalSince1970: cutoff), maxID: times.keys.max())
            var probes = 0
            while let id = search.probe {
                probes += 1
                let first = times.keys.filter { $0 >= id }.min()
                search.found(first.map { Date(timeIntervalSince1970: times[$0]!) })
            }
            return (search.boundary, probes)
        }
        let steady = Dictionary(uniqueKeysWithValues: (1...100_000).map { (Int64($0), Double($0)) })
        let found = search(steady, cutoff: 40_000.5)
        #expect(found.boundary == 40_001 && found.probes <= 18, "\(found)")
        #expect(search(steady, cutoff: 0).boundary == 0, "nothing older")
        #expect(search(steady, cutoff: 1e9).boundary == 100_001, "everything older")
        let gaps = [Int64(3): 3.0, 9: 9, 10: 10, 50: 50]
        #expect(search(gaps, cutoff: 9.5).boundary == 10)
        #expect(search(gaps, cutoff: 4).boundary == 4, "ids 4…9 lead to row 9, recorded after")
        #expect(search([:], cutoff: 10).boundary == 0)
    }

    /// The messages' times, in DocuSign's form, against Foundation's calendar for seeded dates
    /// from 1583 to 9999 (before the Gregorian reform Foundation's calendar is Julian; ISO 8601's,
    /// and these times', stays Gregorian: year 1 starts where .NET's `DateTime.MinValue` does).
    @Test func timesMatchTheGregorianCalendar() {
        let seed = testSeed("timesMatchTheGregorianCalendar")
        var generator = SeededGenerator(seed: seed)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        #expect(REST.time(Date(timeIntervalSince1970: -62_135_596_800)) == "0001-01-01T00:00:00.0000000Z")
        #expect(REST.time(Date(timeIntervalSince1970: -62_135_596_801)) == "1970-01-01T00:00:00.0000000Z", "before year 1")
        let samples = [-12_212_553_600.0, -1, 0, 0.5, 951_782_400, 4_107_542_399.999_999_9, 253_402_300_799.999]
            + (0..<2_000).map { _ in Double.random(in: -12_212_553_600 ..< 253_402_300_800, using: &generator) }
        for sample in samples {
            let date = Date(timeIntervalSince1970: sample)
            // As the date holds it (its own epoch is 2001's, so the double may differ in the last place).
            let seconds = date.timeIntervalSince1970
            // To the nearest microsecond, carried into the next second at the top.
            var whole = seconds.rounded(.down)
            var ticks = Int(((seconds - whole) * 1_000_000).rounded()) * 10
            if ticks == 10_000_000 { (whole, ticks) = (whole + 1, 0) }
            let c = calendar.dateComponents([.era, .year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: whole))
            let expected = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.%07dZ", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!, ticks)
            #expect(REST.time(date) == expected, "seed \(seed), \(seconds)")
        }
        #expect(REST.time(Date(timeIntervalSince1970: 1_800_000_000.123)) == "2027-01-15T08:00:00.1230000Z", "a millisecond time reads as written")
        #expect(REST.time(Date(timeIntervalSince1970: 59.999_999_7)) == "1970-01-01T00:01:00.0000000Z", "carried into the next second")
        #expect(REST.time(Date(timeIntervalSince1970: .nan)) == "1970-01-01T00:00:00.0000000Z")
        #expect(REST.time(Date(timeIntervalSince1970: 1e15)) == "1970-01-01T00:00:00.0000000Z")
    }

    static func envelope(_ id: String) throws -> EnvelopeRecord {
        EnvelopeRecord(
            id: id, accountID: "acme", deviceID: "d", sequence: 1, transactionID: "x", localEnvelopeID: "l", name: "n", status: "sent",
            payload: Data(), deviceSignature: Data(), createdAt: at)
    }

    static func summary(_ id: String) -> REST.Envelope {
        REST.Envelope(
            envelopeId: id, status: "sent", emailSubject: "s", createdDateTime: "t", statusChangedDateTime: "t", envelopeUri: "u",
            recipientsUri: "u", documentsUri: "u", documentsCombinedUri: "u", certificateUri: "u", customFieldsUri: "u", templatesUri: "u",
            signingLocation: "Online", envelopeIdStamping: "true", is21CFRPart11: "false")
    }
}
