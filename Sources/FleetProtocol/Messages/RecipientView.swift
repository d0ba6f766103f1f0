import Foundation

/// Asks for a captive (embedded) signing URL for one recipient of a synced
/// envelope. Without `name` and `email` the server looks the recipient up by
/// `clientUserID` and fails when there is no unique match.
public struct RecipientViewRequest: FleetRequest, Hashable {
    public typealias Reply = RecipientViewReply
    public static let messageType: MessageType = "recipient.view"

    public var accessToken: String
    public var envelopeID: String
    public var clientUserID: String
    public var name: String?
    public var email: String?
    /// Where the browser goes when signing ends, with `?event=...` appended.
    public var returnURL: String
    /// A BCP 47 language tag for the page, e.g. `en` or `de-CH`.
    public var locale: String?

    public init(
        accessToken: String, envelopeID: String, clientUserID: String, name: String? = nil, email: String? = nil,
        returnURL: String, locale: String? = nil
    ) {
        self.accessToken = accessToken
        self.envelopeID = envelopeID
        self.clientUserID = clientUserID
        self.name = name
        self.email = email
        self.returnURL = returnURL
        self.locale = locale
    }
}

public struct RecipientViewReply: FleetMessageBody, Hashable {
    public static let messageType: MessageType = "recipient.view.reply"

    /// Single-use signing URL.
    public var url: String
    public var expiresAt: Date
    /// The recipient the URL signs for (the one the server looked up).
    public var recipientID: String?

    public init(url: String, expiresAt: Date, recipientID: String? = nil) {
        self.url = url
        self.expiresAt = expiresAt
        self.recipientID = recipientID
    }
}
