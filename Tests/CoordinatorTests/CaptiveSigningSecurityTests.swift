import Crypto
import DeviceNode
import Envelopes
import FleetProtocol
import Foundation
import GRDB
import SignatureCapture
import Testing

@testable import Coordinator

private let signer = EmbeddedSigner(id: "r1", name: "Bea Buyer", email: "bea@example.com", clientUserId: "cu-bea", order: 1)

/// The token, session and page rules over real HTTP: guessed or tampered tokens, CSRF,
/// escaping, the Content-Security-Policy, and what the store keeps.
@Suite(.serialized, .timeLimit(.minutes(3))) struct CaptiveSigningSecurityTests {
    /// The token at the end of a signing URL.
    private func token(_ url: String) -> String { String(url.split(separator: "/").last ?? "") }

    private func cookie(_ headers: [String: String]) -> String? {
        headers["set-cookie"].flatMap { $0.split(separator: ";").first.map(String.init) }
    }

    private func csrf(_ html: String) -> String? {
        guard let start = html.range(of: "name=\"csrf\" value=\"") else { return nil }
        return html[start.upperBound...].split(separator: "\"").first.map(String.init)
    }

    @Test func guessedAndTamperedTokensAre404WithNothingLeaked() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([signer], name: "Secret Merger"))
        let url = try await rig.url(id, .clientUserID("cu-bea"))
        let real = token(url.url)
        #expect(real.count == 43, "256 bits, base64url")
        var tampered = Array(real)
        tampered[10] = tampered[10] == "A" ? "B" : "A"
        var guessed = CaptiveSigningService.randomToken()
        if guessed == real { guessed = CaptiveSigningService.randomToken() }
        let answers = [
            try await rig.request("GET", "/signing/\(String(tampered))"), try await rig.request("GET", "/signing/\(guessed)"),
            try await rig.request("GET", "/signing/short"), try await rig.request("GET", "/signing/\(real.dropLast())%00"),
        ]
        for answer in answers {
            #expect(answer.status == 404)
            #expect(answer.body == answers[0].body, "every unknown token gets the same answer")
            #expect(!answer.body.contains("Secret Merger") && !answer.body.contains("Bea"))
            #expect(answer.headers["set-cookie"] == nil)
        }
        let post = try await rig.request("POST", "/signing/\(guessed)", body: "action=finish")
        #expect(post.status == 404)
        // The real URL still works afterwards: probing did not burn it.
        #expect(try await rig.request("GET", "/signing/\(real)").status == 200)
        // And it is single use: a second browser (no cookie) is sent back with ttl_expired and sees nothing.
        let second = try await rig.request("GET", "/signing/\(real)")
        #expect(second.status == 303)
        #expect(second.headers["location"]?.hasSuffix("event=ttl_expired") == true, "\(second.headers)")
        #expect(!second.body.contains("Secret Merger"))
        await rig.tearDown()
    }

    @Test func postsNeedTheSessionCookieAndItsCSRFToken() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([signer]))
        let url = try await rig.url(id, .clientUserID("cu-bea"))
        let page = try await rig.request("GET", url.url)
        let session = try #require(cookie(page.headers))
        #expect(page.headers["set-cookie"]?.contains("HttpOnly") == true)
        #expect(page.headers["set-cookie"]?.contains("SameSite=Strict") == true)
        let token = try #require(csrf(page.body))
        let path = "/signing/\(self.token(url.url))"

        // Without the session's cookie (expired, or another browser's) the browser is sent back
        // with an event, as a second browser is on open, and the session goes on unchanged.
        let noCookie = try await rig.request("POST", path, body: "action=later&csrf=\(token)")
        #expect(noCookie.status == 303 && noCookie.headers["location"]?.hasSuffix("event=ttl_expired") == true, "\(noCookie.headers)")
        #expect(try await rig.request("POST", path, body: "action=later", cookie: session).status == 403, "no CSRF token")
        #expect(try await rig.request("POST", path, body: "action=later&csrf=x\(token)", cookie: session).status == 403, "wrong token")
        let otherSession = "\(CaptiveSigningService.sessionCookie)=\(CaptiveSigningService.randomToken())"
        let other = try await rig.request("POST", path, body: "action=later&csrf=\(token)", cookie: otherSession)
        #expect(other.status == 303 && other.headers["location"]?.hasSuffix("event=ttl_expired") == true, "\(other.headers)")
        #expect(try await rig.envelope(id).recipients[0].status == "delivered", "refused posts changed nothing")

        // Finish without a signature: the page again (422) saying what is missing.
        let missing = try await rig.request("POST", path, body: "action=finish&csrf=\(token)&tab-1=Bern", cookie: session)
        #expect(missing.status == 422)
        #expect(missing.body.contains("sign the field"))
        let empty = try await rig.request("POST", path, body: "action=decline&csrf=\(token)&reason=%20%20", cookie: session)
        #expect(empty.status == 422)
        let later = try await rig.request("POST", path, body: "action=later&csrf=\(token)", cookie: session)
        #expect(later.status == 303)
        #expect(later.headers["location"] == "http://\(rig.http)/signing-return?event=cancel")
        await rig.tearDown()
    }

    /// The session cookie slides: every page of the session sets it again for the inactivity
    /// timeout, so an active signer keeps it past the URL's lifetime plus the timeout; a Finish
    /// after the session idled out (its cookie gone with it) still sends the app an event.
    @Test func theSessionSlidesWithActivityAndItsEndIsAnEvent() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([signer]))
        let url = try await rig.url(id, .clientUserID("cu-bea"))
        let page = try await rig.request("GET", url.url)
        let session = try #require(cookie(page.headers))
        let timeout = Int(rig.services.captive.configuration.inactivityTimeout)
        #expect(page.headers["set-cookie"]?.contains("Max-Age=\(timeout);") == true, "\(page.headers)")
        let path = "/signing/\(self.token(url.url))"
        // Active for twice lifetime + timeout: a request every half timeout keeps the session.
        for _ in 0..<6 {
            rig.clock.advance(TimeInterval(timeout / 2))
            let again = try await rig.request("GET", path, cookie: session)
            #expect(again.status == 200, "still signing")
            #expect(again.headers["set-cookie"]?.contains("Max-Age=\(timeout);") == true, "set again: \(again.headers)")
        }
        let token = try #require(csrf(try await rig.request("GET", path, cookie: session).body))
        // Idle past the timeout: the browser dropped the cookie; its Finish still gets an event.
        rig.clock.advance(TimeInterval(timeout + 1))
        let late = try await rig.request("POST", path, body: "action=finish&csrf=\(token)")
        #expect(late.status == 303 && late.headers["location"]?.hasSuffix("event=session_timeout") == true, "\(late.headers)")
        await rig.tearDown()
    }

    @Test func userStringsAreEscapedAndThePageLoadsNothingFromElsewhere() async throws {
        let rig = try await CaptiveRig()
        let evil = EmbeddedSigner(
            id: "r1", name: "<script>alert('x')</script>", email: "evil@example.com", clientUserId: "cu-evil", order: 1)
        let id = try await rig.sync(
            try CaptiveRig.envelope([evil], name: "Deal <img src=x onerror=alert(1)>", subject: "\"quoted\" & <b>bold</b>"))
        let url = try await rig.url(id, .clientUserID("cu-evil"), returnURL: "https://app.example/back")
        let page = try await rig.request("GET", url.url)
        #expect(page.status == 200)
        #expect(!page.body.contains("<script>alert"))
        #expect(!page.body.contains("<img src=x"))
        #expect(!page.body.contains("<b>bold"))
        #expect(page.body.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"))
        #expect(page.body.contains("Deal &lt;img src=x onerror=alert(1)&gt;"))
        #expect(page.body.contains("&quot;quoted&quot; &amp; &lt;b&gt;bold&lt;/b&gt;"))
        // Nothing from another origin: no absolute URLs in src/href, no external stylesheets.
        #expect(!page.body.contains("src=\"http"))
        #expect(!page.body.contains("href=\"http"))
        #expect(!page.body.contains("<link"))
        let policy = try #require(page.headers["content-security-policy"])
        #expect(policy.contains("default-src 'none'"))
        #expect(policy.contains("script-src 'nonce-"))
        #expect(!policy.contains("unsafe-inline"))
        #expect(policy.contains("form-action 'self' https://app.example"))
        #expect(policy.contains("frame-ancestors 'none'"))
        let nonce = try #require(policy.split(separator: "'").first { $0.hasPrefix("nonce-") }).dropFirst("nonce-".count)
        #expect(page.body.contains("<script nonce=\"\(nonce)\">"))
        #expect(page.headers["referrer-policy"] == "no-referrer", "the token never leaks in a Referer")
        #expect(page.headers["cache-control"] == "no-store")
        await rig.tearDown()
    }

    @Test func theLocaleChoosesThePageLanguage() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([signer]))
        let german = try await rig.services.captive.issue(
            accountID: "acme", envelopeID: id, selection: .clientUserID("cu-bea"), returnURL: "", locale: "de-CH", issuedBy: "test")
        let page = try await rig.request("GET", german.url)
        #expect(page.body.contains("<html lang=\"de-CH\">"))
        #expect(page.body.contains(">Fertigstellen<") && page.body.contains(">Ablehnen<"))
        await #expect(throws: FleetError.self) {
            _ = try await rig.services.captive.issue(
                accountID: "acme", envelopeID: id, selection: .clientUserID("cu-bea"), returnURL: "", locale: "de CH\"><x", issuedBy: "test")
        }
        await rig.tearDown()
    }

    @Test func theStoreKeepsOnlyHashesOfTokensAndSessions() async throws {
        let rig = try await CaptiveRig()
        let id = try await rig.sync(try CaptiveRig.envelope([signer]))
        let url = try await rig.url(id, .clientUserID("cu-bea"))
        let page = try await rig.request("GET", url.url)
        let session = try #require(cookie(page.headers)).split(separator: "=", maxSplits: 1)[1]
        let token = self.token(url.url)
        let rows = try await rig.temporary.store.database.read { db in try Row.fetchAll(db, sql: "SELECT * FROM captiveSession") }
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect((row["tokenHash"] as Data?) == Data(SHA256.hash(data: Data(token.utf8))))
        #expect((row["sessionHash"] as Data?) == Data(SHA256.hash(data: Data(session.utf8))))
        let everything = try await rig.temporary.store.database.read { db in
            try String.fetchAll(db, sql: "SELECT quote(tokenHash) || returnURL || quote(sessionHash) || issuedBy FROM captiveSession")
        }.joined()
        #expect(!everything.contains(token) && !everything.contains(String(session)))
        await rig.tearDown()
    }
}

