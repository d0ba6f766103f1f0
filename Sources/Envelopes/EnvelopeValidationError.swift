/// A rule an envelope (or one of its parts) broke, naming the field at fault.
///
/// Builders validate everything they can and report errors in a stable order (envelope fields,
/// then documents, recipients, tabs and custom fields, each in index order). `build()` throws the
/// first one; `validate()` returns them all so a UI can show every problem at once.
///
/// Match on ``code`` (an opaque, extensible value) rather than on ``message``, which is for people:
///
/// ```swift
/// do {
///     let envelope = try builder.build()
/// } catch where error.code == .tabUnknownRecipient {
///     print("fix \(error.field): \(error.message)")
/// }
/// ```
public struct EnvelopeValidationError: Error, Hashable, Sendable, Codable, CustomStringConvertible {
    /// What kind of rule was broken. Compare with the static members; new codes may be added.
    public struct Code: Hashable, Sendable, Codable, CustomStringConvertible {
        /// The stable wire name of the code (for example `"tab.unknownRecipient"`).
        public let rawValue: String

        private init(_ rawValue: String) { self.rawValue = rawValue }

        public init(from decoder: any Decoder) throws {
            self.rawValue = try decoder.singleValueContainer().decode(String.self)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }

        public var description: String { rawValue }

        /// A required value is missing or blank.
        public static let missingValue = Code("value.missing")
        /// A name, email or other text is longer than its limit (100 characters for names and emails).
        public static let tooLong = Code("value.tooLong")
        /// An email address is not of the form `local@domain`.
        public static let invalidEmail = Code("value.invalidEmail")
        /// Two documents, recipients, tabs or custom fields share an id (or custom field name).
        public static let duplicateId = Code("id.duplicate")
        /// The envelope has no documents.
        public static let noDocuments = Code("envelope.noDocuments")
        /// The envelope has no recipients.
        public static let noRecipients = Code("envelope.noRecipients")
        /// A document's bytes do not start with a PDF header.
        public static let documentNotPDF = Code("document.notPDF")
        /// A document claims to be a PDF but its structure (or page count) cannot be read.
        public static let documentUnreadable = Code("document.unreadable")
        /// A routing order is below 1.
        public static let invalidRoutingOrder = Code("recipient.invalidRoutingOrder")
        /// A signer or in-person signer has no tabs to fill.
        public static let signerWithoutTabs = Code("recipient.signerWithoutTabs")
        /// A tab names a recipient id that is not in the envelope.
        public static let tabUnknownRecipient = Code("tab.unknownRecipient")
        /// A tab names a document id that is not in the envelope.
        public static let tabUnknownDocument = Code("tab.unknownDocument")
        /// A tab's page number is outside its document's pages.
        public static let tabPageOutOfRange = Code("tab.pageOutOfRange")
        /// A tab's frame has a negative origin or a non-positive size.
        public static let tabInvalidFrame = Code("tab.invalidFrame")
        /// A tab's scale is outside 0.5...2.0.
        public static let tabInvalidScale = Code("tab.invalidScale")
        /// A tab is assigned to a recipient type that never fills tabs (carbon copy, editor, …).
        public static let tabRecipientCannotSign = Code("tab.recipientCannotSign")
        /// A radio tab has no group name.
        public static let radioWithoutGroup = Code("tab.radioWithoutGroup")
        /// More than one radio button in one group is selected.
        public static let radioGroupMultipleSelected = Code("tab.radioGroupMultipleSelected")
        /// A list custom field's value is not one of its items.
        public static let listValueNotInItems = Code("customField.valueNotInItems")
        /// A template composition names a role the template does not have.
        public static let unknownTemplateRole = Code("template.unknownRole")
        /// A template composition sets a value for a tab label (or radio group) the template does not have.
        public static let unknownTemplateTabLabel = Code("template.unknownTabLabel")
    }

    /// What kind of rule was broken.
    public var code: Code
    /// The path of the field at fault, for example `"recipients[1].email"` or `"tabs[3].pageNumber"`.
    public var field: String
    /// What was wrong and what to do about it, for people.
    public var message: String

    /// Creates an error.
    public init(code: Code, field: String, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    public var description: String { "\(field): \(message) [\(code)]" }
}
