import Testing

@testable import Coordinator

/// Parsing of the signing page's url-encoded posts (the bounds and the decoding rules).
@Suite struct SigningFormTests {
    @Test func decodesPlusAsSpaceAndPercentEscapesInNamesAndValues() throws {
        let form = try SigningForm(urlEncoded: "csrf=a%2Bb&tab-3=Ann+Lee&reason=caf%C3%A9%20%26%20more&sig%2D1=%7B%22x%22%3A1%7D&empty=")
        #expect(form.fields == ["csrf": "a+b", "tab-3": "Ann Lee", "reason": "café & more", "sig-1": "{\"x\":1}", "empty": ""])
    }

    @Test func anEmptyBodyHasNoFields() throws {
        #expect(try SigningForm(urlEncoded: "").fields.isEmpty)
    }

    @Test(arguments: [
        ("action=finish&action=decline", "duplicate"),
        ("reason=100%25+and+%zz", "percent"),
        ("tab[0]=x", "tab"),
    ])
    func refusesARepeatedFieldBadPercentEncodingAndBracketedNames(body: String, mention: String) {
        #expect {
            _ = try SigningForm(urlEncoded: body)
        } throws: { error in
            guard let invalid = error as? SigningForm.Invalid else { return false }
            return invalid.message.hasPrefix("the form is not valid URL-encoded data") && invalid.message.lowercased().contains(mention)
        }
    }

    @Test func aTypedSignatureIsANameOfBoundedLengthAndItsSVGIsEscaped() throws {
        #expect(try SigningForm.typedSignature(#"{"typed":"  Bea Buyer "}"#, label: "Sign") == "Bea Buyer")
        // A drawn signature is not a typed one (and is left to the pointer parser).
        #expect(try SigningForm.typedSignature(#"{"pointerType":"pen","width":600,"height":200,"points":[]}"#, label: "Sign") == nil)
        let tooLong = String(repeating: "a", count: SigningForm.maxTypedLength + 1)
        for bad in [#"{"typed":"   "}"#, "{\"typed\":\"\(tooLong)\"}", #"{"typed":"Bea\u0007"}"#] {
            #expect(throws: SigningForm.Invalid.self, "\(bad)") { _ = try SigningForm.typedSignature(bad, label: "Sign") }
        }
        let svg = SigningForm.typedSVG("<script>&\"")
        #expect(svg.contains("&lt;script&gt;&amp;&quot;") && !svg.contains("<script>"))
    }

    @Test func refusesMoreFieldsThanItsBoundBeforeDecoding() {
        let body = (0...SigningForm.maxFields).map { "f\($0)=1" }.joined(separator: "&")
        #expect {
            _ = try SigningForm(urlEncoded: body)
        } throws: { error in
            (error as? SigningForm.Invalid)?.message == "the form has more than \(SigningForm.maxFields) fields"
        }
        let atBound = (1...SigningForm.maxFields).map { "f\($0)=1" }.joined(separator: "&")
        #expect((try? SigningForm(urlEncoded: atBound))?.fields.count == SigningForm.maxFields)
    }
}