@Suite struct PointerCaptureTests {
    private func strokes(pressure: Double) -> [PointerPoint] {
        var points: [PointerPoint] = []
        for step in 0..<40 {
            let i = Double(step)
            points.append(PointerPoint(x: 20 + i * 5, y: 50 + Double(step % 7) * 4, pressure: pressure, time: 1000 + i * 8, stroke: 0))
        }
        for step in 0..<30 {
            let i = Double(step)
            points.append(PointerPoint(x: 40 + i * 6, y: 120, pressure: pressure, time: 1600 + i * 8, stroke: 1))
        }
        return points
    }

    @Test func penPointsBecomeAnISORecordWithPressureAndSeparateStrokes() throws {
        let drawn = PointerSignature(pointerType: "pen", canvasWidth: 600, canvasHeight: 200, points: strokes(pressure: 0.7))
        let signature = try CapturedSignature(pointer: drawn, fieldID: "f", signerID: "s", startedAt: .epoch)
        let record = try ISOSignatureRecord(bytes: signature.isoRecord)
        #expect(record.channels == [.x, .y, .t, .f])
        let times = try #require(record.column(.t))
        #expect(times.first == 0)
        // 312 ms of the first stroke at 240 Hz, a lift, then the second stroke 600 ms after the first began.
        #expect(times.contains(144) && !times.contains(100))
        let pressure = try #require(record.column(.f))
        #expect(pressure.allSatisfy { $0 == Int32((0.7 * 1023).rounded()) })
        let xs = try #require(record.column(.x))
        #expect(xs.min() == Int32((20 * 25.4 / 96 * 100).rounded()))
        #expect(signature.renderedSegments().count > 50)
        #expect(signature.svg().contains("<svg"))
    }

