/// What the captive signing page's `<script type="application/json" id="sf-data">` block carries
/// (docs/captive-signing.md, "The page"): the one declaration of that JSON, which the coordinator
/// writes into the page and a headless client (the device library's captive signer) reads.
///
/// Encoded with Foundation's `JSONEncoder`; optional fields are left out when `nil`.
public struct SigningPageData: Codable, Sendable, Hashable {
    /// One tab of the recipient, in the order the form numbers them.
    public struct Tab: Codable, Sendable, Hashable {
        /// The tab's index: the form fields are `tab-<index>`, `sig-<index>` and `radio-<group>`.
        public var index: Int
        /// The tab type's raw value (`signHere`, `initialHere`, `text`, `checkbox`, `radio`, …).
        public var type: String
        /// Whether Finish needs it filled.
        public var required: Bool
        /// Whether the recipient may change it.
        public var locked: Bool
        /// Its current value, when it has one.
        public var value: String?
        /// A radio tab's group name.
        public var group: String?
        /// Whether a checkbox or radio tab is selected.
        public var selected: Bool

        public init(index: Int, type: String, required: Bool, locked: Bool, value: String? = nil, group: String? = nil, selected: Bool) {
            self.index = index
            self.type = type
            self.required = required
            self.locked = locked
            self.value = value
            self.group = group
            self.selected = selected
        }
    }

    /// The server's envelope id.
    public var envelopeID: String
    /// The envelope's transaction id (the device's, for an envelope that came by sync).
    public var transactionID: String
    /// The recipient signing on the page.
    public var recipientID: String
    /// Their name, as the page shows it.
    public var recipientName: String
    /// The signature pad's size in CSS pixels: `width` and `height`.
    public var canvas: [String: Int]
    /// The recipient's tabs.
    public var tabs: [Tab]

    public init(envelopeID: String, transactionID: String, recipientID: String, recipientName: String, canvas: [String: Int], tabs: [Tab]) {
        self.envelopeID = envelopeID
        self.transactionID = transactionID
        self.recipientID = recipientID
        self.recipientName = recipientName
        self.canvas = canvas
        self.tabs = tabs
    }
}
