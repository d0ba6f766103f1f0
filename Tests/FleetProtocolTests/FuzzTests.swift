import FleetProtocol
import FleetTesting
import Foundation
import MessagePack
import SignatureCapture
import Testing

/// Seeded fuzzing of the MessagePack decoder and of every wire message (issue #14 part 2): each
/// input either decodes or fails with the typed error its API promises; a trap kills the test
/// process, which fails the run. Whatever decodes is encoded again (that must not trap either).
/// `SIGNFLEET_SEED` replays a run, `SIGNFLEET_FUZZ_ITERATIONS` multiplies the counts.
@Suite struct WireFuzzTests {
    static let when = Date(timeIntervalSince1970: 1_800_000_000.25)

    /// One valid instance of every body type, with the decoder for its type.
    struct BodyKind: Sendable {
        var name: String
        var sample: [UInt8]
        /// Decodes the body as this type and encodes it again; true when it decoded.
        var check: @Sendable (WireCodec, InboundMessage) throws(FleetError) -> Bool
    }

    static func kind<Body: FleetMessageBody>(_ body: Body) -> BodyKind {
        let codec = WireCodec()
        return BodyKind(name: Body.messageType.rawValue, sample: (try? codec.encodeBody(body)) ?? []) { codec, message throws(FleetError) in
            let decoded = try codec.decodeBody(Body.self, from: message)
            // Encoding what was accepted may refuse (a typed FleetError) but never trap.
            _ = try? codec.encodeBody(decoded)
            return true
        }
    }

    static let kinds: [BodyKind] = {
        let summary = TemplateSummary(templateID: "t-1", name: "NDA", folder: "Legal", lastModified: when)
        return [
            kind(Hello(deviceID: "d-1", client: "test")),
            kind(HelloReply(server: "s", heartbeatIntervalMs: 500, heartbeatLiveness: 3, maxMessageSize: 1 << 20, serverInstance: "i")),
            kind(Heartbeat()),
            kind(HeartbeatReply(serverInstance: "i")),
            kind(AccessTokenRequest(email: "a@example.com", secret: "s3cret")),
            kind(AccessTokenReply(accessToken: "tok", expiresAt: when)),
            kind(UserInfoRequest(accessToken: "tok")),
            kind(UserInfoReply(
                accountID: "acc", accountName: "Acme", userID: "u", userName: "Ada", email: "ada@example.com",
                host: "http://127.0.0.1:8080", offlineSigningEnabled: true)),
            kind(EnrollDevice(accessToken: "tok", deviceID: "d-1", publicKey: Array(repeating: 7, count: 32), acknowledgedThrough: 4)),
            kind(EnrollDeviceReply(deviceID: "d-1", accountID: "acc", enrolledAt: when, lastAppliedSequence: 9)),
            kind(SyncPush(deviceID: "d-1", items: (1...2).map {
                SyncItem(sequence: $0, transactionID: "tx-\($0)", payload: Array(repeating: UInt8($0), count: 40), signature: Array(repeating: 1, count: 64))
            })),
            kind(SyncAck(status: .gap, lastApplied: 3, expectedSequence: 4, results: [
                SyncItemResult(sequence: 2, outcome: .duplicate, envelopeID: "e-2"),
                SyncItemResult(sequence: 3, outcome: .rejected, reason: "bad signature"),
            ])),
            kind(SyncResultsQuery(deviceID: "tablet-1", after: 500, limit: 250)),
            kind(SyncResultsReply(lastApplied: 3, results: [
                SyncStoredResult(sequence: 1, outcome: .applied, envelopeID: "env-1", transactionID: "tx-1", envelopeSequence: 1),
                SyncStoredResult(sequence: 2, outcome: .rejected, reason: "bad signature"),
            ], nextAfter: 3)),
            kind(TemplateListRequest(accessToken: "tok", searchText: "nda", nameMatch: .prefix, folder: "Legal", start: 20, count: 10)),
            kind(TemplateListReply(templates: [summary], total: 1, nextStart: 1)),
            kind(TemplateFetchRequest(accessToken: "tok", templateID: "t-1")),
            kind(TemplateFetchReply(summary: summary, definition: [1, 2, 3])),
            kind(RecipientViewRequest(
                accessToken: "tok", envelopeID: "e-1", clientUserID: "c-1", name: "Ada", email: "ada@example.com",
                returnURL: "http://app/return", locale: "de-CH")),
            kind(SigningURLRequest(accessToken: "tok", envelopeID: "e-1", recipientID: "r-1", returnURL: "", locale: "en")),
            kind(RecipientViewReply(url: "http://127.0.0.1:8080/signing/abc", expiresAt: when, recipientID: "r-1")),
            kind(EnvelopeQuery(accessToken: "tok", envelopeID: "env-1")),
            kind(EnvelopeVoid(accessToken: "tok", envelopeID: "env-1", reason: "typo")),
            kind(RecipientAction(accessToken: "tok", envelopeID: "env-1", recipientID: "r-1", action: .decline, reason: "no")),
            kind(EnvelopeQueryReply(
                envelopeID: "env-1", status: "sent", transactionID: "tx-1", deviceID: "d-1", createdAt: when, voidReason: nil,
                recipients: [EnvelopeQueryReply.Recipient(
                    recipientID: "r-1", type: "signer", name: "Ada", routingOrder: 1, status: "sent", statusChangedAt: when)])),
            kind(FleetError(.rateLimited, "slow down", retryable: true, retryAfterMs: 1500)),
        ]
    }()