    @Test func aMouseHasNoPressureChannelAndBadInputIsRefused() throws {
        let mouse = PointerSignature(pointerType: "mouse", canvasWidth: 600, canvasHeight: 200, points: strokes(pressure: 0.5))
        #expect(try ISOSignatureRecord(bytes: CapturedSignature(pointer: mouse, fieldID: "f", signerID: "s", startedAt: .epoch).isoRecord).channels == [.x, .y, .t])
        #expect(throws: CaptureError.self) {
            try CapturedSignature(pointer: PointerSignature(pointerType: "pen", canvasWidth: 5000, canvasHeight: 200, points: strokes(pressure: 1)), fieldID: "f", signerID: "s", startedAt: .epoch)
        }
        #expect(throws: CaptureError.self) {
            try CapturedSignature(pointer: PointerSignature(pointerType: "pen", canvasWidth: 600, canvasHeight: 200, points: []), fieldID: "f", signerID: "s", startedAt: .epoch)
        }
        var nan = strokes(pressure: 1)
        nan[3].x = .nan
        #expect(throws: CaptureError.self) {
            try CapturedSignature(pointer: PointerSignature(pointerType: "pen", canvasWidth: 600, canvasHeight: 200, points: nan), fieldID: "f", signerID: "s", startedAt: .epoch)
        }
    }

    /// Finite but absurd times (a crafted form post): a stroke 1e20 ms after the first used to trap
    /// converting to Int64 and take the whole coordinator down. Every one is a clear error now.
    @Test(arguments: [1e20, -1e20, 1e300, 9.3e18, 2.8e8, Double.greatestFiniteMagnitude])
    func strokeTimesFarApartAreRefusedNotATrap(gap: Double) throws {
        var points = strokes(pressure: 0.5)
        let last = points.map(\.stroke).max() ?? 0
        points.append(PointerPoint(x: 30, y: 30, pressure: 0.5, time: gap, stroke: last + 1))
        points.append(PointerPoint(x: 40, y: 40, pressure: 0.5, time: gap + 10, stroke: last + 1))
        do {
            _ = try CapturedSignature(
                pointer: PointerSignature(pointerType: "pen", canvasWidth: 600, canvasHeight: 200, points: points), fieldID: "f",
                signerID: "s", startedAt: .epoch)
            Issue.record("a stroke \(gap) ms away was accepted")
        } catch let error as CaptureError {
            #expect(error.code == .signatureTooLong || error.code == .invalidConfiguration, "\(error)")
        }
    }
}

