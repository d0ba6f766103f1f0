import Testing
@testable import Envelopes

let me = SigningUser(email: "me@example.com", name: "Me")

struct RoutingCase: CustomTestStringConvertible, Sendable {
    let name: String
    let recipients: [Recipient]
    var user: SigningUser? = me
    /// Ids acting now, in order.
    let current: [String]
    let nextLocal: String?
    /// Eligibility of the envelope when cached.
    let reason: SyncEligibility.Reason
    var testDescription: String { name }
}

let inPerson = RecipientType.inPersonSigner

let routingCases: [RoutingCase] = [
    .init(name: "one in-person signer, fresh", recipients: [recipient("1", inPerson)],
          current: ["1"], nextLocal: "1", reason: .localSignerPending),
    .init(name: "one in-person signer, signed", recipients: [recipient("1", inPerson, status: .signed)],
          current: [], nextLocal: nil, reason: .allRecipientsDone),
    .init(name: "in-person signed, remote signer next",
          recipients: [recipient("1", inPerson, status: .signed), recipient("2", order: 2)],
          current: ["2"], nextLocal: nil, reason: .localSignersDone),
    .init(name: "no local signer right after compose",
          recipients: [recipient("1"), recipient("2", order: 2)],
          current: ["1"], nextLocal: nil, reason: .onlyRemoteSignersPending),
    .init(name: "no user logged in: a signer is remote",
          recipients: [recipient("1", email: "me@example.com")], user: nil,
          current: ["1"], nextLocal: nil, reason: .onlyRemoteSignersPending),
    .init(name: "self signer matches the user's email case-insensitively",
          recipients: [recipient("1", email: " Me@Example.COM")],
          current: ["1"], nextLocal: "1", reason: .localSignerPending),
    .init(name: "self signer signed, in-person next",
          recipients: [recipient("1", email: "me@example.com", status: .signed), recipient("2", inPerson, order: 2)],
          current: ["2"], nextLocal: "2", reason: .localSignerPending),
    .init(name: "parallel: two in-person and a remote, fresh",
          recipients: [recipient("1", inPerson), recipient("2", inPerson), recipient("3")],
          current: ["1", "2", "3"], nextLocal: "1", reason: .localSignerPending),
    .init(name: "parallel: first in-person signed",
          recipients: [recipient("1", inPerson, status: .signed), recipient("2", inPerson), recipient("3")],
          current: ["2", "3"], nextLocal: "2", reason: .localSignerPending),
    .init(name: "parallel: both in-person signed, remote pending in the same order",
          recipients: [recipient("1", inPerson, status: .signed), recipient("2", inPerson, status: .signed), recipient("3")],
          current: ["3"], nextLocal: nil, reason: .localSignersDone),
    .init(name: "remote first, in-person later: sync first",
          recipients: [recipient("1", order: 1), recipient("2", inPerson, order: 2)],
          current: ["1"], nextLocal: nil, reason: .onlyRemoteSignersPending),
    .init(name: "carbon copy never blocks",
          recipients: [recipient("1", .carbonCopy, order: 1), recipient("2", inPerson, order: 2)],
          current: ["2"], nextLocal: "2", reason: .localSignerPending),
    .init(name: "only a carbon copy",
          recipients: [recipient("1", .carbonCopy)],
          current: [], nextLocal: nil, reason: .allRecipientsDone),
    .init(name: "certified delivery, editor, agent and intermediary are remote and block",
          recipients: [recipient("1", .certifiedDelivery), recipient("2", .editor), recipient("3", .agent, order: 2),
                       recipient("4", .intermediary, order: 3), recipient("5", inPerson, order: 4)],
          current: ["1", "2"], nextLocal: nil, reason: .onlyRemoteSignersPending),
    .init(name: "an editor with the user's email is still remote",
          recipients: [recipient("1", .editor, email: "me@example.com")],
          current: ["1"], nextLocal: nil, reason: .onlyRemoteSignersPending),
    .init(name: "in-person declined: routing stops",
          recipients: [recipient("1", inPerson, status: .declined), recipient("2", order: 2)],
          current: [], nextLocal: nil, reason: .declined),
    .init(name: "a later decline stops routing too",
          recipients: [recipient("1", inPerson, status: .signed), recipient("2", inPerson, order: 2, status: .declined),
                       recipient("3", inPerson, order: 3)],
          current: [], nextLocal: nil, reason: .declined),
    .init(name: "gaps in routing orders and unsorted input",
          recipients: [recipient("3", inPerson, order: 10), recipient("1", inPerson, order: 1, status: .completed),
                       recipient("2", inPerson, order: 5)],
          current: ["2"], nextLocal: "2", reason: .localSignerPending),
    .init(name: "sent, delivered and auto-responded are not done",
          recipients: [recipient("1", status: .sent), recipient("2", status: .delivered), recipient("3", status: .autoResponded)],
          current: ["1", "2", "3"], nextLocal: nil, reason: .onlyRemoteSignersPending),
    .init(name: "everyone signed (remote ones too)",
          recipients: [recipient("1", inPerson, status: .signed), recipient("2", order: 2, status: .completed)],
          current: [], nextLocal: nil, reason: .allRecipientsDone),
    .init(name: "no recipients", recipients: [], current: [], nextLocal: nil, reason: .noRecipients),
]

