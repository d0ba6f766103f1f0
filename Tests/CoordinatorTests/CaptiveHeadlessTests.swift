import DeviceNode
import Envelopes
import FleetProtocol
import FleetTesting
import Foundation
import SignatureCapture
import Testing

@testable import Coordinator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

private let first = EmbeddedSigner(id: "r1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-bea", order: 1)
private let second = EmbeddedSigner(id: "r2", name: "Carl Cosigner", email: "carl@example.com", clientUserId: "cu-carl", order: 2)

private func isCompleted(_ event: DeviceEvent) -> Bool {
    if case .signingCompleted = event { return true }
    return false
}

private func cancelled(_ event: DeviceEvent) -> SigningCancelled? {
    if case .signingCancelled(let fields) = event { return fields }
    return nil
}

/// Device-library captive signing driving the coordinator's real HTTP endpoints (ZeroMQ for
/// `recipient.view`, a real SQLite store, real sync of the envelope first).
@Suite(.serialized, .timeLimit(.minutes(3))) struct CaptiveHeadlessTests {
    @Test func lookupByClientUserIdSignsHeadlesslyAndRoutingAdvances() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([first, second]))
        let events = rig.node.events()
        let result = try await rig.node.presentCaptiveSigning(
            envelopeId: id, recipientClientUserId: "cu-bea", service: rig.views, signer: CaptiveSigner(seed: 11, pen: .applePencil))
        #expect(result.event == .signingComplete)
        #expect(result.recipientId == "r1")
        #expect(result.redirectURL?.hasSuffix("event=signing_complete") == true)
        let event = try await captiveEvent(events, "signing completed") { isCompleted($0) }
        guard case .signingCompleted(let completed) = event else { return }
        #expect(completed.recipientIds == ["r1"])
        #expect(completed.signingMode == .online)
        #expect(completed.envelope.serverId == id)
        #expect(!completed.envelope.transactionId.isEmpty, "the page names the transaction id")

        let envelope = try await rig.envelope(id)
        #expect(envelope.status == "sent")
        #expect(envelope.recipients.map(\.status) == ["signed", "sent"], "routing moved to the second signer")
        let tabs = try await rig.services.captive.storedTabs(envelopeID: id)
        #expect(tabs.map(\.type) == ["signHere", "text", "checkbox"])
        let iso = try #require(tabs[0].isoRecord)
        let record = try ISOSignatureRecord(bytes: iso)
        #expect(record.sampleCount > 20)
        #expect(record.channels.contains(.f), "a pen reports pressure: the F channel is present")
        #expect(tabs[0].pointerType == "pen")
        #expect(tabs[0].svg?.contains("<svg") == true)
        #expect(tabs[1].value == "Bea Buyer", "text tabs get the recipient's name")
        #expect(tabs[2].selected == true)
        await rig.tearDown()
    }

    @Test func nameAndEmailVariantSignsTheNamedRecipientAndCompletes() async throws {
        let rig = try await CaptiveRig()
        let solo = EmbeddedSigner(id: "r1", name: "Dana Doe", email: "Dana@Example.com", clientUserId: "cu-dana", order: 1)
        let id = try await rig.sync(try CaptiveRig.envelope([solo]))
        let result = try await rig.node.presentCaptiveSigning(
            envelopeId: id, recipientUserName: "Dana Doe", recipientEmail: "dana@example.com", recipientClientUserId: "cu-dana",
            service: rig.views, signer: CaptiveSigner(seed: 3, pen: .finger, text: "Zürich"))
        #expect(result.event == .signingComplete)
        let envelope = try await rig.envelope(id)
        #expect(envelope.status == "completed")
        let tabs = try await rig.services.captive.storedTabs(envelopeID: id)
        #expect(tabs[1].value == "Zürich")
        let record = try ISOSignatureRecord(bytes: try #require(tabs[0].isoRecord))
        #expect(!record.channels.contains(.f), "a finger reports no pressure")
        #expect(tabs[0].pointerType == "touch")
        await rig.tearDown()
    }

    @Test func lookupWithNoOrTwoMatchesEmitsSigningCancelledWithDetails() async throws {
        let rig = try await CaptiveRig()
        let twinA = EmbeddedSigner(id: "a", name: "Twin A", email: "a@example.com", clientUserId: "cu-twin", order: 1)
        let twinB = EmbeddedSigner(id: "b", name: "Twin B", email: "b@example.com", clientUserId: "cu-twin", order: 1)
        let id = try await rig.sync(try CaptiveRig.envelope([twinA, twinB]))
        let events = rig.node.events()

        await #expect(throws: DeviceNodeError.self) {
            try await rig.node.presentCaptiveSigning(envelopeId: id, recipientClientUserId: "cu-nobody", service: rig.views, signer: CaptiveSigner(seed: 1))
        }
        let none = try #require(cancelled(try await captiveEvent(events, "cancelled: no match") { cancelled($0) != nil }))
        #expect(none.exitReason == .exception)
        #expect(none.signingMode == .online)
        #expect(none.details?.contains("no recipient with clientUserId \"cu-nobody\"") == true, "\(none.details ?? "")")

        do {
            try await rig.node.presentCaptiveSigning(envelopeId: id, recipientClientUserId: "cu-twin", service: rig.views, signer: CaptiveSigner(seed: 1))
            Issue.record("two recipients share the client user id: the lookup must fail")
        } catch let error as DeviceNodeError {
            #expect(error.code == .captiveSigningFailed)
        }
        let two = try #require(cancelled(try await captiveEvent(events, "cancelled: two matches") { cancelled($0) != nil }))
        #expect(two.details?.contains("2 recipients") == true, "\(two.details ?? "")")
        #expect(two.details?.contains("name and email") == true)

        // The name and email choose one of them (parallel signers: both are current).
        let result = try await rig.node.presentCaptiveSigning(
            envelopeId: id, recipientUserName: "Twin B", recipientEmail: "b@example.com", recipientClientUserId: "cu-twin",
            service: rig.views, signer: CaptiveSigner(seed: 2))
        #expect(result.event == .signingComplete)
        #expect(result.recipientId == "b")
        #expect(try await rig.envelope(id).recipients.first { $0.recipientID == "b" }?.status == "signed")
        await rig.tearDown()
    }

    @Test func refusedWhenNotTheRecipientsTurnNotEmbeddedOrNotSignable() async throws {
        let rig = try await CaptiveRig()
        let plain = EmbeddedSigner(id: "r3", name: "Eve Plain", email: "eve@example.com", clientUserId: nil, order: 3)
        let id = try await rig.sync(try CaptiveRig.envelope([first, second, plain]))
        let events = rig.node.events()
        await #expect(throws: DeviceNodeError.self) {
            try await rig.node.presentCaptiveSigning(envelopeId: id, recipientClientUserId: "cu-carl", service: rig.views, signer: CaptiveSigner(seed: 1))
        }
        let turn = try #require(cancelled(try await captiveEvent(events, "cancelled: wrong turn") { cancelled($0) != nil }))
        #expect(turn.details?.contains("not recipient r2's turn") == true, "\(turn.details ?? "")")
        #expect(turn.details?.contains("routing order 1 is current") == true)

        func code(_ body: () async throws -> Void) async -> (FleetErrorCode, String)? {
            do {
                try await body()
                return nil
            } catch let error as FleetError {
                return (error.code, error.message)
            } catch {
                return nil
            }
        }
        let notEmbedded = await code {
            _ = try await rig.url(id, .nameAndEmail(name: "Eve Plain", email: "eve@example.com", clientUserID: "cu-eve"))
        }
        #expect(notEmbedded?.0 == .invalidRequest)
        #expect(notEmbedded?.1.contains("not embedded") == true)
        let byID = await code { _ = try await rig.url(id, .recipientID("r3")) }
        #expect(byID?.1.contains("not embedded") == true)
        let unknown = await code { _ = try await rig.url("env-0000", .clientUserID("cu-bea")) }
        #expect(unknown?.0 == .notFound)
        let badReturn = await code { _ = try await rig.url(id, .clientUserID("cu-bea"), returnURL: "javascript:alert(1)") }
        #expect(badReturn?.0 == .invalidRequest)

        _ = try await rig.services.envelopes.void(envelopeID: id, reason: "wrong tenant", accountID: "acme")
        let voided = await code { _ = try await rig.url(id, .clientUserID("cu-bea")) }
        #expect(voided?.0 == .invalidRequest)
        #expect(voided?.1.contains("is voided") == true)
        await rig.tearDown()
    }

    @Test func integratorURLsOverZeroMQAndHTTPArePresentedWithoutLogin() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([first, second]))
        let reply = try await rig.client.request(
            SigningURLRequest(accessToken: rig.token, envelopeID: id, recipientID: "r1", returnURL: "https://app.example/done?step=2"))
        #expect(reply.recipientID == "r1")
        #expect(reply.url.hasPrefix("http://\(rig.http)/signing/"))
        #expect(reply.expiresAt == rig.clock.now().addingTimeInterval(300), "valid five minutes from issue")

        let kiosk = try await rig.anonymousDevice("kiosk")
        let events = kiosk.events()
        let result = try await kiosk.presentCaptiveSigning(signingURL: reply.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 5))
        #expect(result.event == .signingComplete)
        #expect(result.redirectURL == "https://app.example/done?step=2&event=signing_complete")
        _ = try await captiveEvent(events, "signing completed on the kiosk") { isCompleted($0) }

        // HTTP, behind the admin token.
        let body = #"{"envelopeID":"\#(id)","recipientID":"r2","returnURL":"https://app.example/signed"}"#
        var request = URLRequest(url: try #require(URL(string: "http://\(rig.http)/admin/signing-urls")))
        request.httpMethod = "POST"
        request.httpBody = Data(body.utf8)
        let unauthorized = try await URLSession.shared.data(for: request)
        #expect((unauthorized.1 as? HTTPURLResponse)?.statusCode == 401)
        request.setValue("Bearer \(CaptiveRig.adminToken)", forHTTPHeaderField: "Authorization")
        let created = try await URLSession.shared.data(for: request)
        #expect((created.1 as? HTTPURLResponse)?.statusCode == 201)
        // Times in the HTTP API are ISO 8601: Unix-time readers must not get 1995 (issue #18).
        let expiresText = try #require(
            (try JSONSerialization.jsonObject(with: created.0) as? [String: Any])?["expiresAt"] as? String, "expiresAt is a string")
        let expires = try #require(ISO8601DateFormatter().date(from: expiresText), "\(expiresText) is ISO 8601")
        #expect(abs(expires.timeIntervalSince(rig.clock.now().addingTimeInterval(300))) < 1.5, "\(expiresText)")
        let isoDecoder = JSONDecoder()
        isoDecoder.dateDecodingStrategy = .iso8601
        let url = try isoDecoder.decode(CaptiveSigningRoutes.AdminSigningURL.self, from: created.0)
        let declined = try await kiosk.presentCaptiveSigning(
            signingURL: url.url, envelopeId: id, recipientId: "r2", signer: CaptiveSigner(seed: 6, behaviour: .decline(reason: "Rent is too high")))
        #expect(declined.event == .decline)
        #expect(declined.redirectURL == "https://app.example/signed?event=decline")
        let declinedEvent = try #require(cancelled(try await captiveEvent(events, "declined") { cancelled($0) != nil }))
        #expect(declinedEvent.exitReason == .decline)
        #expect(declinedEvent.declineReason == "Rent is too high")
        let envelope = try await rig.envelope(id)
        #expect(envelope.status == "declined")
        #expect(envelope.recipients[1].declineReason == "Rent is too high")
        try await kiosk.close()
        await rig.tearDown()
    }

    @Test func finishLaterThenTheSameURLIsViewingCompleteAndANewURLSigns() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([first]))
        let events = rig.node.events()
        let url = try await rig.url(id, .clientUserID("cu-bea"), returnURL: "")
        let later = try await rig.node.presentCaptiveSigning(
            signingURL: url.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1, behaviour: .finishLater))
        #expect(later.event == .cancel)
        #expect(later.redirectURL == "http://\(rig.http)/signing-return?event=cancel", "no return URL: the coordinator's own page")
        #expect(try #require(cancelled(try await captiveEvent(events, "cancel") { cancelled($0) != nil })).exitReason == .cancel)
        #expect(try await rig.envelope(id).recipients[0].status == "delivered", "opened, not signed")

        let again = try await rig.node.presentCaptiveSigning(signingURL: url.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1))
        #expect(again.event == .viewingComplete, "single use: a finished URL never opens again")
        #expect(try #require(cancelled(try await captiveEvent(events, "viewing complete") { cancelled($0) != nil })).exitReason == .viewingComplete)

        let fresh = try await rig.url(id, .clientUserID("cu-bea"))
        #expect(try await rig.node.presentCaptiveSigning(signingURL: fresh.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1)).event == .signingComplete)
        #expect(try await rig.envelope(id).status == "completed")
        let metrics = try await rig.metrics()
        #expect(metrics.value(CaptiveSigningMetrics.issuedLabel) == 2)
        for event in ["cancel", "viewing_complete", "signing_complete"] {
            #expect(metrics.value(CaptiveSigningMetrics.redirectsLabel, ["event": event]) == 1, "\(event)\n\(metrics)")
        }
        #expect(metrics.value(CaptiveSigningMetrics.redirectsLabel, ["event": "decline"]) == 0)
        await rig.tearDown()
    }

    @Test func aServerFailureSendsTheBrowserBackWithExceptionAndChangesNothing() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([first]))
        let events = rig.node.events()
        let url = try await rig.url(id, .clientUserID("cu-bea"), returnURL: "https://app.example/back")
        _ = try await rig.node.presentCaptiveSigning(
            signingURL: url.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1, behaviour: .leaveOpen))
        // Break the store under the open page: storing the tabs on Finish fails.
        try await rig.temporary.store.database.write { db in try db.execute(sql: "DROP TABLE captiveTab") }
        let result = try await rig.node.presentCaptiveSigning(signingURL: url.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1))
        #expect(result.event == .exception)
        #expect(result.redirectURL == "https://app.example/back?event=exception")
        let failure = try #require(cancelled(try await captiveEvent(events, "exception") { cancelled($0) != nil }))
        #expect(failure.exitReason == .exception)
        #expect(failure.details != nil)
        #expect(try await rig.envelope(id).recipients[0].status == "delivered", "the failed Finish was rolled back")
        await rig.tearDown()
    }

    @Test func expiredURLAndIdleSessionEndWithTheirEvents() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([first]))
        let events = rig.node.events()
        let stale = try await rig.url(id, .clientUserID("cu-bea"))
        rig.clock.advance(301)
        let expired = try await rig.node.presentCaptiveSigning(signingURL: stale.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1))
        #expect(expired.event == .ttlExpired)
        #expect(try #require(cancelled(try await captiveEvent(events, "ttl") { cancelled($0) != nil })).exitReason == .ttlExpired)
        #expect(try await rig.envelope(id).recipients[0].status == "sent", "an expired URL changes nothing")

        let url = try await rig.url(id, .clientUserID("cu-bea"))
        rig.clock.advance(299)  // just inside the five minutes
        let open = try await rig.node.presentCaptiveSigning(
            signingURL: url.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1, behaviour: .leaveOpen))
        #expect(open.event == nil)
        #expect(rig.node.hasWebCookies)
        rig.clock.advance(1201)
        let idle = try await rig.node.presentCaptiveSigning(signingURL: url.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1))
        #expect(idle.event == .sessionTimeout)
        #expect(try #require(cancelled(try await captiveEvent(events, "timeout") { cancelled($0) != nil })).exitReason == .sessionTimeout)
        await rig.tearDown()
    }

    @Test func anOpenedURLContinuesOnlyWithItsCookieAndClearingCookiesEndsIt() async throws {
        let rig = try await CaptiveRig()
        let parallel = EmbeddedSigner(id: "r2", name: "Pat Parallel", email: "pat@example.com", clientUserId: "cu-par", order: 1)
        let id = try await rig.sync(try CaptiveRig.envelope([first, parallel]))
        let url = try await rig.url(id, .clientUserID("cu-bea"))
        _ = try await rig.node.presentCaptiveSigning(
            signingURL: url.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1, behaviour: .leaveOpen))

        // Another device (another browser) cannot use the opened URL: it is sent back with
        // ttl_expired (DocuSign's rule: the app asks for a new URL), and sees nothing of the envelope.
        let other = try await rig.anonymousDevice("other")
        let otherEvents = other.events()
        let bounced = try await other.presentCaptiveSigning(signingURL: url.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1))
        #expect(bounced.event == .ttlExpired, "\(bounced)")
        let refused = try #require(cancelled(try await captiveEvent(otherEvents, "sent back") { cancelled($0) != nil }))
        #expect(refused.exitReason == .ttlExpired)

        // The same device continues the session with its cookie and signs.
        let resumed = try await rig.node.presentCaptiveSigning(signingURL: url.url, envelopeId: id, recipientId: "r1", signer: CaptiveSigner(seed: 1))
        #expect(resumed.event == .signingComplete)

        // A parallel signer's page left open cannot be continued once the cookies are cleared.
        let secondURL = try await rig.url(id, .clientUserID("cu-par"))
        _ = try await rig.node.presentCaptiveSigning(
            signingURL: secondURL.url, envelopeId: id, recipientId: "r2", signer: CaptiveSigner(seed: 2, behaviour: .leaveOpen))
        #expect(rig.node.hasWebCookies)
        rig.node.clearAllWebCookies()
        #expect(!rig.node.hasWebCookies)
        let cleared = try await rig.node.presentCaptiveSigning(
            signingURL: secondURL.url, envelopeId: id, recipientId: "r2", signer: CaptiveSigner(seed: 2))
        #expect(cleared.event == .ttlExpired, "without its cookie the URL sends the browser back: \(cleared)")
        #expect(try await rig.envelope(id).recipients.map(\.status) == ["signed", "delivered"])
        try await other.close()
        await rig.tearDown()
    }
}
