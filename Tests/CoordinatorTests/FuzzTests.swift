import Crypto
import Envelopes
import FleetProtocol
import Hummingbird
import FleetTesting
import Foundation
import MessagePack
import SignatureCapture
import SyncContract
import Testing

@testable import Coordinator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Seeded fuzzing of what the coordinator reads from devices, browsers and admins (issue #14
/// part 2): the sync payload and the rule that checks it, the signature formats inside it, the
/// signing form post, the PDF text preview and the admin API's bodies. Each input is accepted or
/// refused with the error type its API promises; a trap kills the test process, failing the run.
/// `SIGNFLEET_SEED` replays, `SIGNFLEET_FUZZ_ITERATIONS` multiplies the counts.
@Suite struct CoordinatorFuzzTests {
    /// A real item signed by a real device node (documents, recipients, tabs, a signature).
    static func realItem() async throws -> SyncItem {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (node, items) = try await signedItems(count: 1, directory: directory)
        try await node.close()
        return try #require(items.first)
    }

    static func input(_ corpus: [[UInt8]], using rng: inout SeededRandom) -> [UInt8] {
        if Bool.random(using: &rng), let original = corpus.randomElement(using: &rng),
           let mutated = FuzzMessagePack.mutate(bytes: original, using: &rng) {
            return mutated
        }
        return FuzzMutator.input(from: corpus, using: &rng)
    }

    @Test func syncPayloadsAndTheItemRuleTakeAnyBytes() async throws {
        let run = FuzzRun("fuzz sync payload")
        let item = try await Self.realItem()
        let key = Curve25519.Signing.PrivateKey()
        let start = ContinuousClock.now
        let inputs = run.count(5_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                let bytes = Self.input([item.payload], using: &rng)
                let payload: SyncPayload?
                do {
                    payload = try SyncPayload(canonicalBytes: bytes)
                } catch let error as MessagePackError {
                    findings.check(!error.message.isEmpty, "an error without a message", input: index)
                    payload = nil
                } catch {
                    findings.record("untyped error \(type(of: error)): \(error)", input: index)
                    payload = nil
                }
                if let payload {
                    findings.accept()
                    _ = try? payload.canonicalBytes()
                }
                // Signed with the key the rule is given, so it reaches every check after the signature.
                guard index % 2 == 0, let signature = try? key.signature(for: bytes) else { continue }
                let signed = SyncItem(
                    sequence: payload?.sequence ?? 1, transactionID: payload?.transactionId ?? "tx", payload: bytes,
                    signature: Array(signature))
                _ = SyncItemRule.check(signed, deviceID: payload?.deviceId ?? "d", key: key.publicKey)
            }
        }
        run.report("SyncPayload(canonicalBytes:) + SyncItemRule.check", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    @Test func signatureRecordsAndBindingsTakeAnyBytes() async throws {
        let run = FuzzRun("fuzz signature formats")
        let payload = try SyncPayload(canonicalBytes: try await Self.realItem().payload)
        let signature = try #require(payload.signatures.first)
        let start = ContinuousClock.now
        let inputs = run.count(10_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                if index % 2 == 0 {
                    do {
                        _ = try ISOSignatureRecord(bytes: FuzzMutator.input(from: [signature.isoRecord], using: &rng))
                        findings.accept()
                    } catch let error as ISORecordError {
                        findings.check(!error.message.isEmpty, "an error without a message", input: index)
                    } catch {
                        findings.record("untyped error \(type(of: error)): \(error)", input: index)
                    }
                } else {
                    do {
                        let binding = try SignatureBinding(canonicalBytes: FuzzMutator.input(from: [signature.binding], using: &rng))
                        _ = binding.canonicalBytes()
                        findings.accept()
                    } catch let error as BindingError {
                        findings.check(!error.message.isEmpty, "an error without a message", input: index)
                    } catch {
                        findings.record("untyped error \(type(of: error)): \(error)", input: index)
                    }
                }
            }
        }
        run.report("ISOSignatureRecord(bytes:) + SignatureBinding(canonicalBytes:)", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    /// A drawn signature as the page posts it.
    static let drawn: FuzzJSON = .object([
        "pointerType": .string("pen"), "width": .raw("600"), "height": .raw("200"),
        "points": .array([
            .array([.raw("10"), .raw("20"), .raw("0.5"), .raw("1000.5"), .raw("0")]),
            .array([.raw("40"), .raw("60"), .raw("0.7"), .raw("1016"), .raw("0")]),
            .array([.raw("80"), .raw("30"), .raw("0.2"), .raw("1100"), .raw("1")]),
            .array([.raw("120"), .raw("90"), .raw("0.9"), .raw("1130"), .raw("1")]),
        ]),
    ])

    static func formEncoded(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    @Test func theSigningFormTakesAnyPost() async throws {
        let run = FuzzRun("fuzz signing form")
        let payload = try SyncPayload(canonicalBytes: try await Self.realItem().payload)
        let recipient = try #require(payload.recipients.first { recipient in payload.tabs.contains { $0.recipientId == recipient.recipientId } })
        let tabs = payload.tabs.enumerated().filter { $0.element.recipientId == recipient.recipientId }.map { ($0.offset, $0.element) }
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        let start = ContinuousClock.now
        let inputs = run.count(1_200)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                var fields: [(String, String)] = [("csrf", "x"), ("action", "finish")]
                for (tabIndex, tab) in tabs {
                    switch tab.type {
                    case .signHere, .initialHere:
                        let json = Int.random(in: 0..<4, using: &rng) == 0 ? Self.drawn : Self.drawn.mutated(using: &rng)
                        fields.append(("sig-\(tabIndex)", json.rendered()))
                    default:
                        fields.append(("tab-\(tabIndex)", ["on", "x", "", String(repeating: "y", count: 10_001)].randomElement(using: &rng)!))
                    }
                }
                var body = fields.map { "\($0.0)=\(Self.formEncoded($0.1))" }.joined(separator: "&")
                if Int.random(in: 0..<4, using: &rng) == 0 {
                    body = String(decoding: FuzzMutator.mutate(Array(body.utf8), using: &rng), as: UTF8.self)
                }
                if Int.random(in: 0..<50, using: &rng) == 0 { body += String(repeating: "&a=b", count: 1000) }
                do {
                    let form = try SigningForm(urlEncoded: body)
                    let records = try form.tabValues(payload: payload, recipient: recipient, envelopeID: "env-1", at: at)
                    findings.check(records.allSatisfy { $0.pointCount ?? 0 <= PointerSignature.maxPoints }, "too many points kept", input: index)
                    findings.accept()
                } catch let error as SigningForm.Invalid {
                    findings.check(!error.message.isEmpty, "an error without a message", input: index)
                } catch {
                    findings.record("untyped error \(type(of: error)): \(error)", input: index)
                }
            }
        }
        run.report("SigningForm + tabValues", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    /// Seeded inputs (generated, and mutated one time in `mutateOneIn`) through a fast reader and
    /// the reference it stands in for: where the fast one reads an input, it must read what the
    /// reference reads; what it leaves (`nil`) goes to the reference in the code. Counts as
    /// accepted what the fast reader read.
    static func fastReaderAgrees<Value: Equatable & Sendable>(
        _ run: FuzzRun, inputs: Int, mutateOneIn: Int, generate: @escaping @Sendable (inout SeededRandom) -> String,
        fast: @escaping @Sendable (String) -> Value?, reference: @escaping @Sendable (String) -> Value?
    ) async -> FuzzFindings {
        await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                var input = generate(&rng)
                if Int.random(in: 0..<mutateOneIn, using: &rng) == 0 {
                    input = String(decoding: FuzzMutator.mutate(Array(input.utf8), using: &rng), as: UTF8.self)
                }
                guard let read = fast(input) else { continue }
                findings.accept()
                let expected = reference(input)
                findings.check(
                    expected == read, "the fast reader read \(read), the reference \(String(describing: expected)) from \(String(input.prefix(600)).debugDescription)",
                    input: index)
            }
        }
    }

    /// A drawn signature as the page posts it, in varied JSON: key order, white space, number
    /// forms (integers, fractions, exponents, signs, huge and tiny), and now and then an escape,
    /// an unknown or repeated key.
    static func drawingJSON(using rng: inout SeededRandom) -> String {
        func space() -> String { ["", "", " ", "\n ", "\t", "\r\n"].randomElement(using: &rng)! }
        func number() -> String {
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: return String(Int.random(in: -1000...100_000, using: &rng))
            case 1: return String(Double.random(in: -1000...1000, using: &rng))
            case 2: return "\(Int.random(in: -9...9, using: &rng)).\(Int.random(in: 0...99_999, using: &rng))e\(["", "+", "-"].randomElement(using: &rng)!)\(Int.random(in: 0...320, using: &rng))"
            case 3: return ["0", "-0", "0.0", "1E3", "1e400", "-1e400", "4.9e-324", "1e-400", "12345678901234567890123", "0.1e1"].randomElement(using: &rng)!
            case 4: return String(Double.random(in: 0...1, using: &rng))
            default: return String(Int.random(in: 0...600, using: &rng))
            }
        }
        let points = (0..<Int.random(in: 0...12, using: &rng)).map { _ in
            "[" + (0..<(Int.random(in: 0..<10, using: &rng) == 0 ? Int.random(in: 0...7, using: &rng) : 5)).map { _ in space() + number() + space() }.joined(separator: ",") + "]"
        }
        var fields = [
            "\"pointerType\"\(space()):\(space())\"\(["pen", "mouse", "touch", "p\\u0065n", "stylus", "é"].randomElement(using: &rng)!)\"",
            "\"width\":\(space())\(number())", "\"height\":\(number())",
            "\"points\":\(space())[" + points.joined(separator: "," + space()) + "]",
        ]
        switch Int.random(in: 0..<12, using: &rng) {
        case 0: fields.append("\"extra\":1")
        case 1: fields.append(fields[Int.random(in: 0..<fields.count, using: &rng)])
        case 2: fields.removeLast()
        default: break
        }
        fields.shuffle(using: &rng)
        return space() + "{" + space() + fields.joined(separator: space() + "," + space()) + space() + "}" + space()
    }

    /// Where `DrawingJSON` reads a drawing, `JSONDecoder` must read the same one; inputs outside
    /// its strict shape (escapes, other keys, mutated bytes) must be left to `JSONDecoder` (`nil`).
    @Test func theDrawingReaderAgreesWithJSONDecoder() async throws {
        let run = FuzzRun("fuzz drawing json")
        let inputs = run.count(10_000)
        let start = ContinuousClock.now
        let findings = await Self.fastReaderAgrees(
            run, inputs: inputs, mutateOneIn: 4, generate: { Self.drawingJSON(using: &$0) }, fast: DrawingJSON.parse,
            reference: { try? JSONDecoder().decode(DrawingJSON.Drawing.self, from: Data($0.utf8)) })
        run.report("DrawingJSON against JSONDecoder", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
        // The generator mixes in many shapes left to JSONDecoder; the reader must still take a share.
        #expect(findings.accepted > inputs / 10, "only \(findings.accepted) of \(inputs) read without JSONDecoder")
        // What the page's script (`JSON.stringify`) and the device nodes' headless signer post
        // (three decimals) must take the fast path, or it saves nothing.
        for json in [
            #"{"pointerType":"pen","width":600,"height":200,"points":[[12.5,80.25,0.5,0,0],[13,81,0.625,16.7,0],[40,90,0,33,1]]}"#,
            #"{"pointerType":"touch","width":600.000,"height":200.000,"points":[[12.345,80.250,0.000,0.000,0],[-0.500,81.000,0.000,16.667,1]]}"#,
        ] {
            let fast = DrawingJSON.parse(json)
            #expect(fast != nil, "\(json)")
            #expect(fast == (try? JSONDecoder().decode(DrawingJSON.Drawing.self, from: Data(json.utf8))))
        }
    }

    /// A form post as the page sends it (percent-encoded names and values, `+` for spaces), now
    /// and then with a repeated or bracketed name, a pair without `=`, a bad escape or raw UTF-8.
    static func formBody(using rng: inout SeededRandom) -> String {
        let pieces = ["csrf", "action", "finish", "tab-3", "sig-0", "radio-g", "%2B", "%20", "+", "%7B%22x%22%3A1%7D", "caf%C3%A9", "%E2%82", "%", "%zz", "%4", "[", "]", "=", "&", "é", "a", "0", ""]
        func word() -> String { (0..<Int.random(in: 0...4, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined() }
        let names = ["csrf", "action", "reason", "tab-1", "sig-2", "radio-g"]
        return (0..<Int.random(in: 0...6, using: &rng)).map { _ -> String in
            switch Int.random(in: 0..<10, using: &rng) {
            case 0: return word()
            case 1: return word() + "=" + word()
            default: return names.randomElement(using: &rng)! + "=" + word()
            }
        }.joined(separator: "&")
    }

    /// Where `FormFields` reads a body, Hummingbird's decoder must read the same fields; what it
    /// leaves (`nil`) goes to that decoder.
    @Test func theFormReaderAgreesWithHummingbirdsDecoder() async throws {
        let run = FuzzRun("fuzz form fields")
        let inputs = run.count(10_000)
        let start = ContinuousClock.now
        let findings = await Self.fastReaderAgrees(
            run, inputs: inputs, mutateOneIn: 5, generate: { Self.formBody(using: &$0) }, fast: FormFields.parse,
            reference: { try? URLEncodedFormDecoder().decode([String: String].self, from: $0) })
        run.report("FormFields against URLEncodedFormDecoder", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
        #expect(findings.accepted > inputs / 5, "only \(findings.accepted) of \(inputs) read without the decoder")
        // What the page posts takes the fast path.
        let page = "csrf=a%2Bb&action=finish&tab-3=Ann+Lee&sig-0=%7B%22pointerType%22%3A%22pen%22%2C%22points%22%3A%5B%5B1%2C2%5D%5D%7D"
        #expect(FormFields.parse(page) == (try URLEncodedFormDecoder().decode([String: String].self, from: page)))
    }

    @Test func pointerSignaturesWithExtremeNumbersAreRefusedNotTrapped() throws {
        // Each of these trapped or could trap on a conversion before it was checked.
        let cases: [[PointerPoint]] = [
            [PointerPoint(x: 1e308, y: 1, pressure: 0.5, time: 0, stroke: 0), PointerPoint(x: -1e308, y: 1, pressure: 0.5, time: 10, stroke: 0)],
            [PointerPoint(x: 1, y: 1e308, pressure: 1e308, time: 0, stroke: 0), PointerPoint(x: 1, y: -1e308, pressure: -1e308, time: 5, stroke: 0)],
            [PointerPoint(x: 1, y: 1, pressure: 0.5, time: -1e308, stroke: 0), PointerPoint(x: 2, y: 2, pressure: 0.5, time: 1e308, stroke: 0)],
            [PointerPoint(x: 1, y: 1, pressure: 0.5, time: 0, stroke: Int.min), PointerPoint(x: 2, y: 2, pressure: 0.5, time: 1, stroke: Int.max)],
        ]
        for points in cases {
            let signature = PointerSignature(pointerType: "pen", canvasWidth: 600, canvasHeight: 200, points: points)
            do {
                let captured = try CapturedSignature(pointer: signature, fieldID: "f", signerID: "s", startedAt: CaptureTimestamp(nanosecondsSinceEpoch: 0))
                #expect(captured.samples.allSatisfy { $0.x.isFinite && $0.y.isFinite && $0.pressure.isFinite }, "\(points)")
                _ = captured.isoRecord
                _ = captured.svg()
            } catch let error as CaptureError {
                #expect(!error.message.isEmpty)
            }
        }
    }

    @Test func thePDFTextPreviewTakesAnyBytes() async throws {
        let run = FuzzRun("fuzz pdf text preview")
        let corpus = [[UInt8](SamplePDF.make(pages: 2, title: "Fuzz (preview) \\ test"))]
        let start = ContinuousClock.now
        let inputs = run.count(3_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                let pages = PDFTextPreview.pages(Data(FuzzMutator.input(from: corpus, using: &rng)))
                findings.check(pages.count <= 10_000 && pages.allSatisfy { $0.count <= PDFTextPreview.maxRunsPerPage }, "unbounded preview", input: index)
                findings.accept()
            }
        }
        run.report("PDFTextPreview.pages", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    static let accountRequest: FuzzJSON = .object([
        "id": .string("acme"), "name": .string("Acme"), "offlineSigning": .raw("true"), "hourlyLimit": .raw("100"),
        "burstLimit": .raw("1"), "burstWindowSeconds": .raw("30"),
    ])
    static let userRequest: FuzzJSON = .object(["name": .string("Ann"), "email": .string("ann@acme.example"), "secret": .string("secret-123")])

    static func body(_ corpus: [FuzzJSON], using rng: inout SeededRandom) -> Data {
        let base = corpus.randomElement(using: &rng)!
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: return Data(FuzzMutator.randomBytes(count: Int.random(in: 0...40, using: &rng), using: &rng))
        case 1, 2: return Data(FuzzMutator.mutate(Array(base.mutated(using: &rng).rendered().utf8), using: &rng))
        default: return Data(base.mutated(using: &rng).rendered().utf8)
        }
    }

    @Test func adminBodiesDecodeOrAreRefusedAsInvalidRequests() async throws {
        let run = FuzzRun("fuzz admin api")
        let start = ContinuousClock.now
        let inputs = run.count(6_000)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let findings = await run.offPool { findings in
            var rng = SeededRandom(seed: run.seed)
            for index in 0..<inputs {
                do {
                    if index % 2 == 0 {
                        let body = try CoordinatorAdminRoutes.decode(
                            CoordinatorAdminRoutes.AccountRequest.self, from: Self.body([Self.accountRequest], using: &rng))
                        // The limits an admin may set reach the rate limiter: it must answer, not trap.
                        let defaults = RateLimits()
                        let limits = RateLimits(
                            hourly: body.hourlyLimit ?? defaults.hourly, burst: body.burstLimit ?? defaults.burst,
                            burstWindowSeconds: body.burstWindowSeconds ?? defaults.burstWindowSeconds)
                        if limits.hourly > 0, limits.burst > 0, limits.burstWindowSeconds > 0 {
                            var state = AccountRateState(limits: limits)
                            for second in 0..<3 {
                                let decision = state.admit(at: now.addingTimeInterval(Double(second)), limits: limits, accountID: "acme")
                                findings.check(decision.allowed || (decision.retryAfterMs ?? 0) >= 1, "a denial without a wait", input: index)
                            }
                        }
                    } else {
                        _ = try CoordinatorAdminRoutes.decode(CoordinatorAdminRoutes.UserRequest.self, from: Self.body([Self.userRequest], using: &rng))
                    }
                    findings.accept()
                } catch let error as FleetError {
                    findings.check(error.code == .invalidRequest && !error.message.isEmpty, "\(error)", input: index)
                } catch {
                    findings.record("untyped error \(type(of: error)): \(error)", input: index)
                }
            }
        }
        run.report("admin API bodies", inputs: inputs, accepted: findings.accepted, since: start)
        for failure in findings.failures { Issue.record("\(failure)") }
    }

    @Test func fuzzedAdminRequestsOverHTTPAreAnsweredBelow500() async throws {
        let run = FuzzRun("fuzz admin api over http")
        var rng = SeededRandom(seed: run.seed)
        let rig = try await AdminRig()
        let routes: [(path: String, corpus: [FuzzJSON])] = [
            ("/admin/accounts", [Self.accountRequest]), ("/admin/accounts/acme/users", [Self.userRequest]),
            ("/admin/accounts/none/users", [Self.userRequest]), ("/admin/devices/d-1/revoke?account=acme", [.object([:])]),
        ]
        let start = ContinuousClock.now
        let inputs = run.count(150)
        var accepted = 0
        for index in 0..<inputs {
            let route = routes[index % routes.count]
            let answer = try await rig.send("POST", route.path, json: Self.body(route.corpus, using: &rng))
            let context = "POST \(route.path) → \(answer.status) \(String(decoding: answer.body.prefix(300), as: UTF8.self)) (SIGNFLEET_SEED=\(run.seed), input \(index))"
            #expect((200..<500).contains(answer.status), "\(context)")
            if answer.status >= 400 {
                let failure = try? JSONDecoder().decode(CoordinatorAdminRoutes.Failure.self, from: answer.body)
                #expect(failure.map { !$0.message.isEmpty } == true, "\(context)")
            } else {
                accepted += 1
            }
        }
        run.report("admin API over HTTP", inputs: inputs, accepted: accepted, since: start)
        let (health, _) = try await rig.send("GET", "/health")
        #expect(health == 200)
        try await rig.stop()
    }
}

/// Traps the fuzz harness found, kept as plain regression tests.
@Suite struct TrapRegressionTests {
    @Test func aStrokeNumberOfInt64MinIsAMalformedPointNotATrap() {
        // -9.3e18 rounds to Int.min, and abs(Int.min) trapped in the stroke range check.
        let json = #"{"pointerType":"pen","width":600,"height":200,"points":[[1,1,0.5,0,-9223372036854775808],[2,2,0.5,5,0]]}"#
        #expect(throws: SigningForm.Invalid.self) { try SigningForm.pointerSignature(json, label: "Sign") }
    }

    @Test func aBurstWindowOfIntMaxIsAnsweredNotTrapped() {
        // An admin may create an account with any positive burst window; the second request
        // in it used to trap converting the wait to UInt64 milliseconds and the window to Int.
        let limits = RateLimits(hourly: 100, burst: 1, burstWindowSeconds: Int.max)
        var state = AccountRateState(limits: limits)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(state.admit(at: now, limits: limits).allowed)
        let denied = state.admit(at: now.addingTimeInterval(1), limits: limits, accountID: "acme")
        #expect(!denied.allowed)
        #expect(denied.retryAfterMs == 999_999_999_000)
        #expect(denied.message?.contains("1 request per 1000000000 s (burst)") == true, "\(denied.message ?? "")")
        // The reply header carries the window's end: it must still encode (else the reply is dropped).
        #expect(throws: Never.self) {
            try WireCodec().encodeHeader(MessageHeader(type: "error", id: 1, replyTo: 1, sentAt: now, rateLimit: denied.status))
        }
    }
}
