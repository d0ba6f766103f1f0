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
package struct CaptiveSessionRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "captiveSession"
    package var tokenHash: Data
    package var accountID: String
    package var envelopeID: String
    package var recipientID: String
    package var returnURL: String
    package var locale: String?
    /// `recipient.view:<userID>`, `signing.url.create:<userID>` or `admin`.
    package var issuedBy: String
    package var issuedAt: Date
    package var expiresAt: Date
    package var openedAt: Date?
    package var sessionHash: Data?
    package var lastActivityAt: Date?
    package var finishedAt: Date?
    /// The `event` value the session ended with.
    package var outcome: String?

    package init(tokenHash: Data, accountID: String, envelopeID: String, recipientID: String, returnURL: String, locale: String? = nil, issuedBy: String, issuedAt: Date, expiresAt: Date, openedAt: Date? = nil, sessionHash: Data? = nil, lastActivityAt: Date? = nil, finishedAt: Date? = nil, outcome: String? = nil) {
        self.tokenHash = tokenHash
        self.accountID = accountID
        self.envelopeID = envelopeID
        self.recipientID = recipientID
        self.returnURL = returnURL
        self.locale = locale
        self.issuedBy = issuedBy
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.openedAt = openedAt
        self.sessionHash = sessionHash
        self.lastActivityAt = lastActivityAt
        self.finishedAt = finishedAt
        self.outcome = outcome
    }
}

/// One tab's value as the recipient entered it in a captive session.
package struct CaptiveTabRecord: Codable, FetchableRecord, PersistableRecord, Sendable {
    package static let databaseTableName = "captiveTab"
    package var envelopeID: String
    package var tabIndex: Int
    package var recipientID: String
    package var type: String
    package var value: String?
    package var selected: Bool?
    package var isoRecord: Data?
    package var svg: String?
    package var pointerType: String?
    package var pointCount: Int?
    package var capturedAt: Date

    package init(envelopeID: String, tabIndex: Int, recipientID: String, type: String, value: String? = nil, selected: Bool? = nil, isoRecord: Data? = nil, svg: String? = nil, pointerType: String? = nil, pointCount: Int? = nil, capturedAt: Date) {
        self.envelopeID = envelopeID
        self.tabIndex = tabIndex
        self.recipientID = recipientID
        self.type = type
        self.value = value
        self.selected = selected
        self.isoRecord = isoRecord
        self.svg = svg
        self.pointerType = pointerType
        self.pointCount = pointCount
        self.capturedAt = capturedAt
    }
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