@Suite("Routing and sync eligibility")
struct RoutingTests {
    @Test(arguments: routingCases)
    func routingTable(_ c: RoutingCase) {
        let plan = RoutingPlan(recipients: c.recipients, user: c.user)
        #expect(plan.currentRecipients.map(\.recipientId) == c.current)
        #expect(plan.nextLocalSigner?.recipientId == c.nextLocal)
        let eligibility = plan.syncEligibility(state: .cached)
        #expect(eligibility.reason == c.reason)
        let ready: Set<SyncEligibility.Reason> = [.localSignersDone, .onlyRemoteSignersPending, .allRecipientsDone, .declined]
        #expect(eligibility.isReadyForSync == ready.contains(c.reason))
        #expect(eligibility.nextLocalSigner?.recipientId == c.nextLocal)
        #expect(!eligibility.message.isEmpty)
        switch plan.resumeDecision(state: .cached) {
        case .sign(let signer): #expect(signer.recipientId == c.nextLocal)
        case .readyForSync(let e): #expect(c.nextLocal == nil && e == eligibility && e.isReadyForSync)
        case .notResumable(let e): #expect(c.nextLocal == nil && e == eligibility && !e.isReadyForSync)
        }
    }

    @Test func resumeRightAfterComposeWithoutALocalSignerSaysReadyForSync() throws {
        // The SDK's trap: resuming such an envelope used to fail obscurely.
        var envelope = Fixture.envelope()
        envelope.recipients.removeFirst()
        envelope.tabs.removeFirst()
        try envelope.apply(.compose, at: Fixture.created.addingTimeInterval(5))
        #expect(envelope.localState == .cached)
        #expect(envelope.lastModifiedAt == Fixture.created.addingTimeInterval(5))
        #expect(throws: LocalStateTransitionError(state: .cached, event: .compose)) {
            try envelope.apply(.compose, at: Fixture.created)
        }
        #expect(envelope.localState == .cached)
        #expect(envelope.resumeDecision(user: SigningUser(email: "host@example.com"))
            == .readyForSync(envelope.syncEligibility(user: nil)))
        let plan = RoutingPlan(envelope: envelope, user: SigningUser(email: "host@example.com"))
        #expect(plan.nextLocalSigner == nil)
        #expect(!plan.hasLocalSigners)
        let decision = plan.resumeDecision(state: envelope.localState)
        let expected = SyncEligibility(isReadyForSync: true, reason: .onlyRemoteSignersPending)
        #expect(decision == .readyForSync(expected))
        #expect(expected.message.hasPrefix("ready for sync"))
    }

    @Test func signingThroughTheFixtureEnvelope() throws {
        var envelope = Fixture.envelope()
        let user = SigningUser(email: "host@example.com")
        #expect(RoutingPlan(envelope: envelope, user: user).locality(of: envelope.recipients[0]) == .inPerson)
        #expect(RoutingPlan(envelope: envelope, user: user).locality(of: envelope.recipients[1]) == .remote)
        var state = try EnvelopeLocalState.draft.apply(.compose)
        guard case .sign(let signer) = RoutingPlan(envelope: envelope, user: user).resumeDecision(state: state) else {
            Issue.record("expected a local signer")
            return
        }
        #expect(signer.recipientId == "1")
        state = try state.apply(.startSigning)
        #expect(RoutingPlan(envelope: envelope, user: user).syncEligibility(state: state).reason == .signingInProgress)
        envelope.setStatus(.signed, forRecipient: "1", at: Fixture.created)
        state = try state.apply(.signerFinished)
        let plan = RoutingPlan(envelope: envelope, user: user)
        #expect(plan.currentRoutingOrder == 2)
        #expect(plan.currentRemoteRecipients.map(\.recipientId) == ["2"])
        #expect(plan.localSignerHasSigned)
        #expect(plan.resumeDecision(state: state) == .readyForSync(SyncEligibility(isReadyForSync: true, reason: .localSignersDone)))
        #expect(plan.groups.map(\.routingOrder) == [1, 2, 3])
    }

    /// Outside `cached`, the state alone decides, whatever the routing.
    static let byState: [(EnvelopeLocalState, Bool, SyncEligibility.Reason)] = [
        (.draft, false, .notComposed),
        (.signing, false, .signingInProgress),
        (.pendingSync, true, .queued),
        (.syncing, true, .queued),
        (.syncFailed, true, .queued),
        (.synced, false, .alreadySynced),
    ]

    @Test(arguments: routingCases)
    func eligibilityByState(_ c: RoutingCase) {
        let plan = RoutingPlan(recipients: c.recipients, user: c.user)
        #expect(Set(Self.byState.map(\.0)).union([.cached]) == Set(EnvelopeLocalState.allCases))
        for (state, ready, reason) in Self.byState {
            let e = plan.syncEligibility(state: state)
            #expect(e.isReadyForSync == ready && e.reason == reason, "\(state)")
            switch plan.resumeDecision(state: state) {
            case .sign: Issue.record("no signing outside cached (\(state))")
            case .readyForSync(let d): #expect(ready && d == e)
            case .notResumable(let d): #expect(!ready && d == e)
            }
        }
    }

    @Test func groupsAndLocality() {
        let plan = RoutingPlan(recipients: [recipient("a", order: 2), recipient("b", inPerson, order: 1), recipient("c", order: 2)], user: me)
        #expect(plan.groups == [
            RoutingGroup(routingOrder: 1, recipients: [plan.recipients[0]]),
            RoutingGroup(routingOrder: 2, recipients: [plan.recipients[1], plan.recipients[2]]),
        ])
        #expect(plan.recipients.map(\.recipientId) == ["b", "a", "c"])
        #expect(RecipientLocality.inPerson.isLocal && RecipientLocality.selfSigner.isLocal && !RecipientLocality.remote.isLocal)
        #expect(!plan.isComplete && !plan.isDeclined)
        #expect(plan.currentLocalSigners.map(\.recipientId) == ["b"])
    }
}

