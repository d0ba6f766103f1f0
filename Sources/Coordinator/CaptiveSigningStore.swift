import Foundation
import GRDB

/// The captive-signing tables (migration `v5-captive-signing`; docs/captive-signing.md).
enum CaptiveSigningStore {
    static func migrate(_ db: Database) throws {
        // One row per signing URL. The token itself is never stored, only its SHA-256; the
        // browser session (cookie) likewise.
        try db.create(table: "captiveSession") { t in
            t.primaryKey("tokenHash", .blob)
            t.column("accountID", .text).notNull().references("account", onDelete: .cascade)
            t.column("envelopeID", .text).notNull().indexed().references("envelope", onDelete: .cascade)
            t.column("recipientID", .text).notNull()
            t.column("returnURL", .text).notNull()
            t.column("locale", .text)
            t.column("issuedBy", .text).notNull()
            t.column("issuedAt", .datetime).notNull()
            t.column("expiresAt", .datetime).notNull()
            t.column("openedAt", .datetime)
            t.column("sessionHash", .blob)
            t.column("lastActivityAt", .datetime)
            t.column("finishedAt", .datetime)
            t.column("outcome", .text)
        }
        // What the recipient entered on the page, per tab of the envelope.
        try db.create(table: "captiveTab") { t in
            t.column("envelopeID", .text).notNull().references("envelope", onDelete: .cascade)
            t.column("tabIndex", .integer).notNull()
            t.column("recipientID", .text).notNull()
            t.column("type", .text).notNull()
            t.column("value", .text)
            t.column("selected", .boolean)
            t.column("isoRecord", .blob)
            t.column("svg", .text)
            t.column("pointerType", .text)
            t.column("pointCount", .integer)
            t.column("capturedAt", .datetime).notNull()
            t.primaryKey(["envelopeID", "tabIndex"])
        }
    }
}

/// A signing URL and the browser session opened with it.
struct CaptiveSessionRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "captiveSession"
    var tokenHash: Data
    var accountID: String
    var envelopeID: String
    var recipientID: String
    var returnURL: String
    var locale: String?
    /// `recipient.view:<userID>`, `signing.url.create:<userID>` or `admin`.
    var issuedBy: String
    var issuedAt: Date
    var expiresAt: Date
    var openedAt: Date?
    var sessionHash: Data?
    var lastActivityAt: Date?
    var finishedAt: Date?
    /// The `event` value the session ended with.
    var outcome: String?
}

/// One tab's value as the recipient entered it in a captive session.
struct CaptiveTabRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "captiveTab"
    var envelopeID: String
    var tabIndex: Int
    var recipientID: String
    var type: String
    var value: String?
    var selected: Bool?
    var isoRecord: Data?
    var svg: String?
    var pointerType: String?
    var pointCount: Int?
    var capturedAt: Date
}

/// A tab value stored by a captive session, for tests, checkers and operators.
public struct CaptiveTabValue: Sendable, Hashable {
    public var tabIndex: Int
    public var recipientID: String
    public var type: String
    public var value: String?
    public var selected: Bool?
    /// The ISO/IEC 19794-7 record of a signature tab.
    public var isoRecord: [UInt8]?
    public var svg: String?
    public var pointerType: String?
    public var pointCount: Int?
}
