import Testing
@testable import Envelopes

@Suite("Local state machine")
struct LocalStateTests {
    /// Columns, in this order. The test fails if the event list changes without this table.
    static let columns: [EnvelopeLocalEvent] = [
        .compose, .startSigning, .signerFinished, .finishLater, .decline, .queueForSync,
        .syncStarted, .syncSucceeded, .syncFailed, .cancelSync, .restart,
    ]

    /// Every state × event pair; `nil` is an illegal transition.
    static let table: [EnvelopeLocalState: [EnvelopeLocalState?]] = [
        //             compose  startSigning signerFinished finishLater decline  queueForSync  syncStarted syncSucceeded syncFailed   cancelSync    restart
        .draft:       [.cached, nil,         nil,           nil,        nil,     nil,          nil,        nil,          nil,         nil,          .draft],
        .cached:      [nil,     .signing,    nil,           nil,        nil,     .pendingSync, nil,        nil,          nil,         nil,          .cached],
        .signing:     [nil,     nil,         .cached,       .cached,    .cached, nil,          nil,        nil,          nil,         nil,          .cached],
        .pendingSync: [nil,     nil,         nil,           nil,        nil,     nil,          .syncing,   nil,          nil,         nil,          .pendingSync],
        .syncing:     [nil,     nil,         nil,           nil,        nil,     nil,          nil,        .synced,      .syncFailed, .pendingSync, .pendingSync],
        .syncFailed:  [nil,     nil,         nil,           nil,        nil,     nil,          .syncing,   .synced,      nil,         nil,          .syncFailed],
        .synced:      [nil,     nil,         nil,           nil,        nil,     nil,          nil,        .synced,      nil,         nil,          .synced],
    ]

    @Test func tableCoversEveryStateAndEvent() {
        #expect(Set(Self.columns) == Set(EnvelopeLocalEvent.allCases))
        #expect(Self.columns.count == EnvelopeLocalEvent.allCases.count)
        #expect(Set(Self.table.keys) == Set(EnvelopeLocalState.allCases))
        for row in Self.table.values { #expect(row.count == Self.columns.count) }
    }

    @Test(arguments: EnvelopeLocalState.allCases)
    func everyTransitionMatchesTheTable(_ state: EnvelopeLocalState) throws {
        let row = try #require(Self.table[state])
        for (event, expected) in zip(Self.columns, row) {
            if let expected {
                #expect(try state.apply(event) == expected, "\(state) + \(event)")
            } else {
                let error = #expect(throws: LocalStateTransitionError.self, "\(state) + \(event) must be refused") {
                    try state.apply(event)
                }
                #expect(error?.state == state)
                #expect(error?.event == event)
                #expect(error?.message.contains(event.rawValue) == true)
            }
        }
    }

    @Test func awaitingSyncStates() {
        let awaiting = EnvelopeLocalState.allCases.filter(\.isAwaitingSync)
        #expect(awaiting == [.pendingSync, .syncing, .syncFailed])
    }

    @Test func aTypicalLifeAndACrashMidSync() throws {
        var state = EnvelopeLocalState.draft
        for event: EnvelopeLocalEvent in [.compose, .startSigning, .finishLater, .startSigning, .signerFinished,
                                          .queueForSync, .syncStarted, .restart, .syncStarted, .syncFailed,
                                          .syncStarted, .syncSucceeded, .syncSucceeded] {
            state = try state.apply(event)
        }
        #expect(state == .synced)
    }
}

@Suite("Recipient status")
struct RecipientStatusTests {
    static let columns: [RecipientStatus] = [.created, .sent, .delivered, .signed, .completed, .declined, .autoResponded]
    /// Row: from; column: to (same order as `columns`). 1 = allowed.
    static let table: [RecipientStatus: [Int]] = [
        //               created sent delivered signed completed declined autoResponded
        .created:       [1,      1,   1,        1,     1,        1,       0],
        .sent:          [0,      1,   1,        1,     1,        1,       1],
        .delivered:     [0,      0,   1,        1,     1,        1,       0],
        .signed:        [0,      0,   0,        1,     1,        0,       0],
        .completed:     [0,      0,   0,        0,     1,        0,       0],
        .declined:      [0,      0,   0,        0,     0,        1,       0],
        .autoResponded: [0,      1,   0,        0,     0,        0,       1],
    ]

    @Test func everyChangeMatchesTheTable() throws {
        #expect(Set(Self.columns) == Set(RecipientStatus.allCases) && Self.columns.count == RecipientStatus.allCases.count)
        for from in RecipientStatus.allCases {
            let row = try #require(Self.table[from])
            for (to, allowed) in zip(Self.columns, row) {
                #expect(from.canChange(to: to) == (allowed == 1), "\(from) → \(to)")
            }
        }
        #expect(RecipientStatus.allCases.filter(\.isDone) == [.signed, .completed])
    }
}
