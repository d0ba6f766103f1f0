import DeviceNode
import FleetTesting
import Foundation
import Testing

// BEGIN EXAMPLE source-stability
/// What an app does with each event: the ones it knows, and a `default` for those added later.
func describe(_ event: DeviceEvent) -> String {
    switch event {
    case .signingCompleted(let done): return "signed \(done.envelope.localId)"
    case .onlineSendFailed(let failure): return "\(failure.request) failed (\(failure.reason)): \(failure.message)"
    default: return "other"                         // events added later land here
    }
}

/// Open sets of values compare with `==`; a `switch` over one needs a `default` too.
func endsTheEnvelope(_ reason: SigningExitReason) -> Bool {
    switch reason {
    case .decline: return true
    case .cancel, .tokenExpired, .ttlExpired, .sessionTimeout, .viewingComplete, .exception: return false
    default: return false                           // reasons added later
    }
}
// END EXAMPLE

@Suite("docs/embedding.md, source stability")
struct SourceStabilityExampleTests {
    @Test("the example in docs/embedding.md is this file's code, verbatim")
    func docMatchesCode() throws {
        let example = try DocExample.compare("source-stability", in: "docs/embedding.md", file: #filePath)
        #expect(example.shown == example.code)
    }

    @Test("known events and values are matched; others fall to default")
    func matches() {
        let ids = EnvelopeIDs(localId: "local-1", transactionId: "tx-1", serverId: "env-1")
        #expect(describe(.signingCompleted(SigningCompleted(envelope: ids, recipientIds: ["1"], signingMode: .offline, sequence: 1)))
            == "signed local-1")
        let failed = OnlineSendFailed(envelope: ids, recipientId: "1", request: .recipientView, reason: .refused, serverCode: "not_found",
                                      message: "no such envelope")
        #expect(describe(.onlineSendFailed(failed)) == "recipientView failed (refused): no such envelope")
        #expect(describe(.envelopeCachingStarted(ids)) == "other")
        #expect(endsTheEnvelope(.decline))
        #expect(!endsTheEnvelope(.cancel))
        #expect(!endsTheEnvelope(SigningExitReason(rawValue: "signerAbsent")), "an unknown reason is carried, and falls to default")
        #expect(SigningExitReason(rawValue: "ttlExpired") == .ttlExpired)
    }
}
