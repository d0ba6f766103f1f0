import Foundation
import SignatureCapture
import Testing

@testable import DeviceNode

/// The captive signer's own encoders (written by hand for speed) say what Foundation's said.
@Suite struct HeadlessEncodingTests {
    @Test func decimalsAreWrittenWithThreeDigitsAndTheRightRounding() {
        #expect(HeadlessSigningSession.decimal3(12.345) == "12.345")
        #expect(HeadlessSigningSession.decimal3(-0.5) == "-0.500")
        #expect(HeadlessSigningSession.decimal3(0) == "0.000")
        #expect(HeadlessSigningSession.decimal3(-0.0001) == "0.000", "no negative zero")
        #expect(HeadlessSigningSession.decimal3(1_000_000) == "1000000.000")
        #expect(HeadlessSigningSession.decimal3(0.0996) == "0.100")
        #expect(HeadlessSigningSession.decimal3(.nan) == "0" && HeadlessSigningSession.decimal3(-.infinity) == "0")
        #expect(HeadlessSigningSession.decimal3(1e300) == String(format: "%.3f", 1e300))
        // Seeded values in a drawing's ranges: the same text as String(format:), or (on a tie in
        // the binary value) the neighbouring thousandth.
        var random = SeededRandom(seed: 20_261_126)
        var differing = 0
        for _ in 0..<10_000 {
            let value = (random.nextDouble() - 0.5) * 4000
            let fast = HeadlessSigningSession.decimal3(value)
            let reference = String(format: "%.3f", value)
            if fast != reference {
                differing += 1
                #expect(abs((Double(fast) ?? .nan) - (Double(reference) ?? .nan)) <= 0.0010001, "\(value): \(fast) vs \(reference)")
            }
            #expect(fast.split(separator: ".").last?.count == 3)
        }
        #expect(differing < 10, "\(differing) of 10,000 differ from String(format:)")
    }

    @Test func formValuesArePercentEncodedOverUTF8() {
        #expect(HeadlessBrowser.formEncode("aZ09-._~") == "aZ09-._~")
        #expect(HeadlessBrowser.formEncode("a b&c=d+e/f") == "a%20b%26c%3Dd%2Be%2Ff")
        #expect(HeadlessBrowser.formEncode("{\"x\":[1.5]}") == "%7B%22x%22%3A%5B1.5%5D%7D")
        #expect(HeadlessBrowser.formEncode("é✓") == "%C3%A9%E2%9C%93", "non-ASCII letters are bytes to encode")
        #expect(HeadlessBrowser.formEncode("") == "")
        // What a server decodes is what was encoded.
        let text = "signer's \"name\" = Zoë & co / 100%"
        #expect(HeadlessBrowser.formEncode(text).removingPercentEncoding == text)
    }
}