/// Every envelope of up to three recipients drawn from four kinds × two orders × three statuses,
/// checked against a reference written from the SDK's wording rather than from the implementation.
@Suite("Routing, exhaustively")
struct ExhaustiveRoutingTests {
    enum Kind: CaseIterable { case inPerson, selfSigner, remoteSigner, carbonCopy }

    static func make(_ id: Int, _ kind: Kind, _ order: Int, _ status: RecipientStatus) -> Recipient {
        switch kind {
        case .inPerson: return recipient("\(id)", .inPersonSigner, order: order, status: status)
        case .selfSigner: return recipient("\(id)", .signer, order: order, email: me.email, status: status)
        case .remoteSigner: return recipient("\(id)", .signer, order: order, status: status)
        case .carbonCopy: return recipient("\(id)", .carbonCopy, order: order, status: status)
        }
    }

    static var options: [(Kind, Int, RecipientStatus)] {
        var result: [(Kind, Int, RecipientStatus)] = []
        for kind in Kind.allCases {
            for order in [1, 2] {
                for status in [RecipientStatus.created, .signed, .declined] { result.append((kind, order, status)) }
            }
        }
        return result
    }

    @Test func everySmallEnvelopeMatchesTheReference() {
        var envelopes: [[Recipient]] = [[]]
        for size in 1...3 {
            var next: [[Recipient]] = [[]]
            for index in 0..<size {
                next = next.flatMap { prefix in Self.options.map { prefix + [Self.make(index, $0.0, $0.1, $0.2)] } }
            }
            envelopes += next
        }
        #expect(envelopes.count == 1 + 24 + 576 + 13_824)
        var checked = 0
        for recipients in envelopes {
            let plan = RoutingPlan(recipients: recipients, user: me)
            // Reference model.
            let declined = recipients.contains { $0.status == .declined }
            let pending = recipients.filter { $0.type != .carbonCopy && $0.status != .signed && $0.status != .completed }
            let isLocal = { (r: Recipient) in r.type == .inPersonSigner || (r.type == .signer && r.email == me.email) }
            let lowest = pending.map(\.routingOrder).min()
            let current = declined ? [] : recipients.filter { r in
                pending.contains(r) && r.routingOrder == lowest
            }.sorted { $0.routingOrder < $1.routingOrder }
            let nextLocal = current.first(where: isLocal)
            let localSigned = recipients.contains { isLocal($0) && ($0.status == .signed || $0.status == .completed) }

            #expect(Set(plan.currentRecipients.map(\.recipientId)) == Set(current.map(\.recipientId)), "\(recipients)")
            #expect(plan.nextLocalSigner?.recipientId == nextLocal?.recipientId, "\(recipients)")
            let e = plan.syncEligibility(state: .cached)
            let expected: SyncEligibility.Reason
            if recipients.isEmpty { expected = .noRecipients }
            else if declined { expected = .declined }
            else if nextLocal != nil { expected = .localSignerPending }
            else if pending.isEmpty { expected = .allRecipientsDone }
            else if localSigned { expected = .localSignersDone }
            else { expected = .onlyRemoteSignersPending }
            #expect(e.reason == expected, "\(recipients)")
            // The SDK rule itself: ready exactly when no local signer can sign now (or it was declined).
            #expect(e.isReadyForSync == (!recipients.isEmpty && (declined || nextLocal == nil)), "\(recipients)")
            checked += 1
        }
        #expect(checked == envelopes.count)
    }
}
