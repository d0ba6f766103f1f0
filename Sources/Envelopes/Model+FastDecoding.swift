import MessagePack

// Codable-free decoding of the model types a device's sync payload embeds
// (`SyncPayload.tabs`, `.customFields`), for the coordinator's ingest path.
// Each conformance reads exactly what the synthesized `Decodable` conformance
// reads (docs/messagepack.md, "Fast path"): keys in any order, unknown keys
// skipped, the first of duplicate keys (`where field == nil`, or a `seen` flag
// for optionals), optionals absent or nil, every non-optional key required —
// the initializers' default arguments do not apply to Codable, so not here either.
// Encoding stays Codable: the canonical bytes must not change.
// `Tests/DeviceNodeTests/PayloadFastDecodingTests.swift` checks these against the Codable path.

extension TabFrame: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var x: Double?, y: Double?, width: Double?, height: Double?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "x" where x == nil: x = try reader.readDouble()
            case "y" where y == nil: y = try reader.readDouble()
            case "width" where width == nil: width = try reader.readDouble()
            case "height" where height == nil: height = try reader.readDouble()
            default: try reader.skipValue()
            }
        }
        guard let x else { throw reader.missingKey("x") }
        guard let y else { throw reader.missingKey("y") }
        guard let width else { throw reader.missingKey("width") }
        guard let height else { throw reader.missingKey("height") }
        self.init(x: x, y: y, width: width, height: height)
    }
}

extension TabType: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        let raw = try reader.readString()
        guard let value = TabType(rawValue: raw) else {
            // The message the synthesized `RawRepresentable` decoding gives.
            throw reader.invalidValue("Cannot initialize TabType from invalid String value \(raw)")
        }
        self = value
    }
}

extension Tab: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var type: TabType?
        var tabId: String?, seenTabId = false
        var documentId: String?
        var recipientId: String?
        var pageNumber: Int?
        var frame: TabFrame?
        var label: String?, seenLabel = false
        var name: String?, seenName = false
        var value: String?, seenValue = false
        var groupName: String?, seenGroupName = false
        var scale: Double?
        var locked: Bool?
        var optional: Bool?
        var selected: Bool?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "type" where type == nil: type = try reader.read(TabType.self)
            case "tabId" where !seenTabId:
                seenTabId = true
                if try !reader.readNil() { tabId = try reader.readString() }
            case "documentId" where documentId == nil: documentId = try reader.readString()
            case "recipientId" where recipientId == nil: recipientId = try reader.readString()
            case "pageNumber" where pageNumber == nil: pageNumber = try reader.readInt()
            case "frame" where frame == nil: frame = try reader.read(TabFrame.self)
            case "label" where !seenLabel:
                seenLabel = true
                if try !reader.readNil() { label = try reader.readString() }
            case "name" where !seenName:
                seenName = true
                if try !reader.readNil() { name = try reader.readString() }
            case "value" where !seenValue:
                seenValue = true
                if try !reader.readNil() { value = try reader.readString() }
            case "groupName" where !seenGroupName:
                seenGroupName = true
                if try !reader.readNil() { groupName = try reader.readString() }
            case "scale" where scale == nil: scale = try reader.readDouble()
            case "locked" where locked == nil: locked = try reader.readBool()
            case "optional" where optional == nil: optional = try reader.readBool()
            case "selected" where selected == nil: selected = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        guard let type else { throw reader.missingKey("type") }
        guard let documentId else { throw reader.missingKey("documentId") }
        guard let recipientId else { throw reader.missingKey("recipientId") }
        guard let pageNumber else { throw reader.missingKey("pageNumber") }
        guard let frame else { throw reader.missingKey("frame") }
        guard let scale else { throw reader.missingKey("scale") }
        guard let locked else { throw reader.missingKey("locked") }
        guard let optional else { throw reader.missingKey("optional") }
        guard let selected else { throw reader.missingKey("selected") }
        self.init(type: type, tabId: tabId, documentId: documentId, recipientId: recipientId, pageNumber: pageNumber,
                  frame: frame, label: label, name: name, value: value, groupName: groupName, scale: scale,
                  locked: locked, optional: optional, selected: selected)
    }
}

extension TextCustomField: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var name: String?, value: String?
        var required: Bool?, show: Bool?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "name" where name == nil: name = try reader.readString()
            case "value" where value == nil: value = try reader.readString()
            case "required" where required == nil: required = try reader.readBool()
            case "show" where show == nil: show = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        guard let name else { throw reader.missingKey("name") }
        guard let value else { throw reader.missingKey("value") }
        guard let required else { throw reader.missingKey("required") }
        guard let show else { throw reader.missingKey("show") }
        self.init(name: name, value: value, required: required, show: show)
    }
}

extension ListCustomField: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var name: String?, value: String?
        var items: [String]?
        var required: Bool?, show: Bool?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "name" where name == nil: name = try reader.readString()
            case "value" where value == nil: value = try reader.readString()
            // Through `readArray`, so error paths name the element and the depth is restored.
            case "items" where items == nil: items = try reader.readArray(of: StringElement.self).map(\.value)
            case "required" where required == nil: required = try reader.readBool()
            case "show" where show == nil: show = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        guard let name else { throw reader.missingKey("name") }
        guard let value else { throw reader.missingKey("value") }
        guard let items else { throw reader.missingKey("items") }
        guard let required else { throw reader.missingKey("required") }
        guard let show else { throw reader.missingKey("show") }
        self.init(name: name, value: value, items: items, required: required, show: show)
    }
}

/// A `str` array element (`String` itself is not `MessagePackReadable`).
private struct StringElement: MessagePackReadable {
    var value: String
    init(from reader: inout MessagePackReader) throws { value = try reader.readString() }
}

extension CustomFields: MessagePackReadable {
    public init(from reader: inout MessagePackReader) throws {
        var text: [TextCustomField]?
        var list: [ListCustomField]?
        for _ in 0..<(try reader.readMapHeader()) {
            switch try reader.readKey() {
            case "text" where text == nil: text = try reader.readArray(of: TextCustomField.self)
            case "list" where list == nil: list = try reader.readArray(of: ListCustomField.self)
            default: try reader.skipValue()
            }
        }
        guard let text else { throw reader.missingKey("text") }
        guard let list else { throw reader.missingKey("list") }
        self.init(text: text, list: list)
    }
}