    static let headers: [[UInt8]] = [
        MessageHeader(type: "sync.push", id: 42, sentAt: when),
        MessageHeader(type: "hello.reply", id: 7, replyTo: 1, sentAt: when, rateLimit: RateLimitStatus(remaining: 9, resetAt: when)),
        MessageHeader(version: ProtocolVersion(major: 1, minor: 9), type: "error", id: .max, replyTo: 0, sentAt: when),
    ].compactMap { try? MessagePackEncoder().encode($0) }

    /// The MessagePack decoder alone: `MessagePackValue.decode` and the stream reader, on byte
    /// and value mutations of every message's frames plus random bytes.
    @Test func messagePackDecoderTakesAnyBytes() async throws {
        let run = FuzzRun("fuzz messagepack")
        let corpus = Self.kinds.map(\.sample) + Self.headers
        let start = ContinuousClock.now
        let inputs = run.count(25_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                let bytes = Self.input(corpus: corpus, using: &rng)
                do {
                    let value = try MessagePackValue.decode(bytes)
                    findings.accept()
                    _ = try? value.encoded()
                } catch let error as MessagePackError {
                    findings.check(!error.message.isEmpty, "an error without a message", input: index)
                } catch {
                    findings.record("untyped error \(type(of: error)): \(error)", input: index)
                }
                if index % 16 == 0 {
                    // The stream reader sees the same bytes in two chunks.
                    var reader = MessagePackStreamReader()
                    let cut = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count, using: &rng)
                    reader.append(Array(bytes[..<cut]))
                    reader.append(Array(bytes[cut...]))
                    do {
                        while try reader.next() != nil {}
                    } catch is MessagePackError {
                    } catch {
                        findings.record("untyped stream error \(error)", input: index)
                    }
                }
            }
        }
        run.report("MessagePackValue.decode", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    /// `WireCodec.decode` of two frames, then `decodeBody` as the header's type and as two others.
    @Test func everyMessageTypeDecodesOrRefusesWithATypedError() async throws {
        let run = FuzzRun("fuzz wire messages")
        let codec = WireCodec()
        let bodies = Self.kinds.map(\.sample)
        let start = ContinuousClock.now
        let inputs = run.count(25_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                let kind = Self.kinds.randomElement(using: &rng)!
                var header = (try? MessagePackEncoder().encode(MessageHeader(type: MessageType(kind.name), id: 1, sentAt: Self.when))) ?? []
                var body = kind.sample
                switch Int.random(in: 0..<6, using: &rng) {
                case 0: header = Self.input(corpus: Self.headers, using: &rng)
                case 1: (header, body) = (Self.input(corpus: Self.headers, using: &rng), Self.input(corpus: bodies, using: &rng))
                default: body = Self.input(corpus: [kind.sample], using: &rng)
                }
                var frames = [header, body]
                if Int.random(in: 0..<50, using: &rng) == 0 { frames = Array(frames.prefix(Int.random(in: 0...1, using: &rng))) + [[0x80]] + frames }
                let message: InboundMessage
                do {
                    message = try codec.decode(frames)
                } catch {
                    guard let failure = error as? WireDecodingFailure else {
                        findings.record("untyped error \(type(of: error)): \(error)", input: index)
                        continue
                    }
                    findings.check(!failure.error.message.isEmpty, "a wire error without a message", input: index)
                    continue
                }
                let others = (0..<2).map { _ in Self.kinds.randomElement(using: &rng)! }
                for candidate in [Self.kinds.first { $0.name == message.header.type.rawValue }].compactMap({ $0 }) + others {
                    do {
                        if try candidate.check(codec, message) { findings.accept() }
                    } catch let error as FleetError {
                        findings.check(error.code == .invalidBody && !error.message.isEmpty, "\(error)", input: index)
                    } catch {
                        findings.record("untyped error \(type(of: error)): \(error)", input: index)
                    }
                }
            }
        }
        run.report("WireCodec.decode + decodeBody", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    /// A byte mutation, a value mutation (well-formed MessagePack with extreme values), or random bytes.
    static func input(corpus: [[UInt8]], using rng: inout SeededRandom) -> [UInt8] {
        if Bool.random(using: &rng), let original = corpus.randomElement(using: &rng),
           let mutated = FuzzMessagePack.mutate(bytes: original, using: &rng) {
            return mutated
        }
        return FuzzMutator.input(from: corpus, using: &rng)
    }
}