@Suite struct SigningPageTests {
    @Test func generatedCSSNumbersHaveAtMostThreeDecimalsAndNoTrailingZeros() {
        let cases: [(Double, String)] = [
            (12, "12"), (100.5, "100.5"), (0.0005, "0.001"), (-0.25, "-0.25"), (1.0 / 3, "0.333"), (-7.0625, "-7.063"),
            (595.2756, "595.276"), (0, "0"), (.nan, "0"), (.infinity, "0"), (1e300, "0"), (14_400, "14400"),
        ]
        for (value, text) in cases { #expect(SigningPage.number(value) == text, "\(value)") }
        #expect(SigningPage.percent(50, of: 200) == "25%" && SigningPage.percent(10, of: 0) == "0%")
        #expect(SigningPage.imagePixels(PDFPageGeometry.letter) == (816, 1056))
    }

    @Test func theTextLayerOfASamplePDFIsPlacedWhereThePDFShowsIt() throws {
        let pages = PDFTextPreview.pages(SamplePDF.make(pages: 2, title: "Lease (2026) <b>"))
        #expect(pages.count == 2)
        #expect(pages[1].map(\.text) == ["Lease (2026) <b>", "Page 2 of 2"])
        let title = try #require(pages[0].first)
        #expect(title.x == 72 && title.size == 24 && title.top == 792 - 720 - 24)
        let line = try #require(pages[0].last)
        #expect(line.x == 72 && line.size == 14 && line.top == 792 - 684 - 14)
        // Garbage in, nothing out; never a crash.
        #expect(PDFTextPreview.pages(Data("%PDF-1.4 /Type /Page /Contents 99 0 R (((".utf8)) == [[]])
        #expect(PDFTextPreview.pages(Data()).isEmpty)
    }

    @Test func escapingCoversEveryMarkupCharacter() {
        #expect(SigningPage.escape(#"<a href="x">'&'</a>"#) == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;")
        #expect(SigningPage.scriptJSON(["k": "</script><!--&"]).contains(#"\u003c\/script\u003e\u003c!--\u0026"#))
        #expect(SigningPage.formSource("https://app.example:8443/x?y") == "https://app.example:8443")
        #expect(SigningPage.formSource("myapp://done") == "myapp:")
        #expect(SigningPage.formSource("https://a.example;script-src/x") == nil)
        // An internationalised host is named as browsers compare it, in IDNA's ASCII form, whether
        // the return URL spells it in punycode or in Unicode.
        #expect(SigningPage.formSource("https://xn--bcher-kva.example/done") == "https://xn--bcher-kva.example")
        #expect(SigningPage.formSource("https://bücher.example/done") == "https://xn--bcher-kva.example")
    }
}
